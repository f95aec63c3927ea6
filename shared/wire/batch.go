package wire

import (
	"github.com/blanket-fl/blanket/shared/envelope"
)

// Batch layout (type 0x04):
//
//	off  size  field
//	0    1     version = 1
//	1    1     type = 0x04
//	2    8     round      u64 (>= 1)
//	10   4     d          u32 (= the round's Columns(): D, or D+1 for APES)
//	14   4     width      u32 (= the round's Width)
//	18   4     np         u32 (realized n_p >= the announced NP: every dimension appears exactly np times)
//	22   4     reports    u32 (clients whose complete report is in the batch: the n of the estimator)
//	26   4     checkedIn  u32 (clients that sent CheckIn)
//	30   4     population u32 (clients connected when the round opened)
//	34   4     messages   u32 (= d*np/width)
//	38   ...   messages x (indices u32 x width, sealed envelope.SealedLen(width))
//
// Each message takes 4w + 8w + 48 bytes; the frame is 38 + messages*(12w+48).
const (
	batRound      = 2
	batD          = 10
	batWidth      = 14
	batNP         = 18
	batReports    = 22
	batCheckedIn  = 26
	batPopulation = 30
	batMessages   = 34
	batchHeader   = 38
)

// BatchMessage is one message of a batch: a real client's or a dummy, which
// the aggregator cannot tell apart.
type BatchMessage struct {
	Indices []uint32
	Sealed  []byte // aliases the input after ParseBatch
}

// Batch is the relay's padded, shuffled output for one round.
type Batch struct {
	Round      uint64
	D          uint32
	Width      uint32
	NP         uint32 // realized n_p (>= the announced NP if the relay raised it)
	Reports    uint32
	CheckedIn  uint32
	Population uint32
	Messages   []BatchMessage
}

// batchMessageSize returns the encoded size of one batch message of width
// w: 4w + envelope.SealedLen(w).
func batchMessageSize(w int) int { return 4*w + envelope.SealedLen(w) }

// BatchSize returns the size of a Batch frame of the given number of
// messages of width w.
func BatchSize(messages, w int) int { return batchHeader + messages*batchMessageSize(w) }

// checkCounts validates the batch-level fields against p:
// d and width equal p's, np >= p.NP, d*np a multiple of width, messages =
// d*np/width, MinBatch <= reports <= checkedIn, and reports*M <= messages
// (the real messages fit in the batch).
func checkBatchHeader(round uint64, d, width, np, reports, checkedIn uint32, messages uint64, p Params) error {
	switch {
	case round < 1:
		return malformed(ErrValue, "batch round must be >= 1")
	case d != p.Columns():
		return malformed(ErrValue, "batch d = %d, round has %d columns", d, p.Columns())
	case width != p.Width:
		return malformed(ErrValue, "batch width %d, round width %d", width, p.Width)
	case np < p.NP:
		return malformed(ErrValue, "batch np = %d below the announced %d", np, p.NP)
	case (uint64(d)*uint64(np))%uint64(width) != 0:
		return malformed(ErrValue, "batch d*np = %d*%d not a multiple of width %d", d, np, width)
	case messages != uint64(d)*uint64(np)/uint64(width):
		return malformed(ErrValue, "batch has %d messages, want d*np/width = %d", messages, uint64(d)*uint64(np)/uint64(width))
	case reports < p.MinBatch:
		return malformed(ErrValue, "batch reports %d below minBatch %d", reports, p.MinBatch)
	case reports > checkedIn:
		return malformed(ErrValue, "batch reports %d above checkedIn %d", reports, checkedIn)
	case uint64(reports)*uint64(p.Messages()) > messages:
		return malformed(ErrValue, "batch reports %d x %d messages exceed %d messages", reports, p.Messages(), messages)
	}
	return nil
}

// coverage checks one message's indices (< d, distinct) and counts them,
// using seen[j] = the 1-based number of the last message holding j.
type coverage struct {
	d      uint32
	counts []uint32
	seen   []uint32
}

func newCoverage(d uint32) *coverage {
	s := make([]uint32, 2*int(d))
	return &coverage{d: d, counts: s[:d:d], seen: s[d:]}
}

func (c *coverage) add(msg int, idx []uint32) error {
	stamp := uint32(msg) + 1
	for i, x := range idx {
		if x >= c.d {
			return malformed(ErrIndex, "message %d: index %d (position %d) not below d = %d", msg, x, i, c.d)
		}
		if c.seen[x] == stamp {
			return malformed(ErrIndex, "message %d: index %d repeated", msg, x)
		}
		c.seen[x] = stamp
		c.counts[x]++
	}
	return nil
}

func (c *coverage) exact(np uint32) error {
	for j, n := range c.counts {
		if n != np {
			return malformed(ErrIndex, "dimension %d appears %d times, want np = %d", j, n, np)
		}
	}
	return nil
}

// MarshalBinary encodes the batch after checking it as ParseBatch would,
// except against a Params: d, width, np and the message count must agree
// (messages = d*np/width), every message has width distinct indices < d
// and a sealed part of SealedLen(width) bytes, and every dimension appears
// exactly np times.
func (b *Batch) MarshalBinary() ([]byte, error) {
	return b.AppendBinary(nil)
}

