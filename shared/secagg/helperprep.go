package secagg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// A helper's Prep, state included, as bytes: PrepInit can run on one
// replica of the relay and Next on another (the report's owner), which
// restores the Prep exactly.
const (
	// kindHelperState is the kind byte of an encoded helper Prep.
	kindHelperState byte = 'S'
	// helperPrepFormat is the layout version after the header.
	helperPrepFormat byte = 1
	// maxPrepErrText bounds the error text of a rejected Prep (longer
	// texts are cut, on a UTF-8 boundary, when encoding).
	maxPrepErrText = 1024
)

// MarshalHelperPrep encodes a Prep of this round's helper engine
// (PineEngine.PrepInit with leader = false), before Next, so that another
// replica of the relay can finish it (ParseHelperPrep, then Next and
// Aggregate.Fold). Layout (integers big-endian):
//
//	version (1) = 1 | kind (1) = 'S' | round (8) | format (1) = 1 |
//	nonce (16) | reason (1) |
//	  reason = Accepted:  prep share (the 'P' entry payload, exactly the
//	                      round's 'P' payload length) |
//	                      PINE prep state (pine.PrepState.MarshalBinary:
//	                      Dim x Field64 | 2 seeds of 32) |
//	                      count blocks' Prep (counts.Prep.MarshalBinary,
//	                      iff the round has count blocks)
//	  otherwise:          error text length (2) in [1, 1024] | error text
//
// Secrecy: the PINE prep state holds the helper's output share, an
// un-noised share of one report's gradient (and the count blocks' states
// the helper's shares of its counts); with the aggregator's share it
// gives the volunteer's update in the clear. The bytes must stay within
// the relay's party: stored only where the helper key (the key that opens
// helper shares) is, never sent to the aggregator, a client or anyone
// else.
//
// An accepted Prep must carry its state (unused: not yet through Next)
// and no Err; a rejected one carries no payload, and its Err's text (its
// Reason's name if Err is nil) is kept, cut to 1024 bytes.
func (r *Round) MarshalHelperPrep(p Prep) ([]byte, error) {
	if p.Reason >= numReasons {
		return nil, fmt.Errorf("secagg: prep with unknown reason %d", p.Reason)
	}
	b := r.header(kindHelperState)
	b = append(b, helperPrepFormat)
	b = append(b, p.Nonce[:]...)
	b = append(b, byte(p.Reason))
	if p.Reason != Accepted {
		if len(p.Payload) != 0 {
			return nil, fmt.Errorf("secagg: rejected prep (%v) with a payload", p.Reason)
		}
		text := "secagg: rejected (" + p.Reason.String() + ")"
		if p.Err != nil && p.Err.Error() != "" {
			text = p.Err.Error()
		}
		text = cutText(text, maxPrepErrText)
		b = binary.BigEndian.AppendUint16(b, uint16(len(text)))
		return append(b, text...), nil
	}
	if p.Err != nil {
		return nil, fmt.Errorf("secagg: accepted prep with an error: %w", p.Err)
	}
	if len(p.Payload) != r.prepShareLen {
		return nil, fmt.Errorf("secagg: prep share of %d bytes, want %d", len(p.Payload), r.prepShareLen)
	}
	st, ok := p.state.(pineState)
	if !ok || st.st == nil {
		return nil, errors.New("secagg: accepted prep without a prep state")
	}
	enc, err := st.st.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("secagg: prep state: %w", err)
	}
	if len(enc) != r.pn.PrepStateSize() {
		return nil, fmt.Errorf("secagg: prep state of %d bytes, the round's is %d", len(enc), r.pn.PrepStateSize())
	}
	b = append(b, p.Payload...)
	b = append(b, enc...)
	if r.cl == nil {
		if st.cs.Share != nil {
			return nil, errors.New("secagg: prep with count blocks in a round without them")
		}
		return b, nil
	}
	cenc, err := st.cs.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("secagg: count blocks' prep state: %w", err)
	}
	if len(cenc) != r.cl.spec.PrepSize() {
		return nil, fmt.Errorf("secagg: count blocks' prep state of %d bytes, the round's is %d", len(cenc), r.cl.spec.PrepSize())
	}
	if !bytes.Equal(concat(st.cs.Share), p.Payload[r.pn.PrepShareSize():]) {
		return nil, errors.New("secagg: count blocks' prep shares differ from the payload's")
	}
	return append(b, cenc...), nil
}

