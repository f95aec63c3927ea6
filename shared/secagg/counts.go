package secagg

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/noise"
)

// Count blocks (shared/counts, docs/counts.md "Wiring it into the
// servers"): a round whose Params carry a counts.Spec proves and sums, next
// to the update, one small PINE instance per block, each bound to the
// report's nonce (counts.BlockNonce). Every layout below appends the
// blocks' parts, in block order, after the update's:
//
//	'L' leader input share: ... | per block: public share | leader share
//	'H' helper input share: ... | per block: public share | helper share
//	'P' entry payload:      update prep share | per block: prep share
//	'M' entry payload:      update prep message | per block: prep message
//	'R', 'A' aggregates:    update Dim x Field64 | per block: Dim_i x Field64
//
// so every size stays fixed by the round's Params, and a report is
// accepted only if the update and every block are (RejectCountBlock).

// countLayout is the sizes of a round's count blocks.
type countLayout struct {
	spec                     *counts.Spec
	pub, lead, help          []int // per block
	prepShare, prepMsg       []int
	leadLen, helpLen         int // totals of public + input shares
	prepShareLen, prepMsgLen int
	aggLen                   int
}

func newCountLayout(s *counts.Spec) *countLayout {
	l := &countLayout{spec: s, aggLen: s.AggregateSize()}
	for _, b := range s.Blocks() {
		p := b.Pine()
		l.pub = append(l.pub, p.PublicShareSize())
		l.lead = append(l.lead, p.LeaderShareSize())
		l.help = append(l.help, p.HelperShareSize())
		l.prepShare = append(l.prepShare, p.PrepShareSize())
		l.prepMsg = append(l.prepMsg, p.PrepMsgSize())
		l.leadLen += p.PublicShareSize() + p.LeaderShareSize()
		l.helpLen += p.PublicShareSize() + p.HelperShareSize()
		l.prepShareLen += p.PrepShareSize()
		l.prepMsgLen += p.PrepMsgSize()
	}
	return l
}

// split cuts b into consecutive parts of the given sizes (len(b) must be
// their sum: the callers check the total first).
func split(b []byte, sizes []int) [][]byte {
	out := make([][]byte, len(sizes))
	off := 0
	for i, n := range sizes {
		out[i] = b[off : off+n : off+n]
		off += n
	}
	return out
}

// splitShares cuts the blocks' part of an input share into public and
// input shares.
func (l *countLayout) splitShares(b []byte, leader bool) (pubs, ins [][]byte) {
	in := l.help
	if leader {
		in = l.lead
	}
	off := 0
	for i := range l.pub {
		pubs = append(pubs, b[off:off+l.pub[i]:off+l.pub[i]])
		off += l.pub[i]
		ins = append(ins, b[off:off+in[i]:off+in[i]])
		off += in[i]
	}
	return pubs, ins
}

// CountSpec returns the round's count blocks (nil without counts).
func (r *Round) CountSpec() *counts.Spec {
	if r.cl == nil {
		return nil
	}
	return r.cl.spec
}

// ShardCounts is Shard for a round with count blocks: it shards the
// update as Shard does and each block's value (values[i] for block i,
// counts.Spec.Shard: encoded, proven and split, bound to the update's
// nonce), and appends the blocks' public and input shares to the leader's
// and the helper's input shares. Each share alone stays uniformly
// distributed given the sizes (every part is an additive share or seeds).
func (r *Round) ShardCounts(x []float64, values []counts.Value, src noise.Source) (leader, helper []byte, err error) {
	if r.cl == nil {
		return nil, nil, errors.New("secagg: the round has no count blocks")
	}
	if len(x) != r.p.Dim {
		return nil, nil, fmt.Errorf("secagg: update has length %d, want %d", len(x), r.p.Dim)
	}
	c, err := clipL2(x, r.p.Clip)
	if err != nil {
		return nil, nil, err
	}
	return r.shardWithCounts(c, values, src)
}

// shardWithCounts shards x without clipping, then the blocks (tests use
// it with a raw x).
func (r *Round) shardWithCounts(x []float64, values []counts.Value, src noise.Source) (leader, helper []byte, err error) {
	leader, helper, err = r.shardPineRaw(x, src)
	if err != nil {
		return nil, nil, err
	}
	var nonce [nonceSize]byte
	copy(nonce[:], leader[headerLen:])
	rep, err := r.cl.spec.Shard(values, nonce, src)
	if err != nil {
		return nil, nil, fmt.Errorf("secagg: count blocks: %w", err)
	}
	for _, b := range rep.Blocks {
		leader = append(append(leader, b.Public...), b.Leader...)
		helper = append(append(helper, b.Public...), b.Helper...)
	}
	return leader, helper, nil
}

// countPrep runs the blocks' PrepInit for one report whose update passed
// its own (RejectCountBlock on failure).
func (e *PineEngine) countPrep(s *ReportShare) (counts.Prep, error) {
	sv, ok := e.cpool.Get().(*counts.Server)
	if !ok {
		var err error
		if sv, err = e.r.cl.spec.NewServer(e.Leader(), e.vk); err != nil {
			return counts.Prep{}, err
		}
	}
	defer e.cpool.Put(sv)
	return sv.PrepInit(s.Nonce, s.cpub, s.cin)
}

// countDecide is the leader's decision on the blocks (own and helper's
// prep shares without the update's part) and its PrepNext: the blocks'
// prep messages and output share.
func (e *PineEngine) countDecide(st counts.Prep, own, helper []byte) ([]byte, counts.Out, error) {
	l := e.r.cl
	ls, hs := split(own, l.prepShare), split(helper, l.prepShare)
	msgs, err := l.spec.PrepSharesToPrep(ls, hs)
	if err != nil {
		return nil, counts.Out{}, err
	}
	out, err := l.spec.PrepNext(st, msgs)
	if err != nil {
		return nil, counts.Out{}, err
	}
	var m []byte
	for _, x := range msgs {
		m = append(m, x...)
	}
	return m, out, nil
}

// countNext is the helper's PrepNext on the blocks' prep messages.
func (e *PineEngine) countNext(st counts.Prep, msgs []byte) (counts.Out, error) {
	l := e.r.cl
	return l.spec.PrepNext(st, split(msgs, l.prepMsg))
}
