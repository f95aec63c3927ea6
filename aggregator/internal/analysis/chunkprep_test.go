package analysis

import (
	"bytes"
	"errors"
	"maps"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// TestPrepareApartMatchesPrepareChunk: chunks prepared apart (a fresh
// leader of the round, as in another replica, through the result's
// encoding) and folded with FoldPrepared give the same 'M' messages,
// counts and running aggregate as PrepareChunk; a replay within a chunk is
// rejected by PrepareApart, a replay across chunks makes FoldPrepared
// refuse (ErrNonceSeen, nothing folded) and PrepareChunk reject it.
func TestPrepareApartMatchesPrepareChunk(t *testing.T) {
	key, _ := sealkey.DeriveKey([32]byte{9})
	r := saRound(t)
	sealed, _, _, hps := saReports(t, key, r, 7)
	sealed[1] = append([]byte(nil), sealed[1]...)
	sealed[1][40] ^= 1 // does not open
	// Chunks of 4: [0 1 2 3] [4 5 4 6] [3 6 5]: report 4 replayed within
	// the second chunk (prepared apart), 3, 6 and 5 across chunks (the
	// third falls back).
	var ss [][]byte
	var es []secagg.Entry
	for _, i := range []int{0, 1, 2, 3, 4, 5, 4, 6, 3, 6, 5} {
		ss, es = append(ss, sealed[i]), append(es, hps[i].Entry)
	}
	want, got := saLeader(t, key, r), saLeader(t, key, r)
	fallbacks := 0
	for lo := 0; lo < len(ss); lo += 4 {
		hi := min(lo+4, len(ss))
		p, err := r.MarshalPrep(es[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		m1, err := want.PrepareChunk(ss[lo:hi], p, 2)
		if err != nil {
			t.Fatal(err)
		}
		apart, err := saLeader(t, key, r).PrepareApart(ss[lo:hi], p, 3)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := apart.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		cp, err := got.ParseChunkPrep(enc)
		if err != nil {
			t.Fatal(err)
		}
		before := got.Reports()
		m2, err := got.FoldPrepared(cp, p)
		if errors.Is(err, ErrNonceSeen) {
			if got.Reports() != before {
				t.Fatal("a refused prepared chunk changed the counts")
			}
			fallbacks++
			m2, err = got.PrepareChunk(ss[lo:hi], p, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m1, m2) {
			t.Fatalf("chunk at %d: the 'M' messages differ", lo)
		}
	}
	if fallbacks != 1 {
		t.Errorf("%d chunks fell back to PrepareChunk, want 1 (replays across chunks)", fallbacks)
	}
	if want.Reports() != got.Reports() || want.Accepted() != got.Accepted() || want.Unopened() != got.Unopened() ||
		!maps.Equal(want.Rejected(), got.Rejected()) {
		t.Fatalf("counts: %d %d %d %v, want %d %d %d %v", got.Reports(), got.Accepted(), got.Unopened(), got.Rejected(),
			want.Reports(), want.Accepted(), want.Unopened(), want.Rejected())
	}
	if want.Rejected()[secagg.RejectDuplicateNonce] != 4 {
		t.Errorf("duplicates %d, want 4", want.Rejected()[secagg.RejectDuplicateNonce])
	}
	a, _ := want.MarshalAggregate()
	b, _ := got.MarshalAggregate()
	if !bytes.Equal(a, b) {
		t.Fatal("the running aggregates differ")
	}
	if _, err := got.ParseChunkPrep([]byte{0, 0, 0, 9, 1}); err == nil {
		t.Fatal("a truncated prepared chunk parsed")
	}
	// A result for other reports (the first chunk's, against the second
	// chunk's 'P' message) is refused, and folds nothing.
	p1, _ := r.MarshalPrep(es[:4])
	p2, _ := r.MarshalPrep(es[4:8])
	fresh := saLeader(t, key, r)
	apart, err := saLeader(t, key, r).PrepareApart(ss[:4], p1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.FoldPrepared(apart, p2); err == nil || errors.Is(err, ErrNonceSeen) || fresh.Reports() != 0 {
		t.Fatalf("a result for other reports: %v, %d reports folded", err, fresh.Reports())
	}
	if _, err := fresh.FoldPrepared(apart, p1); err != nil || fresh.Accepted() != 3 {
		t.Fatalf("the result for its own reports: %v, %d accepted", err, fresh.Accepted())
	}
}
