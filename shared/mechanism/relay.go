package mechanism

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// OverflowPolicy decides what the relay does when a dimension has more than
// n_p real entries, which dummy padding cannot repair. Overflow is routine
// for SS-Topk, whose popular dimensions appear in most clients' index sets.
type OverflowPolicy int

const (
	// OverflowError (the default) aborts the round with a
	// *dimensionOverflowError listing the overflowing dimensions; nothing is forwarded.
	OverflowError OverflowPolicy = iota
	// OverflowRaise raises the round's n_p to the smallest feasible value
	// >= max_j n_j and records it in Batch.NP and RelayStats.RealizedNP.
	// The analyzer uses the realized n_p, so the estimate stays unbiased,
	// and the accountant must be charged with the realized n_p (a larger
	// n_p only adds blanket samples, which strengthens amplification). The
	// realized n_p reveals max_j n_j, a function of the plaintext index
	// lists the relay already sees; for SS-Simple and SS-Double those
	// lists are data-independent, so it reveals nothing about the data.
	// For SS-Topk it reveals as much about the index sets as the relay
	// already knows.
	OverflowRaise
	// OverflowTruncate keeps n_p fixed: a dimension with more than n_p
	// real entries keeps a uniformly random n_p of them (KeepAtMost; the
	// rest are dropped by the relay and never forwarded; applied by
	// roundspec.Spec.Pad, not by Relay). Width must be 1, so that
	// dropping a message drops one entry of one dimension. The batch
	// reveals nothing about the counts: every dimension has exactly the
	// announced n_p entries whatever the data. Use it when the index lists
	// depend on the data (SS-Topk), where a raised n_p would reveal
	// max_j n_j, a function of the volunteers' top-k sets.
	//
	// Privacy: in an overflowing dimension the target's entry is kept with
	// probability n_p/n_j and replaced by a uniformly chosen other real
	// entry otherwise, i.e. the view is a mixture of the untruncated view
	// restricted to n_p entries and a view without the target; a kept
	// subset of n_p entries, each an eps0-LDP report of some volunteer, is
	// covered by the per-dimension shuffle bound at n = n_p (the other
	// n_p - 1 entries are independent reports), and mixing with a view
	// that does not depend on the target only lowers the hockey-stick
	// divergence (joint convexity).
	//
	// Utility: dropped entries bias that dimension's estimate toward zero.
	OverflowTruncate
)

func (p OverflowPolicy) String() string {
	switch p {
	case OverflowError:
		return "error"
	case OverflowRaise:
		return "raise"
	case OverflowTruncate:
		return "truncate"
	}
	return fmt.Sprintf("OverflowPolicy(%d)", int(p))
}

// dimensionOverflowError reports dimensions with more real entries than
// n_p under the OverflowError policy: the round must abort.
type dimensionOverflowError struct {
	NP     int      // the configured n_p
	Dims   []uint32 // overflowing dimensions, ascending
	Counts []int    // their real counts, parallel to Dims
}

func (e *dimensionOverflowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mechanism: %d dimension(s) exceed n_p=%d:", len(e.Dims), e.NP)
	for i, j := range e.Dims {
		if i == 8 {
			fmt.Fprintf(&b, " ... (%d more)", len(e.Dims)-i)
			break
		}
		fmt.Fprintf(&b, " %d(%d)", j, e.Counts[i])
	}
	return b.String()
}

// ErrInfeasiblePadding is wrapped when no packing of dummy messages can pad
// every dimension to n_p (some dimension's deficit exceeds the number of
// dummy messages) and the policy is OverflowError.
var ErrInfeasiblePadding = errors.New("infeasible dummy padding")

// RelayConfig configures the relay (FLAME Algorithm 3, S_p).
type RelayConfig struct {
	// D is the model dimension, >= 1.
	D int
	// NP is the target number of entries per dimension after padding
	// (n_p), >= 1.
	NP int
	// Width is the number of entries of every message (real and dummy),
	// 1 <= Width <= D. D*NP must be a multiple of Width: the dummies carry
	// D*NP - (real entries) entries, and the real entries are a multiple of
	// Width, so the dummies fill whole messages exactly then.
	Width int
	// Overflow selects the overflow policy (default OverflowError).
	Overflow OverflowPolicy
	// Blanket supplies the dummy values: samples of its blanket
	// distribution omega (FLAME Algorithm 3 line 10). It must be the
	// clients' per-coordinate randomizer.
	Blanket randomizer.Randomizer
}

