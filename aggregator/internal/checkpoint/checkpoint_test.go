package checkpoint

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSaveLoad: a saved state loads back equal; a missing file is no
// state; a file with unknown fields, another version, inconsistent rounds
// or a non-finite model is refused (a non-finite model is not saved).
func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if c, err := Load(path); c != nil || err != nil {
		t.Fatalf("missing file: %v, %v", c, err)
	}
	acc := 0.9
	want := &State{Version: Version, Round: 2, Model: []float64{0.5, -1},
		History:  []RoundRecord{{Round: 1, Status: StatusOK, Accuracy: &acc, N: 4, NP: 4}, {Round: 2, Status: StatusAborted}},
		Open:     &Open{Round: 3, AnnouncedAt: time.Unix(100, 0).UTC(), Deadline: time.Unix(160, 0).UTC()},
		Charging: &Charging{Round: 3, Digest: "ab"}, ModelResets: []int{1}}
	if err := want.Save(path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode().Perm(), err)
	}
	got, err := Load(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, want)
	}
	for name, body := range map[string]string{
		"unknown field":                 `{"version":1,"round":0,"params":{},"model":[],"history":[],"extra":1}`,
		"version":                       `{"version":2,"round":0,"params":{},"model":[],"history":[]}`,
		"open not after the last round": `{"version":1,"round":3,"params":{},"model":[],"history":[],"open":{"round":3}}`,
		"negative round":                `{"version":1,"round":-1,"params":{},"model":[],"history":[]}`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), "checkpoint: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// JSON has no infinities: a non-finite model is never written.
	if err := (&State{Version: Version, Model: []float64{math.Inf(1)}}).Save(path); err == nil {
		t.Error("a non-finite model was saved")
	}
}
