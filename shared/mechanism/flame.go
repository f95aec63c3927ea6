package mechanism

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// Protocol names one of the FLAME client encodings.
type Protocol int

const (
	// SSSimple perturbs all d coordinates at epsilon_l/d each (FLAME,
	// "Simple Protocol (SS-Simple)").
	SSSimple Protocol = iota + 1
	// SSDouble samples k of d coordinates uniformly without replacement and
	// perturbs each at epsilon_l/k (FLAME, "Double Amplification").
	SSDouble
	// SSTopk reports the top-k coordinates by magnitude at epsilon_l/k each,
	// hidden among k(l-1) decoys carrying blanket samples (FLAME
	// Algorithm 4).
	SSTopk
)

func (p Protocol) String() string {
	switch p {
	case SSSimple:
		return "ss-simple"
	case SSDouble:
		return "ss-double"
	case SSTopk:
		return "ss-topk"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// RandomizerFactory builds the per-coordinate randomizer for a given
// per-coordinate epsilon. FLAME's estimator needs an affine mean, hence
// randomizer.Affine. Wrap a constructor with AffineFactory, or write a
// closure for constructors with extra parameters, e.g.
//
//	func(eps float64) (randomizer.Affine, error) { return randomizer.NewRGB(eps, b) }
type RandomizerFactory func(eps float64) (randomizer.Affine, error)

// AffineFactory adapts a one-argument randomizer constructor returning a
// concrete type, such as randomizer.NewLaplace, to a RandomizerFactory.
func AffineFactory[T randomizer.Affine](newR func(eps float64) (T, error)) RandomizerFactory {
	return func(eps float64) (randomizer.Affine, error) {
		r, err := newR(eps)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// FLAMEConfig configures one FLAME protocol. It is validated by NewEncoder
// and NewAnalyzer; the zero values of K, L and Width select the protocol's
// defaults as documented per field.
type FLAMEConfig struct {
	// Protocol is SSSimple, SSDouble or SSTopk.
	Protocol Protocol
	// D is the model dimension (number of coordinates), >= 1.
	D int
	// K is the number of perturbed coordinates per client: must be 0 or D
	// for SSSimple; 1 <= K <= D for SSDouble; 1 <= K < D for SSTopk.
	K int
	// L is the number of groups of K entries an SS-Topk client sends
	// (FLAME Algorithm 4; choose it with TopkL or TopkNu). 1 <= L <= D/K.
	// Must be 0 or 1 for the other protocols.
	L int
	// EpsL is the local privacy budget of one client's whole report in one
	// round (epsilon_l in FLAME), positive and finite.
	EpsL float64
	// C is the clipping bound of FLAME Algorithm 2 line 8, positive and
	// finite.
	C float64
	// Width is the number of entries per message; it must divide the
	// number of entries of a report (D for SSSimple, K for SSDouble, K*L
	// for SSTopk). 0 selects the paper's layout: one message of D entries
	// for SSSimple and messages of K entries otherwise.
	//
	// Entries of one message stay linked after shuffling. FLAME's
	// Theorems 1 and 4 compose per-dimension shuffle bounds, which matches
	// Width 1 exactly (each value anonymous on its own); larger widths are
	// the paper's message layout and cost fewer, bigger messages.
	Width int
	// NewRandomizer builds the per-coordinate randomizer at the
	// per-coordinate budget (EpsL/D or EpsL/K).
	NewRandomizer RandomizerFactory
	// Keep is the probability, in (0, 1], that a perturbed coordinate
	// reports the randomized datum; otherwise it reports a blanket sample,
	// as a virtual volunteer at x = 1/2 would (a personal privacy level;
	// see KeepFor). 0 selects 1.
	Keep float64
}

// KeepFor returns the Keep probability that lowers a per-coordinate
// guarantee eps to fraction*eps: q = (e^{f·eps} - 1)/(e^{eps} - 1).
//
// Privacy: the coordinate's output law is q·R(x) + (1-q)·ω with ω the
// blanket, itself a mixture of outputs R(x') over inputs x' in [0,1]
// (Laplace and Gaussian: ω = R(1/2); R_{γ,b}: ω = E_{x' uniform on the grid}
// R(x')). Writing t = p_x/p_{x'} <= e^eps and s = ω/p_{x'} in
// [e^-eps, e^eps] (with p_x/ω <= e^eps), the likelihood ratio
// (q t + (1-q) s)/(q + (1-q) s) is at most 1 + q(e^eps - 1), attained at
// s = 1 (amplification by subsampling against a fixed mixture), so the
// coordinate is ln(1 + q(e^eps - 1)) = f·eps-LDP; an (eps, delta)
// randomizer gets delta·q as well. Every output is still the law of some
// volunteer's report at the announced level, so the cover this volunteer
// gives everyone else in the shuffle is unchanged: a personal level
// weakens nobody's guarantee.
//
// Utility: the coordinate's debiased expectation is scaled by q (a blanket
// sample contributes zero), i.e. the volunteer counts for q of a report.
func KeepFor(eps, fraction float64) (float64, error) {
	if !(eps > 0) || math.IsInf(eps, 0) {
		return 0, fmt.Errorf("mechanism: keep: epsilon %v must be finite and > 0", eps)
	}
	if !(fraction > 0 && fraction <= 1) {
		return 0, fmt.Errorf("mechanism: keep: fraction %v outside (0, 1]", fraction)
	}
	if fraction == 1 {
		return 1, nil
	}
	q := math.Expm1(fraction*eps) / math.Expm1(eps)
	if !(q > 0 && q <= 1) {
		// e^eps overflows for eps above ~709: q underflows to 0, a
		// volunteer who never reports; refuse instead of pretending.
		return 0, fmt.Errorf("mechanism: keep: fraction %v of epsilon %v gives report probability %v", fraction, eps, q)
	}
	return q, nil
}

// KeptEpsilon returns ln(1 + q(e^eps - 1)), the guarantee of a coordinate
// reported with probability q (see KeepFor), computed without overflow.
func KeptEpsilon(eps, q float64) float64 {
	if q >= 1 {
		return eps
	}
	if eps > 30 {
		// ln(1 + q(e^eps - 1)) = eps + ln(q + (1-q)e^-eps) for large eps.
		return eps + math.Log(q+(1-q)*math.Exp(-eps))
	}
	return math.Log1p(q * math.Expm1(eps))
}

// withDefaults validates cfg and fills K, L and Width.
func (cfg FLAMEConfig) withDefaults() (FLAMEConfig, error) {
	if cfg.D < 1 {
		return cfg, fmt.Errorf("mechanism: dimension D must be >= 1, got %d", cfg.D)
	}
	if cfg.D > math.MaxUint32 {
		return cfg, fmt.Errorf("mechanism: dimension D %d exceeds the uint32 index range", cfg.D)
	}
	if err := check.Positive(errInvalid, "local budget EpsL", cfg.EpsL); err != nil {
		return cfg, err
	}
	if err := check.Positive(errInvalid, "clipping bound C", cfg.C); err != nil {
		return cfg, err
	}
	if cfg.NewRandomizer == nil {
		return cfg, errors.New("mechanism: NewRandomizer is nil")
	}
	switch cfg.Protocol {
	case SSSimple:
		if cfg.K != 0 && cfg.K != cfg.D {
			return cfg, fmt.Errorf("mechanism: ss-simple perturbs all coordinates: K must be 0 or D=%d, got %d", cfg.D, cfg.K)
		}
		cfg.K = cfg.D
		if cfg.L != 0 && cfg.L != 1 {
			return cfg, fmt.Errorf("mechanism: L applies to ss-topk only, got %d", cfg.L)
		}
		cfg.L = 1
	case SSDouble:
		if cfg.K < 1 || cfg.K > cfg.D {
			return cfg, fmt.Errorf("mechanism: ss-double needs 1 <= K <= D=%d, got %d", cfg.D, cfg.K)
		}
		if cfg.L != 0 && cfg.L != 1 {
			return cfg, fmt.Errorf("mechanism: L applies to ss-topk only, got %d", cfg.L)
		}
		cfg.L = 1
	case SSTopk:
		if cfg.K < 1 || cfg.K >= cfg.D {
			return cfg, fmt.Errorf("mechanism: ss-topk needs 1 <= K < D=%d, got %d", cfg.D, cfg.K)
		}
		if cfg.L < 1 || cfg.L > cfg.D/cfg.K {
			return cfg, fmt.Errorf("mechanism: ss-topk needs 1 <= L <= floor(D/K)=%d (K*L distinct indices), got %d", cfg.D/cfg.K, cfg.L)
		}
	default:
		return cfg, fmt.Errorf("mechanism: unknown protocol %v", cfg.Protocol)
	}
	if cfg.Keep == 0 {
		cfg.Keep = 1
	}
	if !(cfg.Keep > 0 && cfg.Keep <= 1) {
		return cfg, fmt.Errorf("mechanism: Keep %v outside (0, 1]", cfg.Keep)
	}
	entries := cfg.K * cfg.L
	if cfg.Width == 0 {
		cfg.Width = cfg.K
	}
	if cfg.Width < 1 || entries%cfg.Width != 0 {
		return cfg, fmt.Errorf("mechanism: Width %d must be >= 1 and divide the %d entries of a report", cfg.Width, entries)
	}
	return cfg, nil
}

// PerCoordinateEpsilon is the budget of each perturbed coordinate:
// EpsL/D for SS-Simple and EpsL/K for SS-Double and SS-Topk, so that the
// report is EpsL-LDP by basic composition (FLAME Lemma 2).
func (cfg FLAMEConfig) PerCoordinateEpsilon() float64 {
	if cfg.Protocol == SSSimple {
		return cfg.EpsL / float64(cfg.D)
	}
	return cfg.EpsL / float64(cfg.K)
}

// Encoder is the client side of SS-Simple, SS-Double and SS-Topk (FLAME
// Algorithm 2 lines 8-10 with Randomize of the chosen protocol). An Encoder
// is immutable and safe for concurrent use when its randomizer is.
type Encoder struct {
	cfg  FLAMEConfig
	r    randomizer.Affine
	clip clipper
	// apes is set for the APES layout (NewAPESWireEncoder); r is then nil.
	apes *apesWire
}

// NewEncoder validates cfg and builds the per-coordinate randomizer at
// cfg.PerCoordinateEpsilon().
func NewEncoder(cfg FLAMEConfig) (*Encoder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r, err := cfg.NewRandomizer(cfg.PerCoordinateEpsilon())
	if err != nil {
		return nil, fmt.Errorf("mechanism: building randomizer: %w", err)
	}
	if r == nil {
		return nil, errors.New("mechanism: NewRandomizer returned nil")
	}
	if _, slope := r.Affine(); !(slope > 0) || math.IsInf(slope, 0) {
		return nil, fmt.Errorf("mechanism: randomizer %s has non-positive slope %v", r.Name(), slope)
	}
	return &Encoder{cfg: cfg, r: r, clip: clipper{c: cfg.C}}, nil
}

// Config returns the validated configuration with defaults filled in.
func (e *Encoder) Config() FLAMEConfig { return e.cfg }

// Randomizer returns the per-coordinate randomizer; the relay pads with its
// blanket distribution. Nil for the APES layout (Clip-Laplace is not
// affine; see NewAPESWireEncoder).
func (e *Encoder) Randomizer() randomizer.Affine { return e.r }

// Shape returns the data-independent report shape: K*L/Width messages of
// Width entries (APES layout: D+1 messages of width 1).
func (e *Encoder) Shape() Shape {
	if e.apes != nil {
		return Shape{Messages: e.apes.d + 1, Width: 1}
	}
	return Shape{Messages: e.cfg.K * e.cfg.L / e.cfg.Width, Width: e.cfg.Width}
}

// Epsilon and Delta give the LDP guarantee of one report on the values, by
// basic composition over the perturbed coordinates (FLAME Lemma 2): Epsilon
// is K times the per-coordinate epsilon (= EpsL, lowered by Keep < 1 as
// KeptEpsilon states) and Delta is K times the per-coordinate delta (times
// Keep). SS-Topk decoys carry data-independent blanket samples and cost
// nothing.
func (e *Encoder) Epsilon() float64 { return float64(e.cfg.K) * e.CoordinateEpsilon() }

// Delta: see Epsilon (0 for the APES layout: Clip-Laplace is pure).
func (e *Encoder) Delta() float64 {
	if e.apes != nil {
		return 0
	}
	return float64(e.cfg.K) * e.cfg.Keep * e.r.Delta()
}

// CoordinateEpsilon is the guarantee of one perturbed coordinate:
// KeptEpsilon(randomizer epsilon, Keep); for the APES layout, the client's
// own per-coordinate budget level·epsMax.
func (e *Encoder) CoordinateEpsilon() float64 {
	if e.apes != nil {
		return e.apes.level * e.apes.epsMax
	}
	return KeptEpsilon(e.r.Epsilon(), e.cfg.Keep)
}

// report randomizes one normalized coordinate: R(x) with probability Keep,
// a blanket sample otherwise. With Keep = 1 it draws exactly what
// Randomize draws.
func (e *Encoder) report(x float64, src noise.Source) float64 {
	if e.cfg.Keep < 1 && !noise.Bernoulli(src, e.cfg.Keep) {
		return e.r.Blanket(src)
	}
	return e.r.Randomize(x, src)
}

// Encode clips, normalizes and randomizes one update x of length D and
// returns the report as Shape().Messages messages of Shape().Width entries,
// all backed by two freshly allocated arrays.
//
// Privacy: the values are Epsilon()-LDP (Delta() for approximate
// randomizers) with respect to x, since each perturbed coordinate has
// sensitivity 1 after normalization and gets EpsL/D (SS-Simple) or EpsL/K
// (SS-Double, SS-Topk) (FLAME Theorem 1, Theorem 4 with Lemma 2). The index
// lists are data-independent for SS-Simple and SS-Double. For SS-Topk they
// are not: they give nu-index privacy against the relay (FLAME Definition 3
// and Proposition 2; nu = topkMinNu(D, K, L)), and no LDP guarantee.
func (e *Encoder) Encode(x []float64, src noise.Source) ([]Message, error) {
	if err := checkVector(x, e.cfg.D); err != nil {
		return nil, err
	}
	if e.apes != nil {
		return e.apes.encode(x, src)
	}
	n := e.cfg.K * e.cfg.L
	idx := make([]uint32, n)
	vals := make([]float64, n)
	switch e.cfg.Protocol {
	case SSSimple:
		for j := range idx {
			idx[j] = uint32(j)
			vals[j] = e.report(e.clip.Normalize(x[j]), src)
		}
	case SSDouble:
		sampleWithoutReplacement(idx, e.cfg.D, src)
		for t, j := range idx {
			vals[t] = e.report(e.clip.Normalize(x[j]), src)
		}
	case SSTopk:
		e.encodeTopk(x, idx, vals, src)
	}
	return split(idx, vals, e.cfg.Width), nil
}

// encodeTopk is FLAME Algorithm 4: the k indices of largest |x_j| (ties to
// the lower index) get randomized values, k(l-1) indices drawn uniformly
// without replacement from the other d-k get blanket samples, and the kl
// entries are permuted uniformly.
//
// The paper writes Top(|x~_i|), the magnitude of the normalized value in
// [0,1]; that would rank by signed update (x~ = 1/2 is a zero update).
// Sparsification ranks by update magnitude (Aji and Heafield 2017), so we
// rank by |x_j|, which orders like |x~_j - 1/2| and breaks ties among
// clipped coordinates by their raw magnitude.
func (e *Encoder) encodeTopk(x []float64, idx []uint32, vals []float64, src noise.Source) {
	d, k := e.cfg.D, e.cfg.K
	top := idx[:k]
	topK(x, top)
	isTop := make([]bool, d)
	for _, j := range top {
		isTop[j] = true
	}
	for t, j := range top {
		vals[t] = e.report(e.clip.Normalize(x[j]), src)
	}
	decoys := idx[k:]
	if len(decoys) > 0 {
		rest := make([]uint32, 0, d-k)
		for j := 0; j < d; j++ {
			if !isTop[j] {
				rest = append(rest, uint32(j))
			}
		}
		// Partial Fisher-Yates: the first len(decoys) entries of rest
		// become a uniform sample without replacement.
		for t := range decoys {
			u := t + noise.Intn(src, len(rest)-t)
			rest[t], rest[u] = rest[u], rest[t]
			decoys[t] = rest[t]
			vals[k+t] = e.r.Blanket(src)
		}
	}
	noise.Shuffle(src, len(idx), func(a, b int) {
		idx[a], idx[b] = idx[b], idx[a]
		vals[a], vals[b] = vals[b], vals[a]
	})
}

// split cuts the parallel arrays into messages of width entries; each
// message's slices are capped so appending to one cannot clobber the next.
func split(idx []uint32, vals []float64, width int) []Message {
	msgs := make([]Message, len(idx)/width)
	for m := range msgs {
		lo, hi := m*width, (m+1)*width
		msgs[m] = Message{Indices: idx[lo:hi:hi], Values: vals[lo:hi:hi]}
	}
	return msgs
}

// sampleWithoutReplacement fills dst with len(dst) distinct uniform indices
// from [0, d) using Floyd's algorithm, whose output set is uniform over all
// subsets of that size; the order is then permuted uniformly so that the
// sequence, too, is a uniform ordered sample.
func sampleWithoutReplacement(dst []uint32, d int, src noise.Source) {
	k := len(dst)
	if k*8 >= d {
		// Dense case: a partial Fisher-Yates over [0, d) is as cheap
		// as Floyd's k draws plus the final shuffle.
		all := make([]uint32, d)
		for j := range all {
			all[j] = uint32(j)
		}
		for t := 0; t < k; t++ {
			u := t + noise.Intn(src, d-t)
			all[t], all[u] = all[u], all[t]
		}
		copy(dst, all[:k])
		return
	}
	seen := make([]uint64, (d+63)/64)
	t := 0
	for j := d - k; j < d; j++ {
		v := uint32(noise.Intn(src, j+1))
		if seen[v/64]&(1<<(v%64)) != 0 {
			v = uint32(j)
		}
		seen[v/64] |= 1 << (v % 64)
		dst[t] = v
		t++
	}
	noise.Shuffle(src, k, func(a, b int) { dst[a], dst[b] = dst[b], dst[a] })
}

// topK writes into dst the indices of the len(dst) largest |x_j|, ties
// broken toward the lower index, in no particular order. It keeps a min-heap
// of the current winners (root = weakest), O(d log k).
func topK(x []float64, dst []uint32) {
	k := len(dst)
	// weaker reports whether a ranks strictly below b.
	weaker := func(a, b uint32) bool {
		ma, mb := math.Abs(x[a]), math.Abs(x[b])
		if ma != mb {
			return ma < mb
		}
		return a > b
	}
	siftDown := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			m := l
			if r := l + 1; r < k && weaker(dst[r], dst[l]) {
				m = r
			}
			if !weaker(dst[m], dst[i]) {
				return
			}
			dst[i], dst[m] = dst[m], dst[i]
			i = m
		}
	}
	for j := 0; j < k; j++ {
		dst[j] = uint32(j)
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(i)
	}
	for j := k; j < len(x); j++ {
		if weaker(dst[0], uint32(j)) {
			dst[0] = uint32(j)
			siftDown(0)
		}
	}
}
