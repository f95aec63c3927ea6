package analysis

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
)

var saVK = bytes.Repeat([]byte{3}, secagg.VerifyKeySize)

// saRound is a small PINE secure-summation round 4 (d = 6).
func saRound(t *testing.T) *secagg.Round {
	t.Helper()
	p, err := secagg.NewPineParams(6, 1, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	r, err := secagg.NewRound(p, 4)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// saReports shards n updates (seeded), seals every leader share to key and
// returns the sealed leader shares and the helper's 'P' message made by
// the helper's engine, and the helper's preparations.
func saReports(t *testing.T, key *sealkey.PrivateKey, r *secagg.Round, n int) (sealed [][]byte, prep []byte, he secagg.Engine, hps []secagg.Prep) {
	t.Helper()
	he, err := secagg.NewEngine(r, false, saVK)
	if err != nil {
		t.Fatal(err)
	}
	var entries []secagg.Entry
	for i := range n {
		x := []float64{0.1, -0.2, 0.3, 0, 0.05, -0.1}
		l, h, err := r.Shard(x, noise.NewSeeded(uint64(100+i)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := envelope.SealShare(key.Public().HPKE, r.ID(), envelope.ShareLeader, saConsent, l)
		if err != nil {
			t.Fatal(err)
		}
		hp := he.PrepInit(h)
		sealed, hps, entries = append(sealed, s), append(hps, hp), append(entries, hp.Entry)
	}
	prep, err = r.MarshalPrep(entries)
	if err != nil {
		t.Fatal(err)
	}
	return sealed, prep, he, hps
}

func saLeader(t *testing.T, key *sealkey.PrivateKey, r *secagg.Round) *SecAggLeader {
	t.Helper()
	le, err := secagg.NewEngine(r, true, saVK)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewSecAggLeader(key, saConsent, r, le)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// saEntries returns the helper's 'P' entries of its preparations.
func saEntries(hps []secagg.Prep) []secagg.Entry {
	es := make([]secagg.Entry, len(hps))
	for i, hp := range hps {
		es[i] = hp.Entry
	}
	return es
}

func saEngine(t *testing.T, r *secagg.Round) secagg.Engine {
	t.Helper()
	e, err := secagg.NewEngine(r, true, saVK)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func release(n int) privacy.Release { return privacy.Release{Round: 4, N: n} }

// helperAggregate finishes the helper's reports with the leader's 'M'
// message and returns its noised 'A' message (seeded noise).
func helperAggregate(t *testing.T, r *secagg.Round, he secagg.Engine, hps []secagg.Prep, msg []byte) []byte {
	t.Helper()
	ms, err := r.ParseVerdicts(msg)
	if err != nil || len(ms) != len(hps) {
		t.Fatalf("M: %v", err)
	}
	agg := he.NewAggregate()
	for i, m := range ms {
		out, err := he.Next(hps[i], m)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			if err := agg.Fold(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := agg.Share()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddNoise(noise.NewSeeded(2)); err != nil {
		t.Fatal(err)
	}
	a, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSecAggNothingUnshardsBeforeCharge: the unsharded sum exists only
// after the charge, on the path the server takes (PrepareChunk for each
// chunk, ChargeSecAgg at the relay's close): a refused charge, a failed
// persist (not even charged), a round below the minimum (neither
// persisted nor charged) and an Unshard before the charge all release
// nothing; the running aggregate is persisted before the charge; a
// charged round unshards once.
func TestSecAggNothingUnshardsBeforeCharge(t *testing.T) {
	key, err := sealkey.DeriveKey([32]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	r := saRound(t)
	sealed, prep, he, hps := saReports(t, key, r, 4)
	a := helperAggregate(t, r, he, hps, mustVerdicts(t, key, r, sealed, prep))
	var charges []privacy.Release
	var persisted [][]byte
	persist := func(agg []byte) error { persisted = append(persisted, agg); return nil }
	prepared := func() *SecAggLeader {
		t.Helper()
		charges, persisted = nil, nil
		l := saLeader(t, key, r)
		for _, c := range [][2]int{{0, 3}, {3, 4}} { // chunks of 3 and 1 reports
			p, err := r.MarshalPrep(saEntries(hps[c[0]:c[1]]))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.PrepareChunk(sealed[c[0]:c[1]], p, 2); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}

	refused := errors.New("budget")
	l := prepared()
	err = ChargeSecAgg(l, 2, release, persist, func(rel privacy.Release) error { charges = append(charges, rel); return refused })
	if !errors.Is(err, refused) || len(charges) != 1 || charges[0].N != 4 || len(persisted) != 1 {
		t.Fatalf("refused charge: err %v, charges %+v, %d persisted", err, charges, len(persisted))
	}
	if _, err := l.Unshard(noise.NewSeeded(1), a); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("unshard after a refused charge: %v", err)
	}

	disk := errors.New("disk full")
	l = prepared()
	err = ChargeSecAgg(l, 2, release, func([]byte) error { return disk }, func(rel privacy.Release) error { charges = append(charges, rel); return nil })
	if !errors.Is(err, disk) || len(charges) != 0 {
		t.Fatalf("failed persist: err %v, %d charges", err, len(charges))
	}
	if _, err := l.Unshard(noise.NewSeeded(1), a); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("unshard after a failed persist: %v", err)
	}

	l = prepared()
	err = ChargeSecAgg(l, 5, release, persist, func(rel privacy.Release) error { charges = append(charges, rel); return nil })
	if !errors.Is(err, ErrBelowMinBatch) || len(charges) != 0 || len(persisted) != 0 {
		t.Fatalf("below min batch: err %v, %d charges, %d persisted", err, len(charges), len(persisted))
	}
	if _, err := l.Unshard(noise.NewSeeded(1), a); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("unshard below the minimum batch: %v", err)
	}

	l = prepared()
	if _, err := l.Unshard(noise.NewSeeded(1), a); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("unshard before the charge: %v", err)
	}
	if err := ChargeSecAgg(l, 2, release, persist, func(rel privacy.Release) error {
		if len(persisted) != 1 {
			t.Errorf("charged with %d aggregates persisted, want 1 first", len(persisted))
		}
		charges = append(charges, rel)
		return nil
	}); err != nil || len(charges) != 1 {
		t.Fatalf("charge: %v, %d charges", err, len(charges))
	}
	if back, err := RestoreSecAggLeader(key, saConsent, r, saEngine(t, r), persisted[0]); err != nil || back.Accepted() != 4 {
		t.Fatalf("the persisted aggregate does not restore the charged leader: %v", err)
	}
	if _, err := l.PrepareChunk(sealed, prep, 2); err == nil {
		t.Fatal("a report folded after the charge")
	}
	got, err := l.Unshard(noise.NewSeeded(1), a)
	if err != nil || got.Count != 4 {
		t.Fatalf("charged unshard: %+v, %v", got, err)
	}
	if _, err := l.Unshard(noise.NewSeeded(1), a); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("second unshard: %v", err)
	}
}

func mustVerdicts(t *testing.T, key *sealkey.PrivateKey, r *secagg.Round, sealed [][]byte, prep []byte) []byte {
	t.Helper()
	m, err := saLeader(t, key, r).PrepareChunk(sealed, prep, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSecAggLeaderVerdicts: a share that does not open, a duplicated
// report and a chunked arrival give the verdicts the helper can finish
// with, and the same sum as one batch; a charged leader restored from its
// persisted aggregate unshards the same sum.
func TestSecAggLeaderVerdicts(t *testing.T) {
	key, _ := sealkey.DeriveKey([32]byte{9})
	r := saRound(t)
	sealed, _, he, hps := saReports(t, key, r, 5)
	sealed[1] = append([]byte(nil), sealed[1]...)
	sealed[1][40] ^= 1 // does not open
	sealed = append(sealed, sealed[3])
	hps = append(hps, hps[3]) // the relay let a replay through
	var entries []secagg.Entry
	for _, hp := range hps {
		entries = append(entries, hp.Entry)
	}
	l := saLeader(t, key, r)
	var ms []secagg.Entry
	for lo := 0; lo < len(sealed); lo += 4 { // chunks of 4 and 2
		hi := min(lo+4, len(sealed))
		p, err := r.MarshalPrep(entries[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.PrepareChunk(sealed[lo:hi], p, 3)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.ParseVerdicts(m)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, got...)
	}
	want := []secagg.Reason{secagg.Accepted, secagg.RejectWrongLength, secagg.Accepted, secagg.Accepted, secagg.Accepted, secagg.RejectDuplicateNonce}
	for i, m := range ms {
		if m.Reason != want[i] {
			t.Errorf("report %d: %v, want %v", i, m.Reason, want[i])
		}
	}
	if l.Accepted() != 4 || l.Reports() != 6 || l.Unopened() != 1 || l.Rejected()[secagg.RejectDuplicateNonce] != 1 {
		t.Fatalf("accepted %d reports %d unopened %d rejected %v", l.Accepted(), l.Reports(), l.Unopened(), l.Rejected())
	}
	all, err := r.MarshalVerdicts(ms)
	if err != nil {
		t.Fatal(err)
	}
	a := helperAggregate(t, r, he, hps, all)
	if err := l.Charge(2, release, func(privacy.Release) error { return nil }); err != nil {
		t.Fatal(err)
	}
	persisted, err := l.MarshalAggregate()
	if err != nil {
		t.Fatal(err)
	}
	le, _ := secagg.NewEngine(r, true, saVK)
	back, err := RestoreSecAggLeader(key, saConsent, r, le, persisted)
	if err != nil || !back.Charged() || back.Accepted() != 4 {
		t.Fatalf("restore: %v", err)
	}
	x, err := l.Unshard(noise.NewSeeded(1), a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := back.Unshard(noise.NewSeeded(1), a)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x.Sum {
		if x.Sum[i] != y.Sum[i] {
			t.Fatalf("restored sum[%d] = %d, want %d", i, y.Sum[i], x.Sum[i])
		}
	}
}
