package sumvec

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// testVK is the verify key shared by the two servers in tests.
var testVK = bytes.Repeat([]byte{7}, VerifyKeySize)

func testRound(t testing.TB, dim int, bits uint, sigma float64, maxReports int, id uint64) *Round {
	t.Helper()
	p, err := NewParams(dim, 1, bits, sigma, maxReports)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRound(p, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// randomUpdate returns a float vector with entries in [-a, a).
func randomUpdate(src noise.Source, dim int, a float64) []float64 {
	x := make([]float64, dim)
	for i := range x {
		x[i] = (2*noise.Uniform(src) - 1) * a
	}
	return x
}

type report struct {
	leader, helper []byte
	q              []int64 // the quantized vector (nil if unknown)
}

// honestReports shards n random updates; q is recovered by replaying
// Quantize on an identically seeded source (Shard calls it first).
func honestReports(t testing.TB, r *Round, n int, seed uint64) []report {
	t.Helper()
	out := make([]report, n)
	data := noise.NewSeeded(seed)
	for i := range out {
		x := randomUpdate(data, r.p.Dim, 0.5)
		s := seed<<20 + uint64(i)
		l, h, err := r.Shard(x, noise.NewSeeded(s))
		if err != nil {
			t.Fatal(err)
		}
		q, err := Quantize(r.p, x, noise.NewSeeded(s))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = report{leader: l, helper: h, q: q}
	}
	return out
}

type outcome struct {
	leader, helper    *AggregateShare
	lrej, hrej        []Rejection
	leaderS, helperS  *Leader
	helperMsgLen      int
	leaderMsgLen      int
	helperPrepRejects []Rejection
}

// prepare runs the whole two-server preparation on the reports.
func prepare(t testing.TB, r *Round, reps []report) outcome {
	t.Helper()
	ls := make([][]byte, len(reps))
	hs := make([][]byte, len(reps))
	for i, rep := range reps {
		ls[i], hs[i] = rep.leader, rep.helper
	}
	return prepareShares(t, r, ls, hs)
}

func prepareShares(t testing.TB, r *Round, ls, hs [][]byte) outcome {
	t.Helper()
	helper, err := NewHelper(r, testVK)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := NewLeader(r, testVK)
	if err != nil {
		t.Fatal(err)
	}
	pmsg, hprep, err := helper.Prepare(hs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Prepare(ls); err != nil {
		t.Fatal(err)
	}
	mmsg, lrej, err := leader.Combine(pmsg)
	if err != nil {
		t.Fatal(err)
	}
	hrej, err := helper.Finish(mmsg)
	if err != nil {
		t.Fatal(err)
	}
	la, err := leader.AggregateShare()
	if err != nil {
		t.Fatal(err)
	}
	ha, err := helper.AggregateShare()
	if err != nil {
		t.Fatal(err)
	}
	return outcome{leader: la, helper: ha, lrej: lrej, hrej: hrej, leaderS: leader,
		helperMsgLen: len(pmsg), leaderMsgLen: len(mmsg), helperPrepRejects: hprep}
}

func (o outcome) unshard(t testing.TB) *Result {
	t.Helper()
	hb, err := o.helper.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.leaderS.Unshard(o.leader, hb)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func sumOf(dim int, reps []report) []int64 {
	s := make([]int64, dim)
	for _, rep := range reps {
		for i, v := range rep.q {
			s[i] += v
		}
	}
	return s
}

func TestHonestSumRecoveredExactly(t *testing.T) {
	r := testRound(t, 40, 8, 0, 64, 3)
	reps := honestReports(t, r, 25, 1)
	o := prepare(t, r, reps)
	if len(o.lrej) != 0 || len(o.hrej) != 0 {
		t.Fatalf("honest reports rejected: leader %v helper %v", o.lrej, o.hrej)
	}
	res := o.unshard(t)
	if res.Count != 25 || res.NoiseShares != 0 {
		t.Fatalf("count %d noise shares %d, want 25 0", res.Count, res.NoiseShares)
	}
	want := sumOf(r.p.Dim, reps)
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
		}
		if m := float64(want[i]) / (25 * r.p.Scale); res.Mean[i] != m {
			t.Fatalf("mean[%d] = %v, want %v", i, res.Mean[i], m)
		}
	}
}

// TestShardDeterministic: a seeded source gives identical bytes, another
// seed different ones, and the sizes do not depend on the data.
func TestShardDeterministic(t *testing.T) {
	r := testRound(t, 30, 6, 0, 8, 1)
	x := randomUpdate(noise.NewSeeded(1), 30, 1)
	l1, h1, err := r.Shard(x, noise.NewSeeded(5))
	if err != nil {
		t.Fatal(err)
	}
	l2, h2, _ := r.Shard(x, noise.NewSeeded(5))
	l3, h3, _ := r.Shard(make([]float64, 30), noise.NewSeeded(6))
	if !bytes.Equal(l1, l2) || !bytes.Equal(h1, h2) {
		t.Fatal("same seed gave different shares")
	}
	if bytes.Equal(l1, l3) || bytes.Equal(h1, h3) {
		t.Fatal("different seeds gave equal shares")
	}
	if len(l1) != r.LeaderShareSize() || len(l3) != r.LeaderShareSize() || len(h1) != r.HelperShareSize() || len(h3) != r.HelperShareSize() {
		t.Fatalf("sizes %d %d %d %d, want %d %d", len(l1), len(l3), len(h1), len(h3), r.LeaderShareSize(), r.HelperShareSize())
	}
}

// TestProofBoundsEntriesNotNorm documents what the validity proof does
// and does not enforce: a report with q_i = B+1 (encoded 2^Bits - 1, out
// of the honest range [-B, B] but inside the proof's [0, 2^Bits)) and L2
// norm far above Sensitivity() is accepted and counted as sent.
func TestProofBoundsEntriesNotNorm(t *testing.T) {
	r := testRound(t, 20, 4, 0, 8, 1)
	b := r.p.EntryBound()
	q := make([]int64, 20)
	for i := range q {
		q[i] = b + 1
	}
	if n2 := int64(20) * (b + 1) * (b + 1); n2 <= r.p.NormBoundSq() {
		t.Fatalf("test vector norm^2 %d not above the bound %d", n2, r.p.NormBoundSq())
	}
	l, h, err := r.shardQuantized(q, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	reps := append(honestReports(t, r, 3, 2), report{leader: l, helper: h, q: q})
	o := prepare(t, r, reps)
	if len(o.lrej) != 0 {
		t.Fatalf("rejected: %v", o.lrej)
	}
	res := o.unshard(t)
	want := sumOf(20, reps)
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
		}
	}
	// And the encoder refuses an entry at 2^Bits (it cannot be proven).
	q[0] = b + 2
	if _, _, err := r.shardQuantized(q, noise.NewSeeded(1)); err == nil {
		t.Fatal("sharded an entry outside [0, 2^Bits)")
	}
}

// outOfRangeReport builds a report whose reconstructed measurement is out
// of range. circl's Shard refuses such measurements, so it shards an
// honest measurement three ways and submits the leader share, the first
// helper share and the first two joint-randomness parts: each server's
// joint-randomness check passes (its part is recomputed from exactly what
// it holds), but the two shares reconstruct m - share_3, i.e. uniformly
// random Field128 elements in place of the bits (out of {0, 1} with
// probability 1 - 2^-127 each).
func outOfRangeReport(t *testing.T, r *Round, seed uint64) report {
	t.Helper()
	ctx := append([]byte(contextPrefix), 0, 0, 0, 0, 0, 0, 0, 0)
	ctx[len(ctx)-1] = byte(r.id)
	v, err := sumvec.New(3, uint(r.p.Dim), r.p.Bits, r.p.ChunkLength, ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := noise.NewSeeded(seed)
	var nonce sumvec.Nonce
	fill(src, nonce[:])
	vp := v.Params()
	rnd := make([]byte, vp.RandSize())
	fill(src, rnd)
	meas := make([]uint64, r.p.Dim)
	pub, shares, err := v.Shard(meas, &nonce, rnd)
	if err != nil {
		t.Fatal(err)
	}
	var out [2][]byte
	for i, kind := range []byte{kindLeaderShare, kindHelperShare} {
		enc, err := shares[i].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		m := r.header(kind)
		m = append(m, nonce[:]...)
		m = append(m, pub[:publicSize]...)
		out[i] = append(m, enc...)
	}
	return report{leader: out[0], helper: out[1]}
}

func TestOutOfRangeRejectedByProof(t *testing.T) {
	r := testRound(t, 20, 4, 0, 8, 9)
	honest := honestReports(t, r, 4, 3)
	bad := outOfRangeReport(t, r, 11)
	reps := []report{honest[0], honest[1], bad, honest[2], honest[3]}
	o := prepare(t, r, reps)
	if len(o.helperPrepRejects) != 0 {
		t.Fatalf("helper rejected at prep init (joint randomness should pass): %v", o.helperPrepRejects)
	}
	if len(o.lrej) != 1 || o.lrej[0].Index != 2 || o.lrej[0].Reason != RejectInvalidProof {
		t.Fatalf("leader rejections %v, want report 2 with invalid proof", o.lrej)
	}
	if len(o.hrej) != 1 || o.hrej[0].Index != 2 || o.hrej[0].Reason != RejectInvalidProof {
		t.Fatalf("helper rejections %v, want report 2 with invalid proof", o.hrej)
	}
	res := o.unshard(t)
	want := sumOf(20, honest)
	if res.Count != 4 {
		t.Fatalf("count %d, want 4", res.Count)
	}
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d (rejected report leaked into the sum)", i, res.Sum[i], want[i])
		}
	}
}