// Relay pads and shuffles one round of FLAME messages. It is immutable and
// safe for concurrent use when its blanket randomizer is.
type Relay struct {
	cfg RelayConfig
}

// NewRelay validates cfg.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.D < 1 || cfg.D > math.MaxUint32 {
		return nil, fmt.Errorf("mechanism: relay dimension D must lie in [1, 2^32), got %d", cfg.D)
	}
	if cfg.NP < 1 {
		return nil, fmt.Errorf("mechanism: relay n_p must be >= 1, got %d", cfg.NP)
	}
	if cfg.Width < 1 || cfg.Width > cfg.D {
		return nil, fmt.Errorf("mechanism: relay Width must lie in [1, D=%d], got %d", cfg.D, cfg.Width)
	}
	if cfg.NP > math.MaxInt32 {
		return nil, fmt.Errorf("mechanism: relay n_p %d too large", cfg.NP)
	}
	if (cfg.D*cfg.NP)%cfg.Width != 0 {
		return nil, fmt.Errorf("mechanism: D*n_p = %d*%d is not a multiple of Width %d; try n_p = %d", cfg.D, cfg.NP, cfg.Width, FeasibleNP(cfg.D, cfg.Width, cfg.NP))
	}
	switch cfg.Overflow {
	case OverflowError, OverflowRaise:
	case OverflowTruncate:
		return nil, errors.New("mechanism: the relay's truncation is roundspec.Spec.Pad (width-1 messages)")
	default:
		return nil, fmt.Errorf("mechanism: unknown overflow policy %v", cfg.Overflow)
	}
	if cfg.Blanket == nil {
		return nil, errors.New("mechanism: relay Blanket randomizer is nil")
	}
	return &Relay{cfg: cfg}, nil
}

// Config returns the relay configuration.
func (r *Relay) Config() RelayConfig { return r.cfg }

// FeasibleNP returns the smallest n_p >= atLeast (and >= 1) with d*n_p a
// multiple of width. It returns 0 for d < 1 or width < 1.
func FeasibleNP(d, width, atLeast int) int {
	if d < 1 || width < 1 {
		return 0
	}
	np := max(atLeast, 1)
	for (d*np)%width != 0 {
		np++
	}
	return np
}

// RelayStats describes one round at the relay. All of it is computable from
// the plaintext index lists the relay sees.
type RelayStats struct {
	RealMessages  int
	DummyMessages int
	RealEntries   int
	DummyEntries  int
	// MinCount, MaxCount and MeanCount summarize the real entries per
	// dimension (n_j).
	MinCount  int
	MaxCount  int
	MeanCount float64
	// TargetNP is the configured n_p; RealizedNP the one every dimension
	// was padded to (they differ only when Raised).
	TargetNP   int
	RealizedNP int
	// Raised is set when OverflowRaise raised n_p, for overflow or for
	// packing feasibility.
	Raised bool
	// Overflowed lists the dimensions whose real count exceeded TargetNP.
	Overflowed []uint32
	// Truncated is the number of real entries OverflowTruncate dropped.
	Truncated int
}

// Batch is what the analyzer receives for one round.
type Batch struct {
	// D is the model dimension.
	D int
	// NP is the realized padding size: after Relay.Process every dimension
	// appears exactly NP times. NP is 0 for an unpadded batch (Collect,
	// the LDP-FL path).
	NP int
	// Messages in uniformly random order (Relay.Process) or arrival order
	// (Collect).
	Messages []Message
	Stats    RelayStats
}

