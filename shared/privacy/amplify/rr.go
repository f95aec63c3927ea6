package amplify

import (
	"fmt"
	"math"
)

// shuffledRRPairK returns the exact pair of output distributions of the
// shuffled binary randomized response protocol: n users each report their
// bit through eps0-RR (keep it with probability e^eps0/(e^eps0+1), flip it
// otherwise) and the analyzer sees only the number of reported ones. The
// neighbouring datasets differ in user 1 (bit 0 in D, bit 1 in D') and the
// other n-1 users hold `ones` ones. With rho = 1/(e^eps0+1) and
// S = Bin(ones, 1-rho) + Bin(n-1-ones, rho) the count of the others,
//
//	P = law of S + Bern(rho)   (dataset D),   Q = law of S + Bern(1-rho)   (dataset D').
//
// This is the exact privacy curve of a real eps0-LDP protocol, so no
// amplification bound that holds for every eps0-LDP randomizer can certify
// a smaller delta(eps) (replace-one neighbours). S is computed by direct
// convolution, O(n^2): use it for n up to a few thousand; ShuffledRRPair
// (ones = 0) is O(n).
func shuffledRRPairK(n, ones int, eps0 float64) (*Pair, error) {
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	if n < 1 || ones < 0 || ones > n-1 {
		return nil, fmt.Errorf("amplify: shuffled RR needs n >= 1 and 0 <= ones <= n-1, got n=%d ones=%d", n, ones)
	}
	if n > 20000 && ones != 0 && ones != n-1 {
		return nil, fmt.Errorf("amplify: shuffled RR with mixed other bits is O(n^2); n=%d too large", n)
	}
	rho := 1 / (math.Exp(eps0) + 1)
	a := binomPMFs(ones, 1-rho)
	b := binomPMFs(n-1-ones, rho)
	s := convolve(a, b)
	return rrFromOthers("shuffled-rr", s, rho), nil
}

// ShuffledRRPair is shuffledRRPairK with all other users holding 0, computed
// in O(n) in log-space (S = Bin(n-1, rho)), accurate for n up to 1e8.
// Its reverse order (Swap) is the dataset where all others hold 1, by the
// symmetry m -> n-m.
func ShuffledRRPair(n int, eps0 float64) (*Pair, error) {
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("amplify: number of users %d < 1", n)
	}
	rho := 1 / (math.Exp(eps0) + 1)
	lr, l1r := math.Log(rho), math.Log1p(-rho)
	lp := make([]float64, n+1)
	lq := make([]float64, n+1)
	for m := 0; m <= n; m++ {
		sm1 := logBinomPMF(n-1, m-1, rho) // S = m-1
		sm := logBinomPMF(n-1, m, rho)    // S = m
		lp[m] = logSumExp([]float64{lr + sm1, l1r + sm})
		lq[m] = logSumExp([]float64{l1r + sm1, lr + sm})
	}
	return &Pair{Method: "shuffled-rr", Relation: ReplaceOne, LogP: lp, LogQ: lq}, nil
}

// RRFloor is the exact privacy curve of shuffled binary RR maximised over
// both orders of the neighbouring pair (all others 0, or all others 1):
// delta(eps) = max(H(P||Q), H(Q||P)) for the ShuffledRRPair. It is a lower
// bound on the true worst case of eps0-RR (any dataset is a valid
// witness); TestRRWorstCase checks that for small n no other composition of
// the other users' bits gives a larger delta, so it is the exact epsilon of
// shuffled RR there.
type RRFloor struct {
	pair *Pair
	rev  *Pair
}

// NewRRFloor builds the floor for n users at local epsilon eps0.
func NewRRFloor(n int, eps0 float64) (*RRFloor, error) {
	p, err := ShuffledRRPair(n, eps0)
	if err != nil {
		return nil, err
	}
	return &RRFloor{pair: p, rev: p.Swap()}, nil
}

// Delta returns max(H_{e^eps}(P||Q), H_{e^eps}(Q||P)).
func (f *RRFloor) Delta(eps float64) float64 {
	return math.Max(f.pair.Delta(eps), f.rev.Delta(eps))
}

// Epsilon returns the smallest eps >= 0 with Delta(eps) <= delta.
func (f *RRFloor) Epsilon(delta float64) (float64, error) {
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("amplify: delta %v outside (0, 1)", delta)
	}
	hi, _ := f.pair.MaxLoss()
	hi2, _ := f.rev.MaxLoss()
	return solveEpsilon(f.Delta, delta, math.Max(hi, hi2))
}

// Pair returns the pair for the "all others hold 0" dataset.
func (f *RRFloor) Pair() *Pair { return f.pair }

func rrFromOthers(method string, s []float64, rho float64) *Pair {
	n := len(s) // outputs 0..n (s has n entries for n-1 others)
	lp := make([]float64, n+1)
	lq := make([]float64, n+1)
	for m := 0; m <= n; m++ {
		var sm1, sm float64
		if m >= 1 {
			sm1 = s[m-1]
		}
		if m < n {
			sm = s[m]
		}
		lp[m] = math.Log(rho*sm1 + (1-rho)*sm)
		lq[m] = math.Log((1-rho)*sm1 + rho*sm)
	}
	return &Pair{Method: method, Relation: ReplaceOne, LogP: lp, LogQ: lq}
}

func binomPMFs(n int, p float64) []float64 {
	out := make([]float64, n+1)
	for k := range out {
		out[k] = math.Exp(logBinomPMF(n, k, p))
	}
	return out
}

func convolve(a, b []float64) []float64 {
	out := make([]float64, len(a)+len(b)-1)
	for i, x := range a {
		if x == 0 {
			continue
		}
		for j, y := range b {
			out[i+j] += x * y
		}
	}
	return out
}

// rrExact is the exact worst-case privacy curve of shuffled binary RR for
// small n: delta(eps) = max over every composition of the other users' bits
// (ones = 0..n-1) and both orders of H_{e^eps}. Building it costs O(n^3)
// (one O(n^2) convolution per composition), so n is limited to 1000.
// Unlike RRFloor the maximising composition is not always "all others
// equal": for eps close to 0 an intermediate split can be worse (see
// TestRRWorstCase); for the small deltas of interest it is all-equal.
type rrExact struct {
	pairs []*Pair
	eps0  float64
}

// newRRExact builds the exact curve; n in [1, 1000].
func newRRExact(n int, eps0 float64) (*rrExact, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("amplify: exact shuffled RR needs 1 <= n <= 1000, got %d", n)
	}
	r := &rrExact{eps0: eps0}
	for k := 0; k <= n-1; k++ {
		p, err := shuffledRRPairK(n, k, eps0)
		if err != nil {
			return nil, err
		}
		r.pairs = append(r.pairs, p)
	}
	return r, nil
}

// Delta returns the worst-case delta(eps) over all datasets.
func (r *rrExact) Delta(eps float64) float64 {
	var d float64
	for _, p := range r.pairs {
		// The reverse order of composition k is composition n-1-k mirrored,
		// which is in the list, so one order suffices.
		d = math.Max(d, p.Delta(eps))
	}
	return d
}

// Epsilon returns the smallest eps >= 0 with Delta(eps) <= delta.
func (r *rrExact) Epsilon(delta float64) (float64, error) {
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("amplify: delta %v outside (0, 1)", delta)
	}
	// Every atom's loss is at most eps0 (one report changes the count law
	// by at most the RR ratio).
	return solveEpsilon(r.Delta, delta, r.eps0)
}
