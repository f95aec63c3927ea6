package analysis

import (
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/task"
)

// saConsent is the consent hash the analysis tests' leaders open under
// (task.ConsentHash of a study whose consent text is this).
var saConsent = task.ConsentTextHash("The analysis tests' consent text.")

// TestSecAggConsentBound: a report whose leader share was sealed under
// another consent text's hash (a client that showed, or was given,
// another text) does not open at the leader: it is rejected, as of the
// wrong length, counted once among the unopened, and not in the sum; the
// reports sealed under the study's hash are accepted.
func TestSecAggConsentBound(t *testing.T) {
	key, err := sealkey.DeriveKey([32]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	r := saRound(t)
	sealed, prep, _, hps := saReports(t, key, r, 4)
	// Report 2 is resealed under another consent text: same share, same
	// round, same key.
	other := task.ConsentTextHash("The analysis tests' consent text, changed.")
	pt, err := key.OpenLeaderShare(r.ID(), saConsent, sealed[2], r.LeaderShareSize())
	if err != nil {
		t.Fatal(err)
	}
	if sealed[2], err = envelope.SealShare(key.Public().HPKE, r.ID(), envelope.ShareLeader, other, pt); err != nil {
		t.Fatal(err)
	}
	l := saLeader(t, key, r)
	msg, err := l.PrepareChunk(sealed, prep, 2)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.ParseVerdicts(msg)
	if err != nil || len(ms) != 4 {
		t.Fatalf("verdicts: %v (%d)", err, len(ms))
	}
	for i, m := range ms {
		want := secagg.Accepted
		if i == 2 {
			want = secagg.RejectWrongLength
		}
		if m.Reason != want || m.Nonce != hps[i].Entry.Nonce {
			t.Errorf("report %d: verdict %v, want %v", i, m.Reason, want)
		}
	}
	if l.Accepted() != 3 || l.Unopened() != 1 || l.Reports() != 4 || l.Rejected()[secagg.RejectWrongLength] != 1 {
		t.Fatalf("accepted %d, unopened %d, reports %d, rejected %v; want 3, 1, 4, one wrong length",
			l.Accepted(), l.Unopened(), l.Reports(), l.Rejected())
	}
	// The same leader under the other text's hash opens that report and
	// none of the others.
	lo, err := NewSecAggLeader(key, other, r, saEngine(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lo.PrepareChunk(sealed, prep, 1); err != nil {
		t.Fatal(err)
	}
	if lo.Unopened() != 3 {
		t.Fatalf("a leader of another consent text opened %d reports, want 1", 4-lo.Unopened())
	}
}
