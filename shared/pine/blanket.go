package pine

import (
	"errors"
	"fmt"
	"math"
)

// Blanket's choices (docs/pine.md gives the numbers at d = 7850):
const (
	// blanketGridBits: the clip C spans [2^15, 2^16) fixed-point units,
	// so rounding adds at most sqrt(d)/2 units (0.14% of C at d = 7850),
	// and each wraparound check costs bitlen(2*wr_check_bound - 1) + 1 =
	// 21 field elements.
	blanketGridBits = 16
	// blanketWrChecks of blanketWrChecks must pass: a wrapping gradient
	// passes one check with probability at most 1/2 (draft Section 3), so
	// at most 2^-100 per sharding attempt (the reference's default).
	blanketWrChecks = 100
	// blanketProofs: Field64 with joint randomness needs PROOFS >= 3
	// (VDAF-11 Section 9.6); the norm-equality circuit has no joint
	// randomness and 2 proofs put its per-report error below 2^-64.
	blanketProofs, blanketProofsNormEq = 3, 2
	// blanketAlpha is the reference's ALPHA.
	blanketAlpha = 8.7
)

// ForBlanket derives the PINE parameters for Blanket's updates of
// dimension d clipped to L2 norm clip (in model units):
//
//   - NumFracBits f is chosen so that clip * 2^f lies in [2^15, 2^16);
//   - L2NormBound B = ceil(clip * 2^f + sqrt(d)/2) + 1: rounding each
//     entry to the nearest grid point moves the vector by at most
//     sqrt(d)/2 units (triangle inequality), the +1 absorbs float error of
//     the client's clipping, so every update with ||x||_2 <= clip encodes
//     within the bound and is accepted;
//   - 100 wraparound checks, all required; alpha = 8.7;
//   - 3 main proofs and 2 norm-equality proofs;
//   - chunk lengths that minimise each proof's length.
func ForBlanket(d int, clip float64) (*Pine, error) {
	if d < 1 || d > 1<<24 {
		return nil, fmt.Errorf("pine: dimension %d out of [1, 2^24]", d)
	}
	if !(clip > 0) || math.IsInf(clip, 0) {
		return nil, errors.New("pine: clip must be positive and finite")
	}
	_, e := math.Frexp(clip) // clip = m * 2^e, m in [0.5, 1)
	f := blanketGridBits - e
	if f < 0 || f > 40 {
		return nil, fmt.Errorf("pine: clip %g out of the supported range", clip)
	}
	b := math.Ceil(math.Ldexp(clip, f)+math.Sqrt(float64(d))/2) + 1
	cfg := Config{
		Dimension: d, NumFracBits: f, L2NormBound: uint64(b),
		Proofs: blanketProofs, ProofsNormEquality: blanketProofsNormEq,
		NumWrChecks: blanketWrChecks, NumWrSuccesses: blanketWrChecks,
		Alpha: blanketAlpha, ID: Pine64HmacSha256Aes128ID,
		ChunkLength: 1, ChunkLengthNormEquality: 1,
	}
	// Chunk lengths: build once to learn the bit-checked length.
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cfg.ChunkLengthNormEquality = bestChunk(d, 1)
	cfg.ChunkLength = bestChunkMain(p.bitCheckedLen, blanketWrChecks)
	return New(cfg)
}

// proofLen of one ParallelSum gadget of degree 2 with inner arity a,
// chunk c and calls gadget calls.
func psProofLen(a, c, calls int) int { return a*c + 2*(nextPow2(1+calls)-1) + 1 }

func bestChunk(n, a int) int {
	best, bl := 1, math.MaxInt
	for c := 1; c <= n; c++ {
		if l := psProofLen(a, c, chunks(n, c)); l < bl {
			best, bl = c, l
		}
	}
	return best
}

func bestChunkMain(bitChecked, wr int) int {
	best, bl := 1, math.MaxInt
	for c := 1; c <= bitChecked+wr; c++ {
		if l := psProofLen(2, c, chunks(bitChecked, c)+chunks(wr, c)); l < bl {
			best, bl = c, l
		}
	}
	return best
}

// Scale is 2^NumFracBits, the fixed-point units per model unit.
func (p *Pine) Scale() float64 { return math.Ldexp(1, p.cfg.NumFracBits) }

