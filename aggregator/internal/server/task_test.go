package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/blanket-fl/blanket/shared/logreg"
)

// TestAccuracySource: with a public holdout the round's accuracy is shown
// and /api/status says "public_holdout"; for a task without public test
// data (logreg.ShapeOnly) the same round completes and updates the model,
// but no accuracy or loss is computed and the status says "none".
func TestAccuracySource(t *testing.T) {
	for _, c := range []struct {
		holdout bool
		want    string
	}{{true, "public_holdout"}, {false, "none"}} {
		h := newHarness(t, t.TempDir(), newFakeRelay(t), func(cfg *Config) {
			cfg.Task, cfg.TaskTitle = "survey", "A survey"
			if !c.holdout {
				var err error
				if cfg.Test, err = logreg.ShapeOnly(cfg.Test.Shape()); err != nil {
					t.Fatal(err)
				}
			}
		})
		h.relay.next(t)
		h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
		h.relay.next(t) // round 1 is recorded before round 2 is announced
		resp, err := http.Get(h.http.URL + "/api/status")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			RoundsOK       int      `json:"rounds_ok"`
			Accuracy       *float64 `json:"accuracy"`
			Loss           *float64 `json:"loss"`
			AccuracySource string   `json:"accuracy_source"`
			Task           string   `json:"task"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.RoundsOK != 1 || st.AccuracySource != c.want || st.Task != "survey" || (st.Accuracy != nil) != c.holdout || (st.Loss != nil) != c.holdout {
			t.Errorf("holdout %v: status %+v", c.holdout, st)
		}
		if m := h.srv.Model(); !c.holdout && allZero(m) {
			t.Error("the round did not update the model")
		}
	}
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