// TestRejections tampers with shares in every way a caller can count and
// checks the reason, that both servers agree, and that the sum is the sum
// of the untouched reports.
func TestRejections(t *testing.T) {
	r := testRound(t, 16, 4, 0, 32, 5)
	other := testRound(t, 16, 4, 0, 32, 6)
	vp := r.vdaf.Params()
	measBytes := int(vp.MeasurementLength()) * 16
	off := headerLen + nonceSize + publicSize
	tamper := []struct {
		name   string
		reason Reason
		f      func(l, h []byte) ([]byte, []byte)
	}{
		{"leader measurement share", RejectJointRand, func(l, h []byte) ([]byte, []byte) { l[off] ^= 1; return l, h }},
		{"leader proof share", RejectInvalidProof, func(l, h []byte) ([]byte, []byte) { l[off+measBytes+3] ^= 1; return l, h }},
		{"helper seed", RejectJointRand, func(l, h []byte) ([]byte, []byte) { h[off] ^= 1; return l, h }},
		{"helper blind", RejectJointRand, func(l, h []byte) ([]byte, []byte) { h[off+40] ^= 1; return l, h }},
		{"leader blind", RejectJointRand, func(l, h []byte) ([]byte, []byte) { l[len(l)-1] ^= 1; return l, h }},
		{"public share", RejectJointRand, func(l, h []byte) ([]byte, []byte) {
			l[headerLen+nonceSize+1] ^= 1
			h[headerLen+nonceSize+1] ^= 1
			return l, h
		}},
		{"truncated", RejectWrongLength, func(l, h []byte) ([]byte, []byte) { return l[:len(l)-1], h }},
		{"extended", RejectWrongLength, func(l, h []byte) ([]byte, []byte) { return l, append(h, 0) }},
		{"version", RejectMalformed, func(l, h []byte) ([]byte, []byte) { h[0] = 2; return l, h }},
		{"kind", RejectMalformed, func(l, h []byte) ([]byte, []byte) { l[1] = kindHelperShare; return l, h }},
		{"non-canonical field element", RejectMalformed, func(l, h []byte) ([]byte, []byte) {
			copy(l[off:off+16], bytes.Repeat([]byte{0xff}, 16))
			return l, h
		}},
		{"nonce (leader copy)", RejectJointRand, func(l, h []byte) ([]byte, []byte) { l[headerLen] ^= 1; return l, h }},
		{"replayed from another round, header rewritten", RejectJointRand, func(l, h []byte) ([]byte, []byte) {
			x := randomUpdate(noise.NewSeeded(10), 16, 0.3)
			l2, h2, err := other.Shard(x, noise.NewSeeded(10))
			if err != nil {
				t.Fatal(err)
			}
			copy(l2[2:10], l[2:10])
			copy(h2[2:10], h[2:10])
			return l2, h2
		}},
		{"wrong round", RejectWrongRound, func(l, h []byte) ([]byte, []byte) {
			x := randomUpdate(noise.NewSeeded(9), 16, 0.3)
			l2, h2, err := other.Shard(x, noise.NewSeeded(9))
			if err != nil {
				t.Fatal(err)
			}
			return l2, h2
		}},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			reps := honestReports(t, r, 4, 7)
			bad := honestReports(t, r, 1, 8)[0]
			bad.leader, bad.helper = tc.f(bytes.Clone(bad.leader), bytes.Clone(bad.helper))
			all := []report{reps[0], reps[1], bad, reps[2], reps[3]}
			o := prepare(t, r, all)
			for side, rej := range map[string][]Rejection{"leader": o.lrej, "helper": o.hrej} {
				if len(rej) != 1 || rej[0].Index != 2 || rej[0].Reason != tc.reason {
					t.Fatalf("%s rejections %v, want report 2 %v", side, rej, tc.reason)
				}
			}
			if c := Counts(o.lrej); c[tc.reason] != 1 {
				t.Fatalf("counts %v", c)
			}
			res := o.unshard(t)
			want := sumOf(16, reps)
			for i := range want {
				if res.Sum[i] != want[i] {
					t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
				}
			}
		})
	}
}

