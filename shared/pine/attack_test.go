package pine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Soundness by attack: every report a malicious client can build without
// breaking the proof system is rejected, with the Reason that names the
// violated check; rates are measured over seeded trials and compared with
// the draft's stated rates.

var testVK = []byte("0123456789abcdef0123456789abcdef")

// prepBoth runs the whole preparation of one report by both aggregators
// and returns the two output shares, or the rejection.
func prepBoth(p *Pine, nonce []byte, pub, lead, help []byte) ([2]OutShare, error) {
	var outs [2]OutShare
	v := p.NewVerifier() // reused for both: exercises the scratch reuse
	s0, p0, err := v.PrepInit(testVK, 0, nonce, pub, lead)
	if err != nil {
		return outs, err
	}
	s1, p1, err := v.PrepInit(testVK, 1, nonce, pub, help)
	if err != nil {
		return outs, err
	}
	msg, err := p.PrepSharesToPrep(p0, p1)
	if err != nil {
		return outs, err
	}
	for a, s := range []*PrepState{s0, s1} {
		if outs[a], err = p.PrepNext(s, msg); err != nil {
			return outs, err
		}
	}
	return outs, nil
}

// randFrom draws the 224 bytes of sharding randomness from src.
func randFrom(src noise.Source) []byte {
	r := make([]byte, randSize)
	for i := 0; i < randSize; i += 8 {
		binary.LittleEndian.PutUint64(r[i:], src.Uint64())
	}
	return r
}

func nonceOf(i int) []byte {
	n := make([]byte, nonceSize)
	binary.BigEndian.PutUint64(n[8:], uint64(i))
	return n
}

