// Package shuffler is the relay's round pipeline after ingest: it pads every
// dimension of a round's real messages to n_p with sealed dummy messages
// whose values come from the clients' blanket distribution, permutes all
// messages uniformly, and returns the Batch frame for the aggregator
// (FLAME Algorithm 3, S_p; docs/protocol.md "Topology and flow").
//
// The relay never sees values: real messages arrive sealed to the
// aggregator's HPKE key, and dummies are sealed here with the same function
// (envelope.SealValues) and the announced key, so they have exactly the
// size of real messages.
package shuffler

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Round describes the round being closed.
type Round struct {
	// Round is the round number of the announcement.
	Round uint64
	// Params are the announced parameters.
	Params wire.Params
	// HPKEPub is the announced X25519 key dummies are sealed to.
	HPKEPub [32]byte
	// Reports, CheckedIn and Population are copied into the batch header:
	// clients with a complete report in the batch, clients that checked in,
	// clients connected when the round opened.
	Reports, CheckedIn, Population uint32
}

// Stats describes the padding of one round; every field is a function of
// the plaintext index lists the relay sees.
type Stats struct {
	RealMessages  int
	DummyMessages int
	// Presealed is the number of dummies taken from the round's pool
	// (sealed while the round was open); the rest were sealed at close.
	Presealed int
	// TargetNP is the announced n_p; RealizedNP the one every dimension
	// was padded to. They differ (Raised) when a dimension had more than
	// TargetNP real entries or the deficits could not be packed into
	// messages of Width distinct indices (mechanism.OverflowRaise).
	TargetNP, RealizedNP int
	Raised               bool
	// Overflowed is the number of dimensions whose real count exceeded
	// TargetNP.
	Overflowed int
	// Truncated is the number of real messages dropped from overflowing
	// dimensions (SS-Topk, mechanism.OverflowTruncate); never forwarded,
	// and never told to the aggregator.
	Truncated int
}

// ErrInfeasible is wrapped when no n_p can pad the round (only possible
// with full-width messages of unequal counts, which well-formed reports
// never produce); the round must abort with reason overflow.
var ErrInfeasible = errors.New("shuffler: infeasible padding")

// Blanket returns the per-coordinate randomizer the clients of a round use
// (roundspec.Spec.Blanket, the one derivation all parties share); its
// Blanket method is the dummy value distribution omega of every value
// dimension (FLAME Algorithm 3 line 10), clamped to the randomizer's
// bounded support like every report. For APES it is Clip-Laplace at the
// largest per-coordinate budget (a virtual volunteer at the largest level);
// APES's budget column takes roundspec.Spec.Dummy's constant instead.
func Blanket(p wire.Params) (randomizer.Randomizer, error) {
	spec, err := roundspec.New(p)
	if err != nil {
		return nil, fmt.Errorf("shuffler: %w", err)
	}
	b := spec.Blanket()
	if b == nil {
		return nil, fmt.Errorf("shuffler: %v pads nothing", p.Protocol)
	}
	return b, nil
}

// Build pads and shuffles one round. real holds the messages of the
// complete reports (already validated by wire.ParseReport: Width distinct
// indices < D each, sealed block of envelope.SealedLen(Width) bytes); it is
// reordered in place and aliased by the result.
//
// Privacy: every dimension appears exactly RealizedNP times, dummy values
// are samples of the clients' blanket distribution sealed like real ones,
// and the order is a uniform permutation drawn from src (noise.Shuffle,
// Fisher-Yates): this is the padded shuffle that FLAME Theorems 3 and 4
// ("Dummy Padding") require for amplification; the accountant is charged
// with the realized n_p carried in the batch. src must be noise.Secure() in
// production. Sealing runs on up to workers goroutines (<= 0: GOMAXPROCS);
// the values and the permutation depend on src only, not on scheduling.
//
// Build seals every dummy here; Presealer.Build uses the dummies sealed in
// the background while the round was open (its value blocks are the first
// dummies, the rest are drawn from src and sealed here; see pool.go for why
// this leaves the batch's law unchanged).
func Build(r Round, real []wire.BatchMessage, src noise.Source, workers int) (wire.Batch, Stats, error) {
	return build(r, real, src, workers, envelope.SealValues, nil)
}

// BuildFrom is Build with an explicit pool (nil: none). The pool must have been made for r (same round,
// key and parameters); it is stopped and must not be reused.
func BuildFrom(r Round, real []wire.BatchMessage, src noise.Source, workers int, pool *Pool) (wire.Batch, Stats, error) {
	if pool != nil && (pool.key.round != r.Round || pool.key.pub != r.HPKEPub || pool.key.params != r.Params) {
		return wire.Batch{}, Stats{}, errors.New("shuffler: pool made for another round")
	}
	return build(r, real, src, workers, envelope.SealValues, pool)
}