// TestNonceMismatch: the relay swaps two helper shares, so the servers'
// shares at positions 1 and 2 belong to different reports.
func TestNonceMismatch(t *testing.T) {
	r := testRound(t, 16, 4, 0, 32, 5)
	reps := honestReports(t, r, 4, 4)
	var ls, hs [][]byte
	for _, rep := range reps {
		ls, hs = append(ls, rep.leader), append(hs, rep.helper)
	}
	hs[1], hs[2] = hs[2], hs[1]
	o := prepareShares(t, r, ls, hs)
	for _, rej := range [][]Rejection{o.lrej, o.hrej} {
		if c := Counts(rej); len(rej) != 2 || c[RejectNonceMismatch] != 2 {
			t.Fatalf("rejections %v, want reports 1 and 2 nonce mismatch", rej)
		}
	}
	res := o.unshard(t)
	want := sumOf(16, []report{reps[0], reps[3]})
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
		}
	}
}

func TestDuplicateNonce(t *testing.T) {
	r := testRound(t, 16, 4, 0, 32, 5)
	reps := honestReports(t, r, 3, 4)
	all := []report{reps[0], reps[1], reps[0], reps[2]}
	o := prepare(t, r, all)
	for _, rej := range [][]Rejection{o.lrej, o.hrej} {
		if len(rej) != 1 || rej[0].Index != 2 || rej[0].Reason != RejectDuplicateNonce {
			t.Fatalf("rejections %v, want report 2 duplicate nonce", rej)
		}
	}
	res := o.unshard(t)
	want := sumOf(16, reps)
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d (replayed report counted twice?)", i, res.Sum[i], want[i])
		}
	}
}