// cutText returns s cut to at most n bytes, on a UTF-8 boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ParseHelperPrep strictly decodes a helper Prep of this round
// (MarshalHelperPrep): the header, format and round must match, the reason
// be known, an accepted Prep's prep share, PINE state (canonical field
// elements, the round's dimension) and count blocks' state exactly the
// round's sizes (the blocks' prep shares equal to the payload's), a
// rejected one's error text of 1 to 1024 bytes; trailing bytes are
// refused. A rejected Prep keeps its Reason and gets a non-nil Err with
// the encoded text. The result does not alias b. The bytes hold the
// helper's un-noised share of one report's gradient: see
// MarshalHelperPrep for where they may be kept. Errors wrap ErrMalformed.
func (r *Round) ParseHelperPrep(b []byte) (Prep, error) {
	if _, err := r.checkHeader(b, kindHelperState); err != nil {
		return Prep{}, err
	}
	const fixed = headerLen + 1 + nonceSize + 1
	if len(b) < fixed {
		return Prep{}, fmt.Errorf("secagg: helper prep of %d bytes, shorter than %d: %w", len(b), fixed, ErrMalformed)
	}
	if f := b[headerLen]; f != helperPrepFormat {
		return Prep{}, fmt.Errorf("secagg: helper prep format %d, want %d: %w", f, helperPrepFormat, ErrMalformed)
	}
	var p Prep
	copy(p.Nonce[:], b[headerLen+1:])
	p.Reason = Reason(b[fixed-1])
	rest := b[fixed:]
	if p.Reason >= numReasons {
		return Prep{}, fmt.Errorf("secagg: helper prep with unknown reason %d: %w", p.Reason, ErrMalformed)
	}
	if p.Reason != Accepted {
		if len(rest) < 2 {
			return Prep{}, fmt.Errorf("secagg: rejected helper prep without its error text: %w", ErrMalformed)
		}
		n := int(binary.BigEndian.Uint16(rest))
		if n == 0 || n > maxPrepErrText {
			return Prep{}, fmt.Errorf("secagg: helper prep error text of %d bytes outside [1, %d]: %w", n, maxPrepErrText, ErrMalformed)
		}
		if len(rest) != 2+n {
			return Prep{}, fmt.Errorf("secagg: rejected helper prep of %d bytes, want %d: %w", len(b), fixed+2+n, ErrMalformed)
		}
		p.Err = errors.New(string(rest[2:]))
		return p, nil
	}
	ns := r.pn.PrepStateSize()
	want := r.prepShareLen + ns
	if r.cl != nil {
		want += r.cl.spec.PrepSize()
	}
	if len(rest) != want {
		return Prep{}, fmt.Errorf("secagg: accepted helper prep of %d bytes, want %d: %w", len(b), fixed+want, ErrMalformed)
	}
	p.Payload = append([]byte(nil), rest[:r.prepShareLen]...)
	rest = rest[r.prepShareLen:]
	st, err := r.pn.ParsePrepState(rest[:ns])
	if err != nil {
		return Prep{}, fmt.Errorf("secagg: helper prep: %w: %w", ErrMalformed, err)
	}
	state := pineState{st: st}
	if r.cl != nil {
		cs, err := r.cl.spec.ParsePrep(rest[ns:])
		if err != nil {
			return Prep{}, fmt.Errorf("secagg: helper prep: %w: %w", ErrMalformed, err)
		}
		if !bytes.Equal(concat(cs.Share), p.Payload[r.pn.PrepShareSize():]) {
			return Prep{}, fmt.Errorf("secagg: helper prep: count blocks' prep shares differ from the payload's: %w", ErrMalformed)
		}
		state.cs = cs
	}
	p.state = state
	return p, nil
}
