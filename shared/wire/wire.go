// Package wire defines the byte layouts of Blanket's network protocol,
// version 1 (docs/protocol.md, "Byte layouts"): the frames exchanged between
// clients, the relay (shuffler) and the aggregator (analyzer).
//
// All integers are big-endian and fixed width; floats are IEEE-754 binary64
// bits, big-endian. There are no varints and no length that depends on the
// data: every variable part has a length fixed by the round's configuration
// (Params: D, Width, message count), and the decoders check it. Every frame
// starts with a 2-byte header, version (u8) = 1 and type (u8).
//
// Decoders are strict: they reject short input, trailing bytes, an unknown
// version or type, counts above their limits, any length that disagrees
// with the configuration checked against, non-finite floats where a float
// must be finite, out-of-range or duplicated indices within a message, and
// unknown status or reason codes. Every decoding error wraps ErrMalformed
// and, where it applies, one of the more specific sentinels (ErrVersion,
// ErrType, ErrTruncated, ErrTrailing, ErrLimit, ErrParams, ErrIndex).
//
// Decoded byte fields (Report.Sealed, BatchMessage.Sealed) alias the input
// buffer: do not modify the input while the result is in use.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Version is the protocol version carried in every frame's first byte.
const Version = 1

// HeaderSize is the size of the common frame header: version u8, type u8.
const HeaderSize = 2

// Type is a frame's type (second header byte).
type Type uint8

// Frame types.
const (
	TypeAnnouncement Type = 0x01 // aggregator -> relay -> clients
	TypeCheckIn      Type = 0x02 // client -> relay
	TypeReport       Type = 0x03 // client -> relay, one frame per message
	TypeBatch        Type = 0x04 // relay -> aggregator
	TypeBatchReply   Type = 0x05 // aggregator -> relay
	TypeAbort        Type = 0x06 // relay -> aggregator
	TypeAck          Type = 0x07 // relay -> client
	// Secure summation: TypeShares, TypeSecAggPrep and
	// TypeSecAggAggregate (0x08, 0x0A, 0x0B; 0x09 is retired) are in
	// secagg.go; the streaming frames TypeSecAggChunk, TypeSecAggClose and
	// TypeSecAggCharged, TypeSecAggResume (0x0C .. 0x0F) in
	// secaggstream.go.
)

// String returns the frame type's name.
func (t Type) String() string {
	switch t {
	case TypeAnnouncement:
		return "announcement"
	case TypeCheckIn:
		return "check-in"
	case TypeReport:
		return "report"
	case TypeBatch:
		return "batch"
	case TypeBatchReply:
		return "batch-reply"
	case TypeAbort:
		return "abort"
	case TypeAck:
		return "ack"
	case TypeShares:
		return "shares"
	case TypeSecAggPrep:
		return "secagg-prep"
	case TypeSecAggAggregate:
		return "secagg-aggregate"
	case TypeSecAggChunk:
		return "secagg-chunk"
	case TypeSecAggClose:
		return "secagg-close"
	case TypeSecAggCharged:
		return "secagg-charged"
	case TypeSecAggResume:
		return "secagg-resume"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is a known frame type (not a retired one).
func (t Type) Valid() bool {
	return t >= TypeAnnouncement && t <= TypeSecAggResume && t != typeRetired09
}

// Decoding errors. Every error of a decoder wraps ErrMalformed; the others
// refine it.
var (
	ErrMalformed = errors.New("wire: malformed frame")
	ErrVersion   = errors.New("wire: unsupported version")
	ErrType      = errors.New("wire: unexpected frame type")
	ErrTruncated = errors.New("wire: truncated frame")
	ErrTrailing  = errors.New("wire: trailing bytes")
	ErrLimit     = errors.New("wire: count above limit")
	ErrParams    = errors.New("wire: invalid round parameters")
	ErrIndex     = errors.New("wire: invalid index")
	ErrValue     = errors.New("wire: invalid field value")
)

// malformed returns an error wrapping ErrMalformed and kind, with detail.
func malformed(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrMalformed, kind, fmt.Sprintf(format, args...))
}

// PeekType checks a frame's header and returns its type, without decoding
// the rest.
func PeekType(b []byte) (Type, error) {
	if len(b) < HeaderSize {
		return 0, malformed(ErrTruncated, "%d bytes, need a %d-byte header", len(b), HeaderSize)
	}
	if b[0] != Version {
		return 0, malformed(ErrVersion, "version %d, want %d", b[0], Version)
	}
	t := Type(b[1])
	if !t.Valid() {
		return 0, malformed(ErrType, "unknown frame type %d", b[1])
	}
	return t, nil
}

// header checks that b starts with the header of a frame of type t.
func header(b []byte, t Type) error {
	got, err := PeekType(b)
	if err != nil {
		return err
	}
	if got != t {
		return malformed(ErrType, "got %v, want %v", got, t)
	}
	return nil
}

// exactLen checks len(b) == want (want may exceed int on 32-bit platforms).
func exactLen(b []byte, want uint64, what string) error {
	switch {
	case uint64(len(b)) < want:
		return malformed(ErrTruncated, "%s: %d bytes, want %d", what, len(b), want)
	case uint64(len(b)) > want:
		return malformed(ErrTrailing, "%s: %d bytes, want %d", what, len(b), want)
	}
	return nil
}

func putHeader(b []byte, t Type) {
	b[0] = Version
	b[1] = byte(t)
}

var be = binary.BigEndian

func getF64(b []byte) float64    { return math.Float64frombits(binary.BigEndian.Uint64(b)) }
func putF64(b []byte, f float64) { binary.BigEndian.PutUint64(b, math.Float64bits(f)) }

// Limits bound what a decoder accepts beyond the round's configuration.
// The zero value of a field means its default (DefaultLimits).
type Limits struct {
	// maxD is the largest model dimension accepted (default and hard
	// maximum 1<<20, the protocol's bound).
	MaxD int
}

// maxD is the protocol's bound on the model dimension d.
const maxD = 1 << 20

// DefaultLimits returns the protocol's limits: maxD = 1<<20.
func DefaultLimits() Limits { return Limits{MaxD: maxD} }

// resolve fills defaults and validates the limits.
func (l Limits) resolve() (Limits, error) {
	if l.MaxD == 0 {
		l.MaxD = maxD
	}
	if l.MaxD < 0 || l.MaxD > maxD {
		return l, fmt.Errorf("wire: limits: MaxD %d outside [1, %d]", l.MaxD, maxD)
	}
	return l, nil
}

// roundOffset is where every frame type carries its round number: u64
// big-endian right after the header (docs/protocol.md, "Byte layouts").
const roundOffset = HeaderSize

// PeekRound checks a frame's header and returns its type and the round
// field, which every frame type carries at the same offset, without
// decoding the rest. It errs (wrapping ErrMalformed) on a bad header or
// fewer than 10 bytes; the round it returns is not range-checked (the
// relay answers a malformed frame with the round it claims, which may be
// 0), so a caller that needs a valid frame must still parse it.
func PeekRound(b []byte) (Type, uint64, error) {
	t, err := PeekType(b)
	if err != nil {
		return 0, 0, err
	}
	if len(b) < roundOffset+8 {
		return t, 0, malformed(ErrTruncated, "%d bytes, need %d for the round", len(b), roundOffset+8)
	}
	return t, be.Uint64(b[roundOffset:]), nil
}