// TestProtocolViolations: messages that contradict the receiver's state
// abort the batch instead of rejecting one report.
func TestProtocolViolations(t *testing.T) {
	r := testRound(t, 16, 4, 0, 32, 5)
	reps := honestReports(t, r, 3, 4)
	var ls, hs [][]byte
	for _, rep := range reps {
		ls, hs = append(ls, rep.leader), append(hs, rep.helper)
	}
	helper, _ := NewHelper(r, testVK)
	leader, _ := NewLeader(r, testVK)
	pmsg, _, err := helper.Prepare(hs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.AggregateShare(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("aggregate share before preparation: %v", err)
	}
	if _, err := leader.Prepare(ls[:2]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := leader.Combine(pmsg); !errors.Is(err, ErrProtocol) {
		t.Fatalf("helper message for 3 reports, leader batch of 2: %v", err)
	}
	// A leader that accepts a report the helper rejected.
	h2, _ := NewHelper(r, testVK)
	bad := bytes.Clone(hs[1])
	bad[0] = 9
	if _, _, err := h2.Prepare([][]byte{hs[0], bad, hs[2]}); err != nil {
		t.Fatal(err)
	}
	l2, _ := NewLeader(r, testVK)
	if _, err := l2.Prepare(ls); err != nil {
		t.Fatal(err)
	}
	mmsg, _, err := l2.Combine(pmsg) // decided with the honest helper message
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Finish(mmsg); !errors.Is(err, ErrProtocol) {
		t.Fatalf("leader accepted what the helper rejected: %v", err)
	}
	// Aggregate shares over different counts are refused.
	o := prepare(t, r, reps)
	o2 := prepare(t, r, reps[:2])
	hb, _ := o2.helper.MarshalBinary()
	if _, err := o.leaderS.Unshard(o.leader, hb); !errors.Is(err, ErrProtocol) {
		t.Fatalf("unshard with counts 3 and 2: %v", err)
	}
	if _, err := NewLeader(r, testVK[:31]); err == nil {
		t.Fatal("accepted a short verify key")
	}
	// A verify key the two servers do not share fails every proof.
	h3, _ := NewHelper(r, bytes.Repeat([]byte{8}, VerifyKeySize))
	pmsg3, _, _ := h3.Prepare(hs)
	l3, _ := NewLeader(r, testVK)
	_, _ = l3.Prepare(ls)
	_, rej, err := l3.Combine(pmsg3)
	if err != nil {
		t.Fatal(err)
	}
	if c := Counts(rej); c[RejectInvalidProof] != 3 {
		t.Fatalf("mismatched verify keys: rejections %v", c)
	}
}

func TestParamsValidate(t *testing.T) {
	good, err := NewParams(7850, 1, 8, 300, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if good.EntryBound() != 127 || good.ClipUnits() > 127 || good.ClipUnits() < 126.99999 {
		t.Fatalf("B=%d c=%v", good.EntryBound(), good.ClipUnits())
	}
	if p := good.OffsetTailProbability(); p > maxTailProbability || p == 0 {
		t.Fatalf("tail %v", p)
	}
	lower := good
	lower.NoiseOffset--
	if lower.OffsetTailProbability() <= maxTailProbability {
		t.Fatal("MinNoiseOffset is not minimal")
	}
	for name, mod := range map[string]func(p *Params){
		"dim 0":           func(p *Params) { p.Dim = 0 },
		"clip NaN":        func(p *Params) { p.Clip = math.NaN() },
		"bits 1":          func(p *Params) { p.Bits = 1 },
		"bits 21":         func(p *Params) { p.Bits = 21 },
		"scale too large": func(p *Params) { p.Scale *= 1.01 },
		"beta 0":          func(p *Params) { p.Beta = 0 },
		"beta 0.6":        func(p *Params) { p.Beta = 0.6 },
		"sigma negative":  func(p *Params) { p.Sigma = -1 },
		"sigma 0.5":       func(p *Params) { p.Sigma = 0.5 },
		"offset too low":  func(p *Params) { p.NoiseOffset-- },
		"offset no noise": func(p *Params) { p.Sigma = 0 },
		"field overflow":  func(p *Params) { p.NoiseOffset = 1 << 60 },
		"reports 0":       func(p *Params) { p.MaxReports = 0 },
		"reports 2^25":    func(p *Params) { p.MaxReports = 1 << 25 },
		"chunk 0":         func(p *Params) { p.ChunkLength = 0 },
		"chunk too long":  func(p *Params) { p.ChunkLength = 7850*8 + 1 },
	} {
		p := good
		mod(&p)
		if err := p.Validate(); !errors.Is(err, errParams) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	// The overflow condition itself: offsets of 2^60 pass only with
	// tiny batches.
	p := good
	p.NoiseOffset = (maxTotal - uint64(p.MaxReports)*255) / 4
	if err := p.Validate(); err != nil {
		t.Fatalf("largest allowed offset refused: %v", err)
	}
	p.NoiseOffset++
	if err := p.Validate(); err == nil {
		t.Fatal("offset one past the overflow bound accepted")
	}
}

// TestSensitivityBound checks ||q||_2^2 <= NormBoundSq and |q_i| <= B on
// adversarial inputs at d = 7850, 8 bits (the MNIST parameters): vectors
// at and far above the clip norm, all mass on one coordinate, mass
// spread so every scaled entry has fractional part 1/2 (maximal rounding
// variance), entries just below integers, tiny and huge magnitudes.
func TestSensitivityBound(t *testing.T) {
	p, err := NewParams(7850, 1, 8, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Dim
	inputs := map[string][]float64{}
	one := make([]float64, d)
	one[17] = -1
	inputs["one coordinate at clip"] = one
	huge := make([]float64, d)
	huge[0] = math.MaxFloat64
	huge[1] = -math.MaxFloat64
	inputs["max float"] = huge
	flat := make([]float64, d)
	for i := range flat {
		flat[i] = 1 / math.Sqrt(float64(d)) // scaled: c/sqrt(d) = 1.43
	}
	inputs["flat at clip"] = flat
	half := make([]float64, d)
	for i := range half {
		half[i] = 0.5 / p.Scale // scaled entries exactly 1/2: norm 44 < c
	}
	inputs["all halves"] = half
	// The clip norm spread over k coordinates with scaled value m + 1/2.
	for _, k := range []int{2, 10, 64, 1000} {
		v := make([]float64, d)
		for i := range k {
			v[i] = 1 / math.Sqrt(float64(k))
			if i%2 == 1 {
				v[i] = -v[i]
			}
		}
		inputs["spread over "+itoa(k)] = v
	}
	below := make([]float64, d)
	for i := range below {
		below[i] = (1 - 1e-9) / p.Scale // scaled just below 1
	}
	inputs["just below 1"] = below
	inputs["tiny"] = append(make([]float64, d-1), 5e-324)
	inputs["random large"] = randomUpdate(noise.NewSeeded(3), d, 10)
	src := noise.NewSeeded(42)
	b := p.EntryBound()
	for name, x := range inputs {
		for range 40 {
			q, err := Quantize(p, x, src)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var sq int64
			for _, v := range q {
				if v > b || v < -b {
					t.Fatalf("%s: entry %d outside [-%d, %d]", name, v, b, b)
				}
				sq += v * v
			}
			if sq > p.NormBoundSq() {
				t.Fatalf("%s: ||q||^2 = %d > bound %d", name, sq, p.NormBoundSq())
			}
		}
	}
	if s := p.Sensitivity(); s < 137 || s > 139 {
		t.Fatalf("MNIST sensitivity %v, expected about 137.8 (DefaultBeta)", s)
	}
}

func itoa(k int) string {
	if k == 0 {
		return "0"
	}
	var b []byte
	for ; k > 0; k /= 10 {
		b = append([]byte{byte('0' + k%10)}, b...)
	}
	return string(b)
}

// TestConditionalRoundingEnforced uses parameters where one unconditional
// rounding exceeds the bound about 1.6% of the time (d = 100, every
// scaled entry 1/2, Beta = 1/2: bound floor(25 + 25 + 1.18*(5 + 5)) = 61,
// while ||q||^2 ~ Binomial(100, 1/2)), checks that some unconditional
// roundings do exceed it (so the test can fail) and that Quantize never
// returns one that does.
func TestConditionalRoundingEnforced(t *testing.T) {
	p := Params{Dim: 100, Clip: 1, Bits: 4, Scale: 5, Beta: 0.5, MaxReports: 1, ChunkLength: 8}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.NormBoundSq() != 61 {
		t.Fatalf("bound %d, want 61", p.NormBoundSq())
	}
	x := make([]float64, 100)
	for i := range x {
		x[i] = 0.1
	}
	src := noise.NewSeeded(8)
	y, err := clipScale(p, x)
	if err != nil {
		t.Fatal(err)
	}
	q := make([]int64, 100)
	const n = 20000
	over := 0
	for range n {
		if roundOnce(y, q, src) > p.NormBoundSq() {
			over++
		}
	}
	// Pr[Bin(100, 1/2) >= 62] = 0.0105; 20000 draws see ~210, and 0
	// with probability < 1e-80.
	if over == 0 {
		t.Fatal("no unconditional rounding exceeded the bound")
	}
	for range n {
		q, err := Quantize(p, x, src)
		if err != nil {
			t.Fatal(err)
		}
		var sq int64
		for _, v := range q {
			sq += v * v
		}
		if sq > 61 {
			t.Fatalf("Quantize returned ||q||^2 = %d > 61", sq)
		}
	}
}

func TestQuantizeRefuses(t *testing.T) {
	p, _ := NewParams(4, 1, 4, 0, 1)
	for _, x := range [][]float64{{1, 2, 3}, {1, math.NaN(), 0, 0}, {math.Inf(-1), 0, 0, 0}} {
		if _, err := Quantize(p, x, noise.NewSeeded(1)); err == nil {
			t.Errorf("Quantize(%v) accepted", x)
		}
	}
}

// TestNoiseEnforced: with Sigma > 0 an aggregate share is released once,
// cannot be encoded or unsharded without noise, and takes noise once.
func TestNoiseEnforced(t *testing.T) {
	r := testRound(t, 8, 4, 5, 8, 1)
	reps := honestReports(t, r, 3, 1)
	o := prepare(t, r, reps)
	if _, err := o.leaderS.AggregateShare(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("second aggregate share: %v", err)
	}
	if _, err := o.helper.MarshalBinary(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("helper share without noise encoded: %v", err)
	}
	if err := o.helper.AddNoise(noise.NewSeeded(1)); err != nil {
		t.Fatal(err)
	}
	if err := o.helper.AddNoise(noise.NewSeeded(1)); err == nil {
		t.Fatal("noise added twice")
	}
	hb, err := o.helper.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.leaderS.Unshard(o.leader, hb); !errors.Is(err, ErrProtocol) {
		t.Fatalf("unshard with the leader's share unnoised: %v", err)
	}
	if err := o.leader.AddNoise(noise.NewSeeded(2)); err != nil {
		t.Fatal(err)
	}
	res, err := o.leaderS.Unshard(o.leader, hb)
	if err != nil {
		t.Fatal(err)
	}
	if res.NoiseShares != 2 {
		t.Fatalf("noise shares %d", res.NoiseShares)
	}
	// Sigma = 0 refuses AddNoise.
	r0 := testRound(t, 8, 4, 0, 8, 1)
	o0 := prepare(t, r0, honestReports(t, r0, 2, 1))
	if err := o0.leader.AddNoise(noise.NewSeeded(1)); err == nil {
		t.Fatal("noise with sigma 0")
	}
}

// TestNoiseOverflowDetected removes the offset that Validate requires, so
// negative noise wraps the field: Unshard must report ErrNoiseOverflow
// rather than release a wrapped value.
func TestNoiseOverflowDetected(t *testing.T) {
	overflows := 0
	for seed := range uint64(5) {
		r := testRound(t, 8, 2, 5, 8, 1)
		o := prepare(t, r, honestReports(t, r, 1, seed))
		r.p.NoiseOffset = 0 // what Validate would refuse
		if err := o.helper.AddNoise(noise.NewSeeded(seed)); err != nil {
			t.Fatal(err)
		}
		if err := o.leader.AddNoise(noise.NewSeeded(seed + 100)); err != nil {
			t.Fatal(err)
		}
		hb, err := o.helper.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		_, err = o.leaderS.Unshard(o.leader, hb)
		if errors.Is(err, ErrNoiseOverflow) {
			overflows++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// Each trial overflows unless all 8 noises N1+N2 (sd 7) exceed -2 or
	// so: about 2% per trial.
	if overflows == 0 {
		t.Fatal("no overflow detected without offsets")
	}
}