func mustBlanket(t testing.TB, d int) *Pine {
	t.Helper()
	p, err := ForBlanket(d, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// scaledGradient returns a random direction scaled to L2 norm
// factor*L2NormBound fixed-point units, as field elements (rounded).
func scaledGradient(p *Pine, src noise.Source, factor float64) ([]fp, float64) {
	d := p.cfg.Dimension
	x := make([]float64, d)
	var n2 float64
	for i := range x {
		x[i] = 2*noise.Uniform(src) - 1
		n2 += x[i] * x[i]
	}
	s := factor * float64(p.cfg.L2NormBound) / math.Sqrt(n2)
	g := make([]fp, d)
	var sq float64
	for i := range x {
		v := math.RoundToEven(x[i] * s)
		sq += v * v
		g[i] = fpI(int64(v))
	}
	return g, math.Sqrt(sq)
}

func sqNorm(g []fp) uint64 {
	var sq, t fp
	for i := range g {
		t.Sqr(&g[i])
		sq.AddAssign(&t)
	}
	return u64(&sq)
}

// claimBound claims the squared norm is exactly the bound (v = bound,
// u = 0): consistent range bits, false norm.
func claimBound(p *Pine, _ []fp, dst []fp) {
	nb := p.numBitsSqNorm
	bitsOf(dst[:nb], p.sqNormBound)
	bitsOf(dst[nb:], 0)
}

// claimTrue sends the bits of the true squared norm (mod q, truncated to
// the available bits) and of bound - norm (mod q, truncated).
func claimTrue(p *Pine, g []fp, dst []fp) {
	nb := p.numBitsSqNorm
	sq := sqNorm(g)
	bitsOf(dst[:nb], sq)
	var u fp
	b, s := fpU(p.sqNormBound), fpU(sq)
	u.Sub(&b, &s)
	bitsOf(dst[nb:], u64(&u))
}

func expectReject(t *testing.T, err error, want ...Reason) Reason {
	t.Helper()
	if err == nil {
		t.Fatalf("report accepted, want rejection %v", want)
	}
	r := ReasonOf(err)
	for _, w := range want {
		if r == w {
			return r
		}
	}
	t.Fatalf("rejected with %v (%v), want one of %v", r, err, want)
	return r
}

// TestAttackNormTooLarge: gradients of norm 1.01x, 2x and 88x the bound
// (88x is what the Prio3 SumVec baseline, aggregator/lab/sumvec, lets
// through). The honest encoder refuses
// them; a client that lies about the norm bits is rejected: claiming the
// bound fails the norm-equality proof; sending the true norm fails the
// range check (main proof) when it fits the available bits and the
// norm-equality proof when it does not (the truncated bits no longer
// equal the norm). 20 random directions per factor and strategy, all
// must be rejected (deterministic up to the FLP soundness error,
// 2^-114 per report).
func TestAttackNormTooLarge(t *testing.T) {
	p := mustBlanket(t, 64)
	for _, factor := range []float64{1.01, 2, 88} {
		src := noise.NewSeeded(uint64(1000 * factor))
		for trial := range 20 {
			g, norm := scaledGradient(p, src, factor)
			if norm <= float64(p.cfg.L2NormBound) {
				t.Fatalf("factor %v: norm %v not above the bound", factor, norm)
			}
			x := make([]float64, len(g))
			for i := range g {
				x[i] = float64(signed(&g[i])) / p.Scale()
			}
			if _, _, _, err := p.Shard(x, [16]byte{}, src); err == nil {
				t.Fatalf("factor %v: honest Shard accepted an over-norm gradient", factor)
			}
			for name, strat := range map[string]func(*Pine, []fp, []fp){"claim-bound": claimBound, "true-norm": claimTrue} {
				pub, l, h, err := p.shard(g, nonceOf(trial), randFrom(src), &cheat{normBits: strat, ignoreWrCount: true})
				if err != nil {
					t.Fatal(err)
				}
				_, err = prepBoth(p, nonceOf(trial), pub, l, h)
				want := RejectNormEquality
				if name == "true-norm" && sqNorm(g) < 1<<p.numBitsSqNorm {
					want = RejectInvalidProof
				}
				expectReject(t, err, want)
			}
		}
	}
}

// wrapGradient returns a gradient with two non-zero entries whose
// squared norm is huge over the integers but equals target (<= bound)
// modulo q: x1 = 2^40 + i, x2 = sqrt(target - x1^2) mod q.
func wrapGradient(t testing.TB, d int, target uint64) []fp {
	q := new(big.Int).SetUint64(modulus)
	for i := int64(0); i < 1000; i++ {
		x1 := new(big.Int).Add(big.NewInt(1<<40), big.NewInt(i))
		r := new(big.Int).Mul(x1, x1)
		r.Sub(new(big.Int).SetUint64(target), r)
		r.Mod(r, q)
		x2 := new(big.Int).ModSqrt(r, q)
		if x2 == nil {
			continue
		}
		g := make([]fp, d)
		g[0], g[1] = fpU(x1.Uint64()), fpU(x2.Uint64())
		return g
	}
	t.Fatal("no wrapping gradient found")
	return nil
}

// TestAttackWraparound: a gradient whose squared norm wraps around q and
// lands inside the bound passes the norm-equality and range checks; the
// wraparound checks stop it. A client reporting its failed checks
// honestly fails the success count, one that claims success on failed
// checks fails the quadratic check; both are rejected by the main proof.
// One that re-shards until all 100 checks pass needs 2^200 attempts here
// (each check passes only if both z entries are 0, probability 1/4 <= the
// draft's 1/2): over 50 attempts (5,000 checks) we measure the per-check
// pass rate and require it below 1/2 (the observed count exceeds
// 2500 + 5 sd = 2677 with probability < 3e-7 if the rate were 1/2,
// expected 1250).
func TestAttackWraparound(t *testing.T) {
	p := mustBlanket(t, 64)
	g := wrapGradient(t, 64, p.sqNormBound/2)
	if sqNorm(g) != p.sqNormBound/2 {
		t.Fatal("wrap gradient has the wrong residue")
	}
	src := noise.NewSeeded(7)
	passed := 0
	for trial := range 50 {
		n := 0
		for _, ch := range []*cheat{{ignoreWrCount: true, wrPassed: &n}, {lieWr: true}} {
			pub, l, h, err := p.shard(g, nonceOf(trial), randFrom(src), ch)
			if err != nil {
				t.Fatal(err)
			}
			_, err = prepBoth(p, nonceOf(trial), pub, l, h)
			expectReject(t, err, RejectInvalidProof)
		}
		passed += n
	}
	if passed > 2677 {
		t.Fatalf("wrapping gradient passed %d of 5000 checks, more than the draft's 1/2 allows", passed)
	}
	t.Logf("wrapping gradient passed %d of 5000 wraparound checks (rate %.3f; draft bound 1/2, exact 1/4)", passed, float64(passed)/5000)
}

// TestWraparoundRateExact measures the draft's per-check rate where it is
// exactly 1/2: the gradient (2^32, 0, ..., 0) has squared norm 2^64 = 2^32
// - 1 (mod q), within a bound of 2^16 + 1, and a check passes iff the
// random entry facing 2^32 is 0 (probability 1/2). With 4 checks, all
// required, a grinding client gets the wrapped gradient ACCEPTED with
// probability 2^-4 per attempt: 4,000 attempts, expected 250 accepted
// (sd 15.3) and 8,000 passed checks of 16,000 (sd 63.2); each count must
// lie within 5 sd (false failure < 6e-7 each). Every attempt whose 4
// checks pass is prepared end to end and must be accepted (this is what
// 100 checks prevent: 2^-100 per attempt).
func TestWraparoundRateExact(t *testing.T) {
	const d, attempts, checks = 16, 4000, 4
	p, err := New(Config{
		Dimension: d, NumFracBits: 15, L2NormBound: 1<<16 + 1,
		ChunkLength: 4, ChunkLengthNormEquality: 4, Proofs: 3, ProofsNormEquality: 2,
		NumWrChecks: checks, NumWrSuccesses: checks, Alpha: 8.7, ID: Pine64HmacSha256Aes128ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := make([]fp, d)
	g[0] = fpU(1 << 32)
	src := noise.NewSeeded(11)
	accepted, passedChecks := 0, 0
	for i := range attempts {
		n := 0
		pub, l, h, err := p.shard(g, nonceOf(i), randFrom(src), &cheat{wrPassed: &n})
		passedChecks += n
		if errors.Is(err, errWrRetry) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		outs, err := prepBoth(p, nonceOf(i), pub, l, h)
		if err != nil {
			t.Fatalf("attempt %d passed every check but was rejected: %v", i, err)
		}
		var sum fp
		sum.Add(&outs[0].v[0], &outs[1].v[0])
		if u64(&sum) != 1<<32 {
			t.Fatal("accepted share does not carry the wrapped entry")
		}
		accepted++
	}
	within := func(name string, got, n int, pr float64) {
		mean, sd := float64(n)*pr, math.Sqrt(float64(n)*pr*(1-pr))
		if math.Abs(float64(got)-mean) > 5*sd {
			t.Errorf("%s: %d, expected %.0f +- %.1f (5 sd)", name, got, mean, 5*sd)
		}
		t.Logf("%s: %d of %d (rate %.4f, stated %.4f)", name, got, n, float64(got)/float64(n), pr)
	}
	within("accepted wrapping reports", accepted, attempts, 1.0/16)
	within("passed checks", passedChecks, attempts*checks, 0.5)
}

// TestAttackLyingBits: a valid gradient whose bit-checked part lies:
// a success bit flipped to 0 (99 successes), the v bits of a passing
// check changed, a bit set to 2, a norm bit swapped with the u bits
// (same sum, different value; caught by norm equality). All rejected by
// the proof that covers the lie.
func TestAttackLyingBits(t *testing.T) {
	p := mustBlanket(t, 64)
	src := noise.NewSeeded(13)
	nb, nw := p.numBitsSqNorm, p.numBitsWr
	d := p.cfg.Dimension
	cases := []struct {
		name string
		edit func(p *Pine, meas []fp)
		want Reason
	}{
		{"success bit 1->0", func(p *Pine, m []fp) { m[d+2*nb+nw] = fp{} }, RejectInvalidProof},
		{"wr result bits", func(p *Pine, m []fp) {
			i := d + 2*nb + (nw+1)*5 + 3
			one := fpOne()
			if m[i].IsZero() {
				m[i] = one
			} else {
				m[i] = fp{}
			}
		}, RejectInvalidProof},
		{"non-bit", func(p *Pine, m []fp) { m[d+2*nb+(nw+1)*7+nw] = fpU(2) }, RejectInvalidProof},
	}
	for trial := range 5 {
		g, _ := scaledGradient(p, src, 0.9)
		for _, c := range cases {
			pub, l, h, err := p.shard(g, nonceOf(trial), randFrom(src), &cheat{editBits: c.edit})
			if err != nil {
				t.Fatal(err)
			}
			_, err = prepBoth(p, nonceOf(trial), pub, l, h)
			if err == nil {
				t.Fatalf("%s: accepted", c.name)
			}
			if ReasonOf(err) != c.want {
				t.Fatalf("%s: %v, want %v", c.name, ReasonOf(err), c.want)
			}
		}
	}
}

// TestAttackForgedProof: one element of the leader's proof share changed
// (50 positions spread over both circuits' proofs, random offsets):
// rejected by the proof it belongs to.
func TestAttackForgedProof(t *testing.T) {
	p := mustBlanket(t, 64)
	src := noise.NewSeeded(17)
	g, _ := scaledGradient(p, src, 0.99)
	total := p.proofsLen()
	neLen := p.flpNE.proofLen * p.cfg.ProofsNormEquality
	for k := range 50 {
		pos := int(src.Uint64() % uint64(total))
		delta := fpU(1 + src.Uint64()%(modulus-1))
		ch := &cheat{tamper: func(_, proofs []fp) { proofs[pos].AddAssign(&delta) }}
		pub, l, h, err := p.shard(g, nonceOf(k), randFrom(src), ch)
		if err != nil {
			t.Fatal(err)
		}
		_, err = prepBoth(p, nonceOf(k), pub, l, h)
		want := RejectInvalidProof
		if pos < neLen {
			want = RejectNormEquality
		}
		expectReject(t, err, want)
	}
}

// TestAttackMismatchedShares: the helper's seeds or the public share do
// not belong to the leader's share (a seed replaced, or both shares from
// different reports). The aggregators then hold shares of different
// measurements or use different joint randomness, and the proofs fail.
// The norm-equality proof runs first and catches a changed measurement
// seed; a changed joint randomness blind or part makes the main proof
// fail (its joint randomness differs between the aggregators).
func TestAttackMismatchedShares(t *testing.T) {
	p := mustBlanket(t, 64)
	src := noise.NewSeeded(19)
	g, _ := scaledGradient(p, src, 0.5)
	nonce := nonceOf(1)
	pub, l, h, err := p.shard(g, nonce, randFrom(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepBoth(p, nonce, pub, l, h); err != nil {
		t.Fatalf("honest report rejected: %v", err)
	}
	pub2, l2, h2, err := p.shard(g, nonce, randFrom(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, i int) []byte { c := append([]byte(nil), b...); c[i] ^= 1; return c }
	cases := []struct {
		name           string
		pub, lead, hel []byte
		want           Reason
	}{
		{"helper measurement seed", pub, l, flip(h, 0), RejectNormEquality},
		{"helper proof seed", pub, l, flip(h, seedSize), RejectNormEquality},
		{"helper wr blind", pub, l, flip(h, 2*seedSize), RejectInvalidProof},
		{"helper vf blind", pub, l, flip(h, 3*seedSize), RejectInvalidProof},
		{"public wr part of helper", flip(pub, seedSize), l, h, RejectInvalidProof},
		{"public vf part of leader", flip(pub, 2*seedSize), l, h, RejectInvalidProof},
		{"helper share of another report", pub, l, h2, RejectNormEquality},
		{"public share of another report", pub2, l, h, RejectInvalidProof},
		{"leader share of another report", pub, l2, h, RejectNormEquality},
	}
	for _, c := range cases {
		_, err := prepBoth(p, nonce, c.pub, c.lead, c.hel)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		if r := ReasonOf(err); r != c.want {
			t.Fatalf("%s: %v (%v), want %v", c.name, r, err, c.want)
		}
	}
	// Malformed: wrong lengths and a non-canonical element.
	bad := append([]byte(nil), l...)
	binary.LittleEndian.PutUint64(bad, modulus)
	for name, in := range map[string][2][]byte{
		"short leader": {l[:len(l)-1], h}, "long helper": {l, append(h, 0)},
		"non-canonical": {bad, h}, "short public": {l, h},
	} {
		pb := pub
		if name == "short public" {
			pb = pub[:10]
		}
		_, err := prepBoth(p, nonce, pb, in[0], in[1])
		expectReject(t, err, RejectMalformed)
	}
	if _, err := prepBoth(p, nonce[:3], pub, l, h); ReasonOf(err) != RejectMalformed {
		t.Fatalf("short nonce: %v", err)
	}
	// The prep message of another report.
	s0, p0, _ := p.NewVerifier().PrepInit(testVK, 0, nonce, pub, l)
	_, p1, _ := p.NewVerifier().PrepInit(testVK, 1, nonce, pub, h)
	t0, q0, _ := p.NewVerifier().PrepInit(testVK, 0, nonce, pub2, l2)
	_, q1, _ := p.NewVerifier().PrepInit(testVK, 1, nonce, pub2, h2)
	m2, err := p.PrepSharesToPrep(q0, q1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PrepNext(s0, m2); ReasonOf(err) != RejectJointRand {
		t.Fatalf("prep message of another report: %v", err)
	}
	if _, err := p.PrepSharesToPrep(p0, p1); err != nil {
		t.Fatal(err)
	}
	_ = t0
}

// TestHonestAccepted: 200 honest updates clipped to norm exactly 1 (the
// worst case for rounding) at d = 256 with Blanket's parameters are all
// accepted, and the aggregate decodes to their fixed-point sum. The
// draft's honest failure rate per sharding attempt is below 2^-101
// (Soundness().HonestRetry), so a rejection here would be a bug.
func TestHonestAccepted(t *testing.T) {
	const d, n = 256, 200
	p := mustBlanket(t, d)
	src := noise.NewSeeded(23)
	aggs := [2]*AggShare{p.NewAggShare(), p.NewAggShare()}
	want := make([]int64, d)
	for i := range n {
		x := make([]float64, d)
		var n2 float64
		for j := range x {
			x[j] = noise.Uniform(src) - 0.5
			n2 += x[j] * x[j]
		}
		for j := range x {
			x[j] /= math.Sqrt(n2)
		}
		enc, err := p.Encode(x)
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		for j := range enc {
			want[j] += enc[j]
		}
		var nonce [16]byte
		copy(nonce[:], nonceOf(i))
		pub, l, h, err := p.Shard(x, nonce, src)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := prepBoth(p, nonce[:], pub, l, h)
		if err != nil {
			t.Fatalf("honest report %d rejected: %v", i, err)
		}
		for a := range 2 {
			if err := aggs[a].Add(outs[a]); err != nil {
				t.Fatal(err)
			}
		}
	}
	a0, _ := aggs[0].MarshalBinary()
	a1, _ := aggs[1].MarshalBinary()
	got, err := p.Unshard(a0, a1)
	if err != nil {
		t.Fatal(err)
	}
	dec := p.Decode(want)
	for j := range got {
		if got[j] != dec[j] {
			t.Fatalf("sum[%d] = %v, want %v", j, got[j], dec[j])
		}
	}
}

// TestHonestCheckRate measures the honest per-check pass rate where it is
// far from 1 (alpha = 0.5 instead of 8.7) against its exact value: the
// gradient has 64 entries equal to a = 128 (norm 1024 = the bound), so a
// check computes 128 S with S + 64 ~ Binomial(128, 1/2) and passes iff
// -1023 <= 128 S <= 1024 (wr_check_bound = 1024), i.e. S in [-7, 8]. Over
// 200 XOF seeds x 100 checks = 20,000 checks, the pass count must lie
// within 5 sd of the exact mean (false failure < 6e-7).
func TestHonestCheckRate(t *testing.T) {
	const d = 100
	p, err := New(Config{
		Dimension: d, NumFracBits: 10, L2NormBound: 1024,
		ChunkLength: 8, ChunkLengthNormEquality: 8, Proofs: 3, ProofsNormEquality: 2,
		NumWrChecks: 100, NumWrSuccesses: 1, Alpha: 0.5, ID: Pine64HmacSha256Aes128ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.wrBound != 1024 {
		t.Fatalf("wr_check_bound %d, want 1024", p.wrBound)
	}
	g := make([]fp, d)
	for i := range 64 {
		g[i] = fpU(128)
	}
	// Exact pass probability.
	lg := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	var pr float64
	for s := -7; s <= 8; s++ {
		k := s + 64
		pr += math.Exp(lg(128) - lg(k) - lg(128-k) - 128*math.Ln2)
	}
	src := noise.NewSeeded(29)
	res := make([]fp, 100)
	pass, total := 0, 0
	for range 200 {
		seed := randFrom(src)[:seedSize]
		x, err := p.wrXof(seed)
		if err != nil {
			t.Fatal(err)
		}
		p.runWrChecks(res, g, x, nil, nil)
		for i := range res {
			v := signed(&res[i])
			if v%128 != 0 {
				t.Fatalf("dot product %d not a multiple of 128", v)
			}
			if v >= -1023 && v <= 1024 {
				pass++
			}
			total++
		}
	}
	mean, sd := float64(total)*pr, math.Sqrt(float64(total)*pr*(1-pr))
	t.Logf("honest checks passed: %d of %d (rate %.4f, exact %.4f)", pass, total, float64(pass)/float64(total), pr)
	if math.Abs(float64(pass)-mean) > 5*sd {
		t.Fatalf("pass count %d, expected %.0f +- %.0f", pass, mean, 5*sd)
	}
}

func ExampleReason() {
	fmt.Println(RejectNormEquality, RejectInvalidProof)
	// Output: norm equality failed invalid proof
}

// TestShardRetries: with alpha = 0.5 the honest gradient of
// TestHonestCheckRate passes each check with probability 0.84, so all 4
// required checks pass in about half the attempts; Shard must re-shard
// until they do (64 failures in a row: probability about 2^-64) and the
// report must then be accepted. 20 reports.
func TestShardRetries(t *testing.T) {
	const d = 100
	p, err := New(Config{
		Dimension: d, NumFracBits: 10, L2NormBound: 1024,
		ChunkLength: 8, ChunkLengthNormEquality: 8, Proofs: 3, ProofsNormEquality: 2,
		NumWrChecks: 4, NumWrSuccesses: 4, Alpha: 0.5, ID: Pine64HmacSha256Aes128ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, d)
	for i := range 64 {
		x[i] = 0.125 // 128 units
	}
	src := noise.NewSeeded(37)
	for i := range 20 {
		var nonce [16]byte
		copy(nonce[:], nonceOf(i))
		pub, l, h, err := p.Shard(x, nonce, src)
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		if _, err := prepBoth(p, nonce[:], pub, l, h); err != nil {
			t.Fatalf("report %d rejected: %v", i, err)
		}
	}
}

// TestConcurrentVerifiers: one Pine shared by goroutines, one Verifier
// each (run with -race to check the claim that a Pine is safe for
// concurrent use).
func TestConcurrentVerifiers(t *testing.T) {
	p := mustBlanket(t, 64)
	type rep struct{ pub, l, h, nonce []byte }
	reps := make([]rep, 8)
	src := noise.NewSeeded(43)
	for i := range reps {
		g, _ := scaledGradient(p, src, 0.8)
		pub, l, h, err := p.shard(g, nonceOf(i), randFrom(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = rep{pub, l, h, nonceOf(i)}
	}
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			lv, hv := p.NewVerifier(), p.NewVerifier()
			for i := w; i < len(reps); i += 2 {
				r := reps[i]
				s0, p0, err := lv.PrepInit(testVK, 0, r.nonce, r.pub, r.l)
				if err != nil {
					errs <- err
					return
				}
				s1, p1, err := hv.PrepInit(testVK, 1, r.nonce, r.pub, r.h)
				if err != nil {
					errs <- err
					return
				}
				msg, err := p.PrepSharesToPrep(p0, p1)
				if err == nil {
					_, err = p.PrepNext(s0, msg)
				}
				if err == nil {
					_, err = p.PrepNext(s1, msg)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