// sealFunc is envelope.SealValues; tests substitute a cheap one where only
// the permutation matters.
type sealFunc func(pub [32]byte, round uint64, values []float64) ([]byte, error)

func build(r Round, real []wire.BatchMessage, src noise.Source, workers int, seal sealFunc, pool *Pool) (wire.Batch, Stats, error) {
	if pool != nil {
		defer pool.Stop()
	}
	p := r.Params
	spec, err := roundspec.New(p)
	if err != nil {
		return wire.Batch{}, Stats{}, fmt.Errorf("shuffler: %w", err)
	}
	d := int(p.Columns())
	// roundspec admits width 1 only: every message is one dimension.
	dims := make([]uint32, len(real))
	for i, m := range real {
		if len(m.Indices) != 1 || len(m.Sealed) != envelope.SealedLen(1) {
			return wire.Batch{}, Stats{}, fmt.Errorf("shuffler: message %d has the wrong shape", i)
		}
		if int(m.Indices[0]) >= d {
			return wire.Batch{}, Stats{}, fmt.Errorf("shuffler: message %d: index %d >= d=%d", i, m.Indices[0], d)
		}
		dims[i] = m.Indices[0]
	}
	pad, err := spec.Pad(dims, src)
	if err != nil {
		return wire.Batch{}, Stats{}, fmt.Errorf("%w: %w", ErrInfeasible, err)
	}
	if pad.Keep != nil {
		kept := real[:0]
		for i, m := range real {
			if pad.Keep[i] {
				kept = append(kept, m)
			}
		}
		real = kept
	}
	np, flat := pad.NP, pad.Dummies
	nd := len(flat)
	dummies := make([]wire.BatchMessage, nd)
	vals := make([]float64, nd)
	from := 0 // dummies [0, from) are pre-sealed pool blocks
	if pool != nil {
		ps := pool.take()
		from = min(nd, len(ps))
		// Pool blocks are draws of the value dimensions' blanket
		// (Blanket); dummies are in dimension order, so only those below
		// D may take one (APES's budget column, index D, is last).
		for from > 0 && flat[from-1] >= p.D {
			from--
		}
		for m := range from {
			dummies[m].Sealed = ps[m]
		}
	}
	for i := from; i < nd; i++ {
		vals[i] = spec.Dummy(flat[i], src)
	}
	if err := sealAll(dummies, flat, vals, 1, r.HPKEPub, r.Round, workers, seal); err != nil {
		return wire.Batch{}, Stats{}, err
	}
	msgs := make([]wire.BatchMessage, 0, len(real)+nd)
	msgs = append(append(msgs, real...), dummies...)
	noise.Shuffle(src, len(msgs), func(a, b int) { msgs[a], msgs[b] = msgs[b], msgs[a] })
	b := wire.Batch{
		Round:      r.Round,
		D:          p.Columns(),
		Width:      p.Width,
		NP:         uint32(np),
		Reports:    r.Reports,
		CheckedIn:  r.CheckedIn,
		Population: r.Population,
		Messages:   msgs,
	}
	st := Stats{
		RealMessages:  len(real),
		DummyMessages: nd,
		Presealed:     from,
		TargetNP:      int(p.NP),
		RealizedNP:    np,
		Raised:        np != int(p.NP),
		Overflowed:    pad.Overflowed,
		Truncated:     pad.Truncated,
	}
	return b, st, nil
}

// sealAll gives dummy m the indices flat[m*width:(m+1)*width] and, unless
// dst[m].Sealed is already set (a pre-sealed pool block of the same
// values), seals its values vals[m*width:(m+1)*width].
func sealAll(dst []wire.BatchMessage, flat []uint32, vals []float64, width int, pub [32]byte, round uint64, workers int, seal sealFunc) error {
	todo := make([]int, 0, len(dst))
	for m := range dst {
		dst[m].Indices = flat[m*width : (m+1)*width : (m+1)*width]
		if dst[m].Sealed == nil {
			todo = append(todo, m)
		}
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(todo)))
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	chunk := (len(todo) + workers - 1) / max(workers, 1)
	for w := 0; w < len(todo); w += chunk {
		lo, hi := w, min(w+chunk, len(todo))
		wg.Go(func() {
			for _, m := range todo[lo:hi] {
				s, err := seal(pub, round, vals[m*width:(m+1)*width])
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = fmt.Errorf("shuffler: sealing dummy: %w", err)
					}
					errMu.Unlock()
					return
				}
				dst[m].Sealed = s
			}
		})
	}
	wg.Wait()
	return first
}