// Process runs the relay of FLAME Algorithm 3 on the real messages of one
// round: it validates them (every message has Width distinct in-range
// indices), counts n_j per dimension, resolves overflow per the policy, adds
// dummy messages of the same shape whose entries carry blanket samples so
// that every dimension appears exactly n_p times, and permutes all messages
// uniformly (noise.Shuffle). The returned batch aliases the real messages'
// arrays.
//
// Privacy: padding every dimension to the same n_p with samples of the
// blanket distribution is what lets the shuffle amplification compose with
// subsampling (FLAME Theorems 3 and 4, "Dummy Padding"); the accountant
// must use Batch.NP. The relay learns nothing beyond the index lists it
// already sees.
func (r *Relay) Process(real []Message, src noise.Source) (Batch, error) {
	cfg := r.cfg
	counts, err := countIndices(real, cfg.D, cfg.Width, nil)
	if err != nil {
		return Batch{}, fmt.Errorf("mechanism: relay: %w", err)
	}
	st := summarize(counts, len(real), cfg.Width)
	st.TargetNP = cfg.NP
	for j, c := range counts {
		if c > cfg.NP {
			st.Overflowed = append(st.Overflowed, uint32(j))
		}
	}
	np := cfg.NP
	if len(st.Overflowed) > 0 && cfg.Overflow == OverflowError {
		e := &dimensionOverflowError{NP: cfg.NP, Dims: st.Overflowed, Counts: make([]int, len(st.Overflowed))}
		for i, j := range st.Overflowed {
			e.Counts[i] = counts[j]
		}
		return Batch{}, e
	}
	if !packable(cfg.D, cfg.Width, np, st) {
		if cfg.Overflow == OverflowError {
			return Batch{}, fmt.Errorf("mechanism: %w: n_p=%d, width=%d: the largest deficit %d exceeds the %d dummy messages; raise n_p (OverflowRaise does)",
				ErrInfeasiblePadding, np, cfg.Width, np-st.MinCount, (cfg.D*np-st.RealEntries)/cfg.Width)
		}
	}
	if cfg.Overflow == OverflowRaise {
		np, err = raiseNP(cfg.D, cfg.Width, cfg.NP, st)
		if err != nil {
			return Batch{}, err
		}
	}
	st.RealizedNP = np
	st.Raised = np != cfg.NP

	dummyIdx, err := planDummies(counts, np, cfg.Width)
	if err != nil {
		return Batch{}, err
	}
	m := len(dummyIdx) / cfg.Width
	dummyVals := make([]float64, len(dummyIdx))
	for t := range dummyVals {
		dummyVals[t] = cfg.Blanket.Blanket(src)
	}
	out := make([]Message, len(real), len(real)+m)
	copy(out, real)
	out = append(out, split(dummyIdx, dummyVals, cfg.Width)...)
	noise.Shuffle(src, len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })

	st.DummyMessages = m
	st.DummyEntries = len(dummyIdx)
	return Batch{D: cfg.D, NP: np, Messages: out, Stats: st}, nil
}

// Collect is the LDP-FL path: no padding and no shuffle. It validates the
// messages (any width >= 1, distinct in-range indices within a message) and
// returns them in arrival order with NP = 0; the analyzer then debiases
// each dimension with its own count.
func Collect(d int, msgs []Message) (Batch, error) {
	if d < 1 || d > math.MaxUint32 {
		return Batch{}, fmt.Errorf("mechanism: dimension must lie in [1, 2^32), got %d", d)
	}
	counts, err := countIndices(msgs, d, 0, nil)
	if err != nil {
		return Batch{}, fmt.Errorf("mechanism: collect: %w", err)
	}
	st := summarize(counts, len(msgs), 0)
	return Batch{D: d, Messages: msgs, Stats: st}, nil
}

func summarize(counts []int, messages, width int) RelayStats {
	st := RelayStats{RealMessages: messages, MinCount: math.MaxInt}
	for _, c := range counts {
		st.RealEntries += c
		st.MinCount = min(st.MinCount, c)
		st.MaxCount = max(st.MaxCount, c)
	}
	st.MeanCount = float64(st.RealEntries) / float64(len(counts))
	return st
}

// packable reports whether padding to np is possible: no overflow, d*np a
// multiple of width, and the largest deficit np - min_j n_j at most the
// number of dummy messages M = (d*np - sum_j n_j)/width (see planDummies).
func packable(d, width, np int, st RelayStats) bool {
	if st.MaxCount > np || (d*np)%width != 0 {
		return false
	}
	return width*(np-st.MinCount) <= d*np-st.RealEntries
}

// raiseNP returns the smallest n_p >= max(target, max_j n_j) that is
// packable. The packing condition width*(np - min) <= d*np - total is
// linear: np*(d - width) >= total - width*min. For width = d every message
// covers every dimension, so all counts are equal and it always holds;
// otherwise it gives a lower bound, and increasing np keeps it true while we
// step to the next multiple-of-width product.
func raiseNP(d, width, target int, st RelayStats) (int, error) {
	np := max(target, st.MaxCount)
	if need := st.RealEntries - width*st.MinCount; need > 0 {
		if width == d {
			return 0, fmt.Errorf("mechanism: %w: full-width messages with unequal counts", ErrInfeasiblePadding)
		}
		np = max(np, (need+d-width-1)/(d-width))
	}
	np = FeasibleNP(d, width, np)
	if !packable(d, width, np, st) {
		// Unreachable by the derivation above; kept so a mistake there is
		// an error, not a biased round.
		return 0, fmt.Errorf("mechanism: %w: raised n_p=%d still not packable", ErrInfeasiblePadding, np)
	}
	return np, nil
}