// Sensitivity is the largest L2 norm, in fixed-point units, of the encoded
// gradient of ANY report the aggregators accept: L2NormBound, since the
// circuit checks sum x_i^2 <= L2NormBound^2 with x_i the integers in
// (-q/2, q/2] that the gradient's field elements represent, and the
// wraparound checks rule out that this sum exceeded q. It includes the
// client's rounding (an honest update of norm <= clip encodes to norm <=
// clip*Scale() + sqrt(d)/2 <= L2NormBound with ForBlanket's parameters)
// and holds for every accepted report, honest or not, except with the
// probability Soundness().PerReport + Soundness().PerAttempt * (number of
// sharding attempts the client can afford). Adding or removing one
// accepted report therefore changes the integer sum by at most this much
// in L2 (the add/remove-one-report neighbouring relation); divide by
// Scale() for model units. Draft Sections 3 and 4.2.2; [ROCT23] Section 3.
func (p *Pine) Sensitivity() float64 { return float64(p.cfg.L2NormBound) }

// Soundness holds the log2 of the error bounds of one instance (see the
// package doc for the derivation).
type Soundness struct {
	// PerReport: the probability that the FLPs accept an invalid report,
	// from the parts the client cannot grind (the gadget tests use query
	// randomness from the verify key): the product over one circuit's
	// proofs of degree*P/(q-P) (BBCGGI19 Theorem 4.3), the larger of the
	// two circuits' products.
	PerReport float64
	// PerAttempt: the probability, per sharding attempt of a client that
	// grinds the joint randomness seeds offline, that an invalid report
	// passes: the wraparound checks (at most
	// P[Binomial(num_wr_checks, 1/2) >= num_wr_successes]) plus the
	// random-linear-combination reductions of the main circuit
	// ((bit_checked_len + num_wr_checks + 3)/q per proof, Schwartz-Zippel)
	// raised to the number of proofs.
	PerAttempt float64
	// HonestRetry: an upper bound on the probability that an honest
	// client with ||x||_2 <= L2NormBound fails a wraparound check and
	// has to re-shard: num_wr_checks * 2 exp(-alpha^2) (sub-Gaussian tail
	// of <x, z>, see the package doc). Honest reports are never rejected.
	HonestRetry float64
}

// Soundness returns the error bounds of p (log2).
func (p *Pine) Soundness() Soundness {
	q := float64(modulus)
	gadgetErr := func(f *flpParams) float64 {
		pp := float64(f.p[0])
		return math.Log2(2 * pp / (q - pp))
	}
	// An invalid report violates one of the circuits; all proofs of that
	// circuit must pass: the worse of the two products.
	perReport := max(float64(p.cfg.ProofsNormEquality)*gadgetErr(p.flpNE), float64(p.cfg.Proofs)*gadgetErr(p.flp))
	jr := float64(p.cfg.Proofs) * math.Log2(float64(p.bitCheckedLen+p.cfg.NumWrChecks+3)/q)
	wr := log2BinomTail(p.cfg.NumWrChecks, p.cfg.NumWrSuccesses)
	hi := max(jr, wr)
	perAttempt := hi + math.Log2(1+math.Exp2(min(jr, wr)-hi))
	alpha := p.cfg.Alpha
	retry := math.Log2(float64(p.cfg.NumWrChecks)*2) - alpha*alpha/math.Ln2
	return Soundness{PerReport: perReport, PerAttempt: perAttempt, HonestRetry: min(retry, 0)}
}

// log2BinomTail is log2 P[Binomial(n, 1/2) >= s].
func log2BinomTail(n, s int) float64 {
	lg := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	maxT := math.Inf(-1)
	terms := make([]float64, 0, n-s+1)
	for k := s; k <= n; k++ {
		t := lg(n) - lg(k) - lg(n-k) - float64(n)*math.Ln2
		terms = append(terms, t)
		maxT = max(maxT, t)
	}
	sum := 0.0
	for _, t := range terms {
		sum += math.Exp(t - maxT)
	}
	return (maxT + math.Log(sum)) / math.Ln2
}

// Decode maps an unsharded sum back to model units (the same as Unshard's
// output): it exists for callers that add noise to the integer sum.
func (p *Pine) Decode(sum []int64) []float64 {
	out := make([]float64, len(sum))
	s := 1 / p.Scale()
	for i, v := range sum {
		out[i] = float64(v) * s
	}
	return out
}