// AppendBinary appends the encoded batch to dst (see MarshalBinary).
func (b *Batch) AppendBinary(dst []byte) ([]byte, error) {
	switch {
	case b.Round < 1:
		return dst, malformed(ErrValue, "batch round must be >= 1")
	case b.D < 1 || b.D > maxD:
		return dst, malformed(ErrValue, "batch d = %d outside [1, %d]", b.D, maxD)
	case b.Width < 1 || b.Width > b.D:
		return dst, malformed(ErrValue, "batch width %d outside [1, d = %d]", b.Width, b.D)
	case b.NP < 1:
		return dst, malformed(ErrValue, "batch np must be >= 1")
	case uint64(len(b.Messages))*uint64(b.Width) != uint64(b.D)*uint64(b.NP):
		return dst, malformed(ErrValue, "batch has %d messages of width %d, want d*np = %d entries", len(b.Messages), b.Width, uint64(b.D)*uint64(b.NP))
	case b.Reports > b.CheckedIn:
		return dst, malformed(ErrValue, "batch reports %d above checkedIn %d", b.Reports, b.CheckedIn)
	}
	w := int(b.Width)
	sl := envelope.SealedLen(w)
	cov := newCoverage(b.D)
	for i, m := range b.Messages {
		if len(m.Indices) != w {
			return dst, malformed(ErrValue, "batch message %d has %d indices, want %d", i, len(m.Indices), w)
		}
		if len(m.Sealed) != sl {
			return dst, malformed(ErrValue, "batch message %d sealed part has %d bytes, want %d", i, len(m.Sealed), sl)
		}
		if err := cov.add(i, m.Indices); err != nil {
			return dst, err
		}
	}
	if err := cov.exact(b.NP); err != nil {
		return dst, err
	}
	off := len(dst)
	dst = append(dst, make([]byte, BatchSize(len(b.Messages), w))...)
	f := dst[off:]
	putHeader(f, TypeBatch)
	be.PutUint64(f[batRound:], b.Round)
	be.PutUint32(f[batD:], b.D)
	be.PutUint32(f[batWidth:], b.Width)
	be.PutUint32(f[batNP:], b.NP)
	be.PutUint32(f[batReports:], b.Reports)
	be.PutUint32(f[batCheckedIn:], b.CheckedIn)
	be.PutUint32(f[batPopulation:], b.Population)
	be.PutUint32(f[batMessages:], uint32(len(b.Messages)))
	p := batchHeader
	for _, m := range b.Messages {
		for _, x := range m.Indices {
			be.PutUint32(f[p:], x)
			p += 4
		}
		p += copy(f[p:], m.Sealed)
	}
	return dst, nil
}

// ParseBatch decodes a Batch frame and checks it against the round's
// configuration p (as announced): p valid; d and width equal p's; np >=
// p.NP (the relay may raise n_p on overflow, never lower it); messages =
// d*np/width; MinBatch <= reports <= checkedIn; reports*M <= messages;
// exact length; every message's indices distinct and < d; every dimension
// appearing exactly np times. The length is checked before any allocation,
// so allocation is proportional to len(b). The output has one backing
// array for all indices; the Sealed slices alias b.
func ParseBatch(b []byte, p Params) (*Batch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := header(b, TypeBatch); err != nil {
		return nil, err
	}
	if len(b) < batchHeader {
		return nil, malformed(ErrTruncated, "batch: %d bytes, need at least %d", len(b), batchHeader)
	}
	bt := &Batch{
		Round:      be.Uint64(b[batRound:]),
		D:          be.Uint32(b[batD:]),
		Width:      be.Uint32(b[batWidth:]),
		NP:         be.Uint32(b[batNP:]),
		Reports:    be.Uint32(b[batReports:]),
		CheckedIn:  be.Uint32(b[batCheckedIn:]),
		Population: be.Uint32(b[batPopulation:]),
	}
	messages := uint64(be.Uint32(b[batMessages:]))
	if err := checkBatchHeader(bt.Round, bt.D, bt.Width, bt.NP, bt.Reports, bt.CheckedIn, messages, p); err != nil {
		return nil, err
	}
	w := int(bt.Width)
	ms := uint64(batchMessageSize(w))
	if err := exactLen(b, batchHeader+messages*ms, "batch"); err != nil {
		return nil, err
	}
	n := int(messages)
	sl := envelope.SealedLen(w)
	all := make([]uint32, n*w)
	bt.Messages = make([]BatchMessage, n)
	cov := newCoverage(bt.D)
	off := batchHeader
	for i := range bt.Messages {
		idx := all[i*w : (i+1)*w : (i+1)*w]
		for j := range idx {
			idx[j] = be.Uint32(b[off:])
			off += 4
		}
		if err := cov.add(i, idx); err != nil {
			return nil, err
		}
		bt.Messages[i] = BatchMessage{Indices: idx, Sealed: b[off : off+sl : off+sl]}
		off += sl
	}
	if err := cov.exact(bt.NP); err != nil {
		return nil, err
	}
	return bt, nil
}
