package shuffler

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Pre-sealing. Sealing a dummy (one HPKE encapsulation: an X25519 key
// generation and a Diffie-Hellman) dominates the cost of closing a round,
// yet the sealed block of a message holds only its values: its indices are
// plaintext next to it, and the HPKE info binds the round number only
// (envelope.SealValues). So the value blocks of the dummies can be drawn
// and sealed while the round is still open, before anyone knows which
// indices they will carry.
//
// Privacy: this changes nothing in the law of the batch. In Build, dummy
// m's values are width i.i.d. samples of the blanket distribution omega,
// drawn independently of the reports, of the index lists and of each
// other; PlanDummies' index lists are a deterministic function of the
// real counts. A pool block is also width i.i.d. omega samples drawn
// independently of everything else (from the pool's own source), so
// pairing block m of the pool with index list m gives the same joint law
// of (indices, values) as drawing the values after the indices are known.
// The HPKE ciphertext of a block is a function of its values, the fixed
// key and round, and fresh encapsulation randomness, so sealing earlier
// does not change its law either. Blocks sealed in the background but not
// used (a round with fewer dummies than estimated, or a block whose
// sealing was still in flight at close and is resealed by Build) never
// leave the process. The uniform shuffle of all messages happens at close
// as before, so FLAME Theorems 3 and 4 ("Dummy Padding") apply unchanged.

// Pool holds the sealed dummy value blocks of one round: one background
// goroutine draws width omega samples at a time from the pool's own source
// and seals them while the round is open. Presealer.Build (or BuildFrom)
// takes the blocks sealed by then, stops the pool, and draws and seals the
// rest itself.
type Pool struct {
	key poolKey
	n   int // blocks to seal at most

	mu      sync.Mutex
	sealed  [][]byte
	stopped bool
}

// poolKey identifies the round a pool was made for: a pool is only ever
// used for a round with the same number, key, parameters and population.
type poolKey struct {
	round      uint64
	pub        [32]byte
	params     wire.Params
	population uint32
}

func keyOf(r Round) poolKey {
	return poolKey{round: r.Round, pub: r.HPKEPub, params: r.Params, population: r.Population}
}

// EstimateDummies returns the number of dummy messages a round is expected
// to need when every dimension is padded to the announced n_p: the d*n_p
// entries over width, minus the expected real messages, which are M per
// expected reporter, population*CheckInP clients (at most Quota when there
// is one). It is an estimate: fewer reports mean more dummies (Build seals
// the shortfall at close), more reports fewer (the surplus is dropped).
func EstimateDummies(p wire.Params, population uint32) int {
	if p.Width == 0 || p.D == 0 {
		return 0
	}
	total := int(p.Columns()) * int(p.NP) / int(p.Width)
	reporters := float64(population) * p.CheckInP
	if math.IsNaN(reporters) || reporters < 0 {
		reporters = 0
	}
	if p.Quota > 0 {
		reporters = min(reporters, float64(p.Quota))
	}
	real := int(math.Round(reporters)) * p.Messages()
	return max(0, total-real)
}

// maxPoolBlocks bounds one pool (2^22 blocks: more than any round of
// wire.maxD dimensions needs at the default limits).
const maxPoolBlocks = 1 << 22

// NewPool starts sealing up to n dummy value blocks for round r in the
// background: each block is width samples of the blanket distribution of
// r.Params (see Blanket) drawn from src, sealed with envelope.SealValues
// to r.HPKEPub for r.Round. src belongs to the pool from now on (it must
// not be used elsewhere; noise.Secure() in production). Stop the pool, or
// let Build take it, to end the background work early.
func NewPool(r Round, src noise.Source, n int) (*Pool, error) {
	return newPool(r, src, n, envelope.SealValues)
}

func newPool(r Round, src noise.Source, n int, seal sealFunc) (*Pool, error) {
	if n < 0 || n > maxPoolBlocks {
		return nil, fmt.Errorf("shuffler: pool of %d blocks out of range [0, %d]", n, maxPoolBlocks)
	}
	if src == nil {
		return nil, errors.New("shuffler: nil source")
	}
	width := int(r.Params.Width)
	if width < 1 {
		return nil, errors.New("shuffler: zero width")
	}
	blanket, err := Blanket(r.Params)
	if err != nil {
		return nil, err
	}
	p := &Pool{key: keyOf(r), n: n, sealed: make([][]byte, 0, n)}
	go func() {
		vals := make([]float64, width)
		for range n {
			p.mu.Lock()
			stop := p.stopped
			p.mu.Unlock()
			if stop {
				return
			}
			for i := range vals { // SealValues copies the values; vals is reused
				vals[i] = blanket.Blanket(src)
			}
			s, err := seal(r.HPKEPub, r.Round, vals)
			if err != nil {
				return // an invalid key: Build reports it when sealing the rest
			}
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				return
			}
			p.sealed = append(p.sealed, s)
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Stop ends the background sealing; blocks sealed so far stay.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// Sealed returns the number of blocks sealed so far.
func (p *Pool) Sealed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sealed)
}

// take stops the pool and returns the blocks sealed so far; after it
// returns, the background goroutine adds nothing more.
func (p *Pool) take() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	return p.sealed
}

// Presealer connects the opening of a round (Start: pre-seal its dummies
// in the background) with its close (Build: take them). The relay owns
// one. It keeps at most maxPools pools: the relay has one round open at a
// time, and a pool whose round ended without a batch (an abort) is
// evicted, stopped, by later ones. The zero value is ready; it is safe
// for concurrent use.
type Presealer struct {
	mu    sync.Mutex
	pools []*Pool // oldest first
}

const maxPools = 4

// Start starts pre-sealing the dummies of round r as it opens: a pool of
// EstimateDummies(r.Params, r.Population) blocks drawn from src, which a
// later Build for the same round (same number, key, parameters and
// Population) takes. A pool already held for the same round is replaced.
// src must be noise.Secure() in production (like Build's).
func (ps *Presealer) Start(r Round, src noise.Source) error {
	p, err := NewPool(r, src, EstimateDummies(r.Params, r.Population))
	if err != nil {
		return err
	}
	ps.add(p)
	return nil
}

// Build is the package's Build with the dummies pre-sealed for r, if any
// (see pool.go's law argument: the batch's law is unchanged).
func (ps *Presealer) Build(r Round, real []wire.BatchMessage, src noise.Source, workers int) (wire.Batch, Stats, error) {
	return build(r, real, src, workers, envelope.SealValues, ps.take(r))
}

func (ps *Presealer) add(p *Pool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	kept := ps.pools[:0]
	for _, q := range ps.pools {
		if q.key == p.key {
			q.Stop()
			continue
		}
		kept = append(kept, q)
	}
	ps.pools = append(kept, p)
	for len(ps.pools) > maxPools {
		ps.pools[0].Stop()
		ps.pools = ps.pools[1:]
	}
}

// take removes and returns the pool held for r, or nil.
func (ps *Presealer) take(r Round) *Pool {
	k := keyOf(r)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, q := range ps.pools {
		if q.key == k {
			ps.pools = append(ps.pools[:i:i], ps.pools[i+1:]...)
			return q
		}
	}
	return nil
}
