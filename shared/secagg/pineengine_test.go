package secagg

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

func pineRound(t testing.TB, dim int, sigma float64, maxReports int, id uint64) *Round {
	t.Helper()
	p, err := NewPineParams(dim, 1, sigma, maxReports)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRound(p, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// overNorm adds k (fixed-point units) to the gradient share inside a PINE
// leader share (the first Dim Field64 elements after the header, nonce
// and public share): what a malicious volunteer can do to the bytes it
// sends after sharding honestly.
func overNorm(r *Round, leader []byte, k []int64) []byte {
	b := append([]byte(nil), leader...)
	const q = 0xffffffff00000001
	off := headerLen + nonceSize + r.publicLen
	for i, v := range k {
		x := binary.LittleEndian.Uint64(b[off+8*i:])
		a := uint64(v)
		if v < 0 {
			a = q - uint64(-v)
		}
		s, c := x+a, uint64(0)
		if s < x {
			c = 1
		}
		if c == 1 || s >= q {
			s -= q
		}
		binary.LittleEndian.PutUint64(b[off+8*i:], s)
	}
	return b
}

// TestPineEngine: honest PINE reports are accepted and sum exactly (no
// noise) to the sum of their fixed-point encodings; a report whose leader
// share was shifted to norm 3 NormBound is rejected by the proof
// (RejectInvalidProof), one with a flipped helper seed by the joint
// randomness or proof check; the running aggregate survives persistence.
func TestPineEngine(t *testing.T) {
	const d = 20
	r := pineRound(t, d, 0, 16, 9)
	if r.Params().Sensitivity() != float64(r.Pine().Config().L2NormBound) {
		t.Fatalf("sensitivity %v, pine's bound %d", r.Params().Sensitivity(), r.Pine().Config().L2NormBound)
	}
	if got := r.HelperShareSize(); got != headerLen+nonceSize+128+128 {
		t.Fatalf("helper share %d bytes", got)
	}
	data := noise.NewSeeded(3)
	var reps []report
	for i := range 4 {
		x := randomUpdate(data, d, 0.5)
		l, h, err := r.Shard(x, noise.NewSeeded(uint64(100+i)))
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, report{leader: l, helper: h})
	}
	// Over-norm: +3 NormBound on coordinate 0 of an honest report.
	x := randomUpdate(data, d, 0.5)
	l, h, err := r.Shard(x, noise.NewSeeded(200))
	if err != nil {
		t.Fatal(err)
	}
	k := make([]int64, d)
	k[0] = 3 * int64(r.p.NormBound)
	bad := report{leader: overNorm(r, l, k), helper: h}
	tampered := reps[3]
	tampered.helper = append([]byte(nil), tampered.helper...)
	tampered.helper[len(tampered.helper)-1] ^= 1
	lead, help, verdicts := runEngines(t, r, []report{reps[0], bad, reps[1], reps[2], tampered})
	wantReasons := []Reason{Accepted, RejectInvalidProof, Accepted, Accepted}
	for i, w := range wantReasons {
		if verdicts[i].Reason != w {
			t.Errorf("report %d: %v, want %v", i, verdicts[i].Reason, w)
		}
	}
	if verdicts[4].Reason == Accepted {
		t.Error("report with a tampered helper seed accepted")
	}
	// Persist and resume the helper's running aggregate.
	enc, err := help.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	help2, err := r.ParseAggregate(enc)
	if err != nil || help2.Count() != 3 {
		t.Fatalf("resume: %v (count %d)", err, help2.Count())
	}
	ls, err := lead.Share()
	if err != nil {
		t.Fatal(err)
	}
	hs, err := help2.Share()
	if err != nil {
		t.Fatal(err)
	}
	hmsg, err := hs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Unshard(ls, hmsg)
	if err != nil {
		t.Fatal(err)
	}
	// Expected: the first three honest reports.
	exp := make([]int64, d)
	data = noise.NewSeeded(3)
	for range 3 {
		x := randomUpdate(data, d, 0.5)
		c, _ := clipL2(x, r.p.Clip)
		e, _ := r.pn.Encode(c)
		for j := range exp {
			exp[j] += e[j]
		}
	}
	if res.Count != 3 {
		t.Fatalf("count %d, want 3", res.Count)
	}
	for j := range exp {
		if res.Sum[j] != exp[j] {
			t.Fatalf("sum[%d] = %d, want %d", j, res.Sum[j], exp[j])
		}
		if m := float64(exp[j]) / (3 * r.p.Scale); math.Abs(res.Mean[j]-m) > 1e-12 {
			t.Fatalf("mean[%d] = %v, want %v", j, res.Mean[j], m)
		}
	}
}

// TestPineNoise: with sigma > 0 each server's share must carry noise
// (MarshalBinary refuses otherwise), Unshard needs both, and the noisy
// sum differs from the exact one by the two discrete Gaussians: over
// d = 2000 coordinates at sigma = 50 the sample variance of the error is
// within 10% of 2 sigma^2 (fixed seed; the sample variance has relative
// standard deviation sqrt(2/2000) = 3.2%, so 10% is 3.2 standard
// deviations: false failure below 0.2%).
func TestPineNoise(t *testing.T) {
	const d, sigma = 2000, 50.0
	r := pineRound(t, d, sigma, 4, 2)
	le, _ := NewEngine(r, true, testVK)
	he, _ := NewEngine(r, false, testVK)
	x := make([]float64, d)
	l, h, err := r.Shard(x, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	la, ha := le.NewAggregate(), he.NewAggregate()
	hp := he.PrepInit(h)
	m, out := le.Decide(le.PrepInit(l), hp.Entry)
	if m.Reason != Accepted {
		t.Fatalf("verdict %v", m.Reason)
	}
	hout, err := he.Next(hp, m)
	if err != nil {
		t.Fatal(err)
	}
	if la.Fold(out) != nil || ha.Fold(hout) != nil {
		t.Fatal("fold")
	}
	ls, _ := la.Share()
	hs, _ := ha.Share()
	if _, err := hs.MarshalBinary(); err == nil {
		t.Fatal("un-noised share marshalled with sigma > 0")
	}
	if ls.AddNoise(noise.NewSeeded(5)) != nil || hs.AddNoise(noise.NewSeeded(6)) != nil {
		t.Fatal("add noise")
	}
	hmsg, err := hs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Unshard(ls, hmsg)
	if err != nil {
		t.Fatal(err)
	}
	var ss float64
	for _, v := range res.Sum {
		ss += float64(v) * float64(v)
	}
	v := ss / d
	if w := 2 * sigma * sigma; math.Abs(v-w) > 0.1*w {
		t.Fatalf("noise variance %v, want about %v", v, w)
	}
}

// FuzzPineMessages: on a PINE round (d = 4, sigma 2, at most 4 reports) no
// input panics a decoder or the engines' PrepInit, and every accepted
// input share, running aggregate and 'A' message re-encodes to exactly its
// input (one encoding per message). Seeds: a real leader and helper share,
// a running aggregate and a noised 'A' message.
func FuzzPineMessages(f *testing.F) {
	r := pineRound(f, 4, 2, 4, 1)
	l, h, err := r.Shard([]float64{0.1, -0.2, 0.3, 0}, noise.NewSeeded(1))
	if err != nil {
		f.Fatal(err)
	}
	le, _ := NewEngine(r, true, testVK)
	he, _ := NewEngine(r, false, testVK)
	hp := he.PrepInit(h)
	m, out := le.Decide(le.PrepInit(l), hp.Entry)
	if m.Reason != Accepted {
		f.Fatalf("seed report %v", m.Reason)
	}
	agg := le.NewAggregate()
	if err := agg.Fold(out); err != nil {
		f.Fatal(err)
	}
	running, err := agg.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	s, _ := agg.Share()
	if err := s.AddNoise(noise.NewSeeded(2)); err != nil {
		f.Fatal(err)
	}
	amsg, err := s.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range [][]byte{l, h, running, amsg} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, leader := range []bool{true, false} {
			if s, _, err := r.ParseReportShare(b, leader); err == nil {
				enc, err := r.MarshalReportShare(s)
				if err != nil || !bytes.Equal(enc, b) {
					t.Fatalf("report share re-encodes differently: %v", err)
				}
			}
		}
		_ = le.PrepInit(b)
		_ = he.PrepInit(b)
		if a, err := r.ParseAggregate(b); err == nil {
			enc, err := a.MarshalBinary()
			if err != nil || !bytes.Equal(enc, b) {
				t.Fatalf("running aggregate re-encodes differently: %v", err)
			}
		}
		if a, err := r.ParseAggregateShare(b); err == nil {
			enc, err := a.MarshalBinary()
			if err != nil || !bytes.Equal(enc, b) {
				t.Fatalf("aggregate share re-encodes differently: %v", err)
			}
		}
	})
}

// TestPineParamsValidate: PINE parameters are exactly pine.ForBlanket's
// derivation: a smaller norm bound (which would under-state the
// sensitivity the ledger charges), another scale, a sigma below one unit
// or a report bound whose sums could reach 2^62 are refused.
func TestPineParamsValidate(t *testing.T) {
	p, err := NewPineParams(7850, 0.3, 300, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sensitivity() != float64(p.NormBound) || p.NormBound < uint64(0.3*p.Scale) {
		t.Fatalf("sensitivity %v, norm bound %d, clip units %v", p.Sensitivity(), p.NormBound, 0.3*p.Scale)
	}
	for name, mod := range map[string]func(*Params){
		"norm bound":  func(p *Params) { p.NormBound-- },
		"scale":       func(p *Params) { p.Scale *= 2 },
		"sigma":       func(p *Params) { p.Sigma = 0.5 },
		"max reports": func(p *Params) { p.MaxReports = maxReports + 1 },
		"clip":        func(p *Params) { p.Clip *= 3 },
		"dim":         func(p *Params) { p.Dim = 0 },
	} {
		q := p
		mod(&q)
		if err := q.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, q)
		}
	}
}
