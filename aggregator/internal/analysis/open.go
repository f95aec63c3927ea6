package analysis

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/wire"
)

// UnopenedReason is the rejection reason a round record gives for a
// secure-summation report whose leader share did not open (counted in
// RejectedOpen; the wire verdict is secagg.RejectWrongLength): sealed to
// another key, for another round, under another consent text's hash
// (envelope.ShareInfo binds the leader's share to task.ConsentHash), or
// altered on the way.
const UnopenedReason = "did not open (another key, round or consent text, or altered)"

// errInadmissible marks a value outside the randomizer's support.
var errInadmissible = errors.New("value outside the randomizer's support")

// Counts are the BatchReply counts of one batch: every message is
// exactly one of accepted, rejected because it did not open, or rejected
// because it opened to an inadmissible value.
type Counts struct {
	Accepted, RejectedOpen, RejectedValue int
}

// openChunk is the number of messages a worker claims at a time: large
// enough that the shared counter is touched rarely, small enough that the
// last chunks balance across workers (a 3,350-message batch makes ~200).
const openChunk = 16

// Open opens every message of b (sealed for round with key) on
// workers goroutines and returns the batch in the analyzer's form, the
// values written into one flat array (message i's values at
// [i*w, (i+1)*w)). A message that fails to open (ErrOpen: tampered, wrong
// round or key) or opens to a value no honest volunteer or dummy can carry
// (non-finite, outside the randomizer's bounded support, or off R_{γ,b}'s
// grid: admissible reports false) is counted and all its entries are set
// to center, the blanket mean E[R(1/2)]: it
// then contributes zero to the debiased sum in expectation, exactly like a
// padding dummy, and every dimension still holds n_p values (the
// analyzer's padding check). Counting per message keeps Accepted +
// RejectedOpen + RejectedValue equal to the number of messages.
//
// Work is distributed dynamically (an atomic cursor over chunks of
// openChunk messages), so a slow core does not hold up the batch; each
// worker writes only its own messages' slots and keeps its own counts, so
// there is no other sharing.
//
// Bounded influence: every value that enters the estimate lies in the
// support [lo, hi] an honest report can reach, so one report moves each of
// its coordinates' debiased sums by at most max(hi - center, center - lo)
// divided by the randomizer's slope, as an honest one can.
func Open(key *sealkey.PrivateKey, round uint64, b *wire.Batch, center float64, admissible func(float64) bool, workers int) (mechanism.Batch, Counts) {
	w := int(b.Width)
	n := len(b.Messages)
	vals := make([]float64, n*w)
	msgs := make([]mechanism.Message, n)
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, (n+openChunk-1)/openChunk)
	var cursor atomic.Int64
	counts := make([]Counts, max(workers, 1))
	work := func(c *Counts) {
		for {
			lo := int(cursor.Add(openChunk)) - openChunk
			if lo >= n {
				return
			}
			for i := lo; i < min(lo+openChunk, n); i++ {
				dst := vals[i*w : (i+1)*w : (i+1)*w]
				m := b.Messages[i]
				msgs[i] = mechanism.Message{Indices: m.Indices, Values: dst}
				_, err := key.OpenValues(round, m.Sealed, dst)
				if err == nil {
					for _, v := range dst {
						if !admissible(v) {
							err = errInadmissible
							break
						}
					}
				}
				switch {
				case err == nil:
					c.Accepted++
					continue
				case errors.Is(err, envelope.ErrNonFinite), errors.Is(err, errInadmissible):
					c.RejectedValue++
				default:
					c.RejectedOpen++
				}
				for t := range dst {
					dst[t] = center
				}
			}
		}
	}
	if workers <= 1 {
		work(&counts[0])
	} else {
		var wg sync.WaitGroup
		for g := range workers {
			wg.Go(func() { work(&counts[g]) })
		}
		wg.Wait()
	}
	var total Counts
	for _, c := range counts {
		total.Accepted += c.Accepted
		total.RejectedOpen += c.RejectedOpen
		total.RejectedValue += c.RejectedValue
	}
	return mechanism.Batch{D: int(b.D), NP: int(b.NP), Messages: msgs}, total
}