// planDummies returns the index lists of the dummy messages that pad every
// dimension j from counts[j] real entries to exactly np entries, as one
// flat slice: dummy message m is flat[m*width : (m+1)*width]. Every dummy
// message has width distinct indices, like a real one.
//
// Algorithm: with deficits delta_j = np - counts[j] and total
// Delta = sum_j delta_j, there are M = Delta/width dummy messages (Delta
// must be a multiple of width). Write the list L of dimensions, each j
// repeated delta_j times consecutively (in index order), and deal it
// round-robin: entry L[t] goes to message t mod M, slot t div M. Each
// message receives exactly width entries and each dimension exactly
// delta_j.
//
// Distinctness holds iff every delta_j <= M. If: two entries of message m
// sit at positions t < t' of L with t' - t a positive multiple of M, so if
// they were the same dimension j its block of consecutive copies would span
// at least M+1 positions, i.e. delta_j >= M+1. Only if: dimension j needs
// delta_j entries in pairwise different dummy messages, and there are only
// M of them (pigeonhole), so no packing at all exists when delta_j > M.
// Infeasible inputs return an error wrapping ErrInfeasiblePadding.
func planDummies(counts []int, np, width int) ([]uint32, error) {
	d := len(counts)
	if d < 1 || width < 1 || width > d || np < 0 {
		return nil, fmt.Errorf("mechanism: plan: need d >= 1, 1 <= width <= d, np >= 0 (d=%d width=%d np=%d)", d, width, np)
	}
	total, maxDef := 0, 0
	for j, c := range counts {
		if c < 0 || c > np {
			return nil, fmt.Errorf("mechanism: plan: dimension %d has %d entries, outside [0, n_p=%d]", j, c, np)
		}
		total += np - c
		maxDef = max(maxDef, np-c)
	}
	if total%width != 0 {
		return nil, fmt.Errorf("mechanism: %w: total deficit %d is not a multiple of width %d", ErrInfeasiblePadding, total, width)
	}
	m := total / width
	if maxDef > m {
		return nil, fmt.Errorf("mechanism: %w: a deficit of %d exceeds the %d dummy messages", ErrInfeasiblePadding, maxDef, m)
	}
	flat := make([]uint32, total)
	t := 0
	for j, c := range counts {
		for range np - c {
			flat[(t%m)*width+t/m] = uint32(j)
			t++
		}
	}
	return flat, nil
}

// KeepAtMost chooses, for width-1 messages whose single indices are dims,
// which to keep so that no dimension keeps more than np: in a dimension
// with n_j > np entries a uniformly random subset of np is kept (a partial
// Fisher-Yates over that dimension's positions, with src); the others keep
// everything. It returns the keep mask and the number dropped. See
// OverflowTruncate for why this leaks nothing and is covered by the
// per-dimension shuffle bound at n = np.
func KeepAtMost(dims []uint32, d, np int, src noise.Source) ([]bool, int, error) {
	if d < 1 || np < 1 {
		return nil, 0, fmt.Errorf("mechanism: keep at most: need d >= 1 and n_p >= 1, got d=%d n_p=%d", d, np)
	}
	byDim := make(map[uint32][]int)
	counts := make([]int, d)
	for _, j := range dims {
		if int64(j) >= int64(d) {
			return nil, 0, fmt.Errorf("mechanism: keep at most: %w: index %d >= d=%d", ErrMalformed, j, d)
		}
		counts[j]++
	}
	for i, j := range dims {
		if counts[j] > np {
			byDim[j] = append(byDim[j], i)
		}
	}
	keep := make([]bool, len(dims))
	for i := range keep {
		keep[i] = true
	}
	dropped := 0
	// Visit dimensions in index order so that a seeded src gives the same
	// choice on every run (map order is random).
	for j := range counts {
		pos, ok := byDim[uint32(j)]
		if !ok {
			continue
		}
		for t := 0; t < np; t++ {
			u := t + noise.Intn(src, len(pos)-t)
			pos[t], pos[u] = pos[u], pos[t]
		}
		for _, i := range pos[np:] {
			keep[i] = false
			dropped++
		}
	}
	return keep, dropped, nil
}
