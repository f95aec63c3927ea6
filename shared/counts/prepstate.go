package counts

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/pine"
)

// PrepSize is the length of an encoded Prep of s (Prep.MarshalBinary).
func (s *Spec) PrepSize() int {
	n := 2
	for _, b := range s.blocks {
		n += b.p.PrepStateSize() + b.p.PrepShareSize()
	}
	return n
}

// MarshalBinary encodes one server's Prep (the state between PrepInit and
// PrepNext, and the prep shares) so that PrepNext can run elsewhere
// (Spec.ParsePrep):
//
//	blocks (2, big-endian) | per block: PINE prep state
//	(pine.PrepState.MarshalBinary: Dim_i x Field64 | 2 seeds of 32) |
//	PINE prep share (pine.Pine.PrepShareSize of the block)
//
// The states hold this server's un-noised shares of one volunteer's
// counts: the bytes must stay with the server that ran PrepInit (stored
// only where its input-share key is). A Prep with no blocks, a missing or
// already used block state, or a prep share missing does not encode.
func (p Prep) MarshalBinary() ([]byte, error) {
	if len(p.st) == 0 || len(p.st) > MaxBlocks {
		return nil, fmt.Errorf("counts: prep of %d blocks", len(p.st))
	}
	if len(p.Share) != len(p.st) {
		return nil, fmt.Errorf("counts: prep of %d blocks with %d prep shares", len(p.st), len(p.Share))
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(len(p.st)))
	for i, st := range p.st {
		enc, err := st.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("counts: block %d: %w", i, err)
		}
		if len(p.Share[i]) == 0 {
			return nil, fmt.Errorf("counts: block %d: no prep share", i)
		}
		b = append(append(b, enc...), p.Share[i]...)
	}
	return b, nil
}

// ParsePrep strictly decodes a Prep of s (Prep.MarshalBinary): the block
// count must be s's, and each block's state and prep share exactly that
// block's PINE sizes (pine.Pine.ParsePrepState: canonical field elements);
// trailing bytes are refused. The result does not alias b.
func (s *Spec) ParsePrep(b []byte) (Prep, error) {
	if len(b) < 2 {
		return Prep{}, errors.New("counts: prep shorter than its block count")
	}
	if n := int(binary.BigEndian.Uint16(b)); n != len(s.blocks) {
		return Prep{}, fmt.Errorf("counts: prep of %d blocks, the spec has %d", n, len(s.blocks))
	}
	if len(b) != s.PrepSize() {
		return Prep{}, fmt.Errorf("counts: prep of %d bytes, want %d", len(b), s.PrepSize())
	}
	p := Prep{st: make([]*pine.PrepState, len(s.blocks)), Share: make([][]byte, len(s.blocks))}
	off := 2
	for i, blk := range s.blocks {
		m := blk.p.PrepStateSize()
		st, err := blk.p.ParsePrepState(b[off : off+m])
		if err != nil {
			return Prep{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		off += m
		m = blk.p.PrepShareSize()
		p.st[i], p.Share[i] = st, append([]byte(nil), b[off:off+m]...)
		off += m
	}
	return p, nil
}
