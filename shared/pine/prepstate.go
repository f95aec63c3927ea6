package pine

import (
	"errors"
	"fmt"
)

// PrepStateSize is the length of an encoded PrepState of p
// (PrepState.MarshalBinary): Dimension Field64 elements and two seeds.
func (p *Pine) PrepStateSize() int { return elemSize*p.cfg.Dimension + 2*seedSize }

// MarshalBinary encodes the state between PrepInit and PrepNext so that
// PrepNext can run elsewhere (ParsePrepState):
//
//	out: Dimension x Field64 (encode_vec, 8 bytes little-endian each) |
//	wraparound joint randomness seed (32) | joint randomness seed (32)
//
// out is this aggregator's share of the report's gradient, un-noised: the
// bytes are as secret as the input share PrepInit read, and must stay with
// the aggregator that holds it (never sent to the other aggregator, the
// client or anyone else). A state already used by PrepNext, or empty, does
// not encode.
func (st *PrepState) MarshalBinary() ([]byte, error) {
	if st == nil || st.out == nil {
		return nil, errors.New("pine: prep state already used or empty")
	}
	b := make([]byte, 0, elemSize*len(st.out)+2*seedSize)
	b = appendVec(b, st.out)
	b = append(b, st.wrSeed[:]...)
	return append(b, st.vfSeed[:]...), nil
}

// ParsePrepState strictly decodes a PrepState of p (PrepState.MarshalBinary):
// exactly PrepStateSize bytes (the out vector has p's Dimension, as PrepInit
// makes it), every field element canonical (below the modulus). The
// returned state does not alias b.
func (p *Pine) ParsePrepState(b []byte) (*PrepState, error) {
	if len(b) != p.PrepStateSize() {
		return nil, fmt.Errorf("pine: prep state of %d bytes, want %d", len(b), p.PrepStateSize())
	}
	st := &PrepState{out: make([]fp, p.cfg.Dimension)}
	n := elemSize * p.cfg.Dimension
	if err := decodeVec(st.out, b[:n]); err != nil {
		return nil, fmt.Errorf("pine: prep state: %w", err)
	}
	copy(st.wrSeed[:], b[n:n+seedSize])
	copy(st.vfSeed[:], b[n+seedSize:])
	return st, nil
}
