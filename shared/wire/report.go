package wire

import (
	"github.com/blanket-fl/blanket/shared/envelope"
)

// Report layout (type 0x03), one frame per message, M frames per client:
//
//	off     size  field
//	0       1     version = 1
//	1       1     type = 0x03
//	2       8     round    u64 (>= 1)
//	10      2     seq      u16 (0 .. count-1)
//	12      2     count    u16 (M = K*L/Width)
//	14      4     width    u32 (w; equals the announcement's)
//	18      4*w   indices  u32 x w (distinct, each < d)
//	18+4w   S     sealed   S = envelope.SealedLen(w) = 32 + 8w + 16
//
// Total 18 + 12w + 48 bytes, fixed for a round (Params.ReportFrameSize).
// The sealed plaintext is the w values, f64 big-endian, in index order.
const (
	repRound   = 2
	repSeq     = 10
	repCount   = 12
	repWidth   = 14
	repIndices = 18

	reportHeader = repIndices
)

// Report is one message of a client's report.
type Report struct {
	Round   uint64
	Seq     uint16   // position of this message in the client's report
	Count   uint16   // M, the number of messages of the report
	Indices []uint32 // plaintext dimension indices (len = width)
	Sealed  []byte   // envelope.SealValues of the w values (aliases the input after ParseReport)
}

func (r *Report) check() error {
	w := len(r.Indices)
	switch {
	case r.Round < 1:
		return malformed(ErrValue, "report round must be >= 1")
	case r.Count < 1 || r.Seq >= r.Count:
		return malformed(ErrValue, "report seq %d, count %d: need seq < count", r.Seq, r.Count)
	case w < 1 || w > maxD:
		return malformed(ErrValue, "report width %d outside [1, %d]", w, maxD)
	case len(r.Sealed) != envelope.SealedLen(w):
		return malformed(ErrValue, "report sealed part has %d bytes, want %d for width %d", len(r.Sealed), envelope.SealedLen(w), w)
	}
	var hi uint32
	for _, x := range r.Indices {
		hi = max(hi, x)
	}
	if hi >= maxD {
		return malformed(ErrIndex, "index %d not below the protocol's maximum d = %d", hi, maxD)
	}
	return distinct(r.Indices, hi+1, nil)
}

// MarshalBinary encodes the report. It checks the shape (seq < count,
// sealed length for the width, distinct indices) but not the round's
// configuration; ParseReport does.
func (r *Report) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(nil)
}

// AppendBinary appends the encoded report to b (see MarshalBinary).
func (r *Report) AppendBinary(b []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return b, err
	}
	w := len(r.Indices)
	n := reportHeader + 4*w + len(r.Sealed)
	off := len(b)
	b = append(b, make([]byte, n)...)
	f := b[off:]
	putHeader(f, TypeReport)
	be.PutUint64(f[repRound:], r.Round)
	be.PutUint16(f[repSeq:], r.Seq)
	be.PutUint16(f[repCount:], r.Count)
	be.PutUint32(f[repWidth:], uint32(w))
	for i, x := range r.Indices {
		be.PutUint32(f[repIndices+4*i:], x)
	}
	copy(f[repIndices+4*w:], r.Sealed)
	return b, nil
}

// ParseReport decodes a Report frame and checks it against the round's
// configuration p: p valid, width = p.Width, count = p.Messages(),
// seq < count, exact length p.ReportFrameSize(), indices distinct and
// < p.Columns().
// The round is returned for the caller to compare with the open round.
// Sealed aliases b.
func ParseReport(b []byte, p Params) (*Report, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := header(b, TypeReport); err != nil {
		return nil, err
	}
	if len(b) < reportHeader {
		return nil, malformed(ErrTruncated, "report: %d bytes, need at least %d", len(b), reportHeader)
	}
	r := &Report{
		Round: be.Uint64(b[repRound:]),
		Seq:   be.Uint16(b[repSeq:]),
		Count: be.Uint16(b[repCount:]),
	}
	w := be.Uint32(b[repWidth:])
	switch {
	case r.Round < 1:
		return nil, malformed(ErrValue, "report round must be >= 1")
	case w != p.Width:
		return nil, malformed(ErrValue, "report width %d, round width %d", w, p.Width)
	case int(r.Count) != p.Messages():
		return nil, malformed(ErrValue, "report count %d, round has %d messages per client", r.Count, p.Messages())
	case r.Seq >= r.Count:
		return nil, malformed(ErrValue, "report seq %d not below count %d", r.Seq, r.Count)
	}
	if err := exactLen(b, uint64(p.ReportFrameSize()), "report"); err != nil {
		return nil, err
	}
	r.Indices = make([]uint32, w)
	for i := range r.Indices {
		r.Indices[i] = be.Uint32(b[repIndices+4*i:])
	}
	if err := distinct(r.Indices, p.Columns(), nil); err != nil {
		return nil, err
	}
	off := repIndices + 4*int(w)
	r.Sealed = b[off:len(b):len(b)]
	return r, nil
}

// smallWidth is the width up to which distinct compares pairs directly
// instead of using a bitset.
const smallWidth = 32

// distinct checks that every index is < d and that they are pairwise
// distinct. For wide messages it uses a bitset of d bits, taken from
// scratch when it is large enough (it must be all zero; it is left all
// zero on success).
func distinct(idx []uint32, d uint32, scratch []uint64) error {
	for i, x := range idx {
		if x >= d {
			return malformed(ErrIndex, "index %d (position %d) not below d = %d", x, i, d)
		}
	}
	if len(idx) <= smallWidth {
		for i := 1; i < len(idx); i++ {
			for j := 0; j < i; j++ {
				if idx[i] == idx[j] {
					return malformed(ErrIndex, "index %d repeated within a message", idx[i])
				}
			}
		}
		return nil
	}
	words := (int(d) + 63) / 64
	if len(scratch) < words {
		scratch = make([]uint64, words)
	}
	var err error
	for _, x := range idx {
		m := uint64(1) << (x % 64)
		if scratch[x/64]&m != 0 {
			err = malformed(ErrIndex, "index %d repeated within a message", x)
			break
		}
		scratch[x/64] |= m
	}
	for _, x := range idx {
		scratch[x/64] = 0
	}
	return err
}

// EncSize is the size of the HPKE encapsulated key that starts every
// sealed part (envelope.EncSize).
const EncSize = envelope.EncSize

// Enc returns the HPKE encapsulated key of the report's sealed part: a
// fresh X25519 public key drawn by every seal, so two honest reports
// never share it and a report seen twice is a replay. It is zero if
// Sealed is shorter than EncSize (never after ParseReport).
func (r *Report) Enc() (enc [EncSize]byte) {
	if len(r.Sealed) >= EncSize {
		copy(enc[:], r.Sealed)
	}
	return enc
}
