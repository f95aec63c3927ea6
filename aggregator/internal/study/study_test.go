package study

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestPublicTaskHash: the hash is of the served bytes, which leave out the
// operator's file paths, and changes with anything the volunteers see.
func TestPublicTaskHash(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	b, sum, err := PublicTask(tk)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(b)
	if sum != hex.EncodeToString(want[:]) {
		t.Fatalf("hash %s is not of the %d bytes served", sum, len(b))
	}
	with := *tk
	with.Holdout = "/secret/path.csv"
	if b2, s2, _ := PublicTask(&with); s2 != sum || bytes.Contains(b2, []byte("secret")) {
		t.Errorf("an operator path is served or changed the public hash")
	}
	other := *tk
	other.Consent += " More."
	if _, s3, _ := PublicTask(&other); s3 == sum {
		t.Errorf("a different consent text has the same hash")
	}
}

// TestRoundsCSV: one row per round, empty cells for what a round does not
// have (no accuracy without a holdout, no times), the ledger's ε.
func TestRoundsCSV(t *testing.T) {
	acc, eps := 0.75, 1.5
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	recs := []checkpoint.RoundRecord{
		{Round: 1, Status: "ok", N: 40, Accepted: 40, CheckedIn: 41, Population: 50, Accuracy: &acc, EpsilonTightest: &eps, Method: "rdp",
			AnnouncedAt: at, FinishedAt: at.Add(time.Minute)},
		{Round: 2, Status: "aborted", Detail: "below min batch, 3 reports"},
	}
	var buf bytes.Buffer
	if err := RoundsCSV(&buf, recs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 3 || len(rows[0]) != len(roundsHeader) {
		t.Fatalf("%v: %v", err, rows)
	}
	want1 := []string{"1", "ok", "40", "40", "41", "50", "0.75", "", "1.5", "rdp", "2026-11-28T12:00:00Z", "2026-11-28T12:01:00Z", ""}
	for i, w := range want1 {
		if rows[1][i] != w {
			t.Errorf("round 1, %s: %q, want %q", roundsHeader[i], rows[1][i], w)
		}
	}
	if rows[2][6] != "" || rows[2][8] != "" || rows[2][12] != "below min batch, 3 reports" {
		t.Errorf("round 2: %v", rows[2])
	}
}

// TestConsentOf: the record names the task's consent text, its
// task.ConsentHash and the short version the join page shows.
func TestConsentOf(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	c := ConsentOf(tk)
	h := task.ConsentHash(tk)
	if c.Text != tk.Consent || c.SHA256 != hex.EncodeToString(h[:]) || c.Version != task.ConsentVersion(h) || len(c.Version) != 8 {
		t.Fatalf("ConsentOf = %+v", c)
	}
	other := *tk
	other.Consent = "Another text."
	if ConsentOf(&other).SHA256 == c.SHA256 {
		t.Fatal("two consent texts, one hash")
	}
}
