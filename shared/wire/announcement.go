package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Announcement layout (type 0x01):
//
//	off     size  field
//	0       1     version = 1
//	1       1     type = 0x01
//	2       8     round      u64 (>= 1)
//	10      8     deadline   i64 unix milliseconds
//	18      1     protocol   u8  (1 ss-simple, 2 ss-double, 3 ss-topk)
//	19      1     randomizer u8  (1 laplace, 2 rgb, 3 gaussian)
//	20      4     d          u32 (1 .. 1<<20)
//	24      4     k          u32
//	28      4     l          u32
//	32      4     width      u32
//	36      4     np         u32
//	40      4     buckets    u32
//	44      4     minBatch   u32
//	48      4     quota      u32
//	52      8     epsL       f64
//	60      8     deltaL     f64
//	68      8     clip       f64
//	76      8     checkInP   f64
//	84      32    hpkePub    X25519 public key of the aggregator
//	116     8*d   model      f64 x d (finite)
//	116+8d  64    signature  Ed25519 over bytes [0, 116+8d)
//
// Secure summation (protocol 4) reads the buckets slot as bits per entry
// and the epsL slot as sigma (Params.Bits, Params.Sigma), and inserts the
// relay's X25519 key (the helper's input shares are sealed to it, vouched
// for by the aggregator's signature) before the model:
//
//	84      32    hpkePub    X25519 public key of the aggregator (leader)
//	116     32    relayPub   X25519 public key of the relay (helper)
//	148     13*b  counts     b count blocks (Params.Counts), each
//	                         kind u8 | n u32 | sigma f64
//	148+13b 8*d   model      f64 x d (finite)
//	...     64    signature  Ed25519 over everything before it
//
// where b, the number of count blocks, is announced in the np slot (36),
// which secure summation does not otherwise use (0: no counts, and the
// layout is the one without blocks).
const (
	annRound     = 2
	annDeadline  = 10
	annParams    = 18
	annHPKEPub   = 84
	annModel     = 116
	annRelayPub  = 116 // secagg only
	annSignature = 64
)

// announcementSize returns the size of an Announcement frame of a shuffle
// protocol for dimension d: 116 + 8d + 64 (announcementSizeFor covers
// secure summation's 32 more bytes).
func announcementSize(d int) int { return annModel + 8*d + annSignature }

// announcementSizeFor returns the size of an Announcement frame for p.
func announcementSizeFor(p Params) int { return modelOffset(p) + 8*int(p.D) + annSignature }

// MaxAnnouncementSize bounds every announcement frame (d = maxD, secure
// summation's layout).
const MaxAnnouncementSize = annModel + 32 + countBlockSize*MaxCountBlocks + 8*maxD + annSignature

func modelOffset(p Params) int {
	if p.Protocol == ProtocolSecAgg {
		return annModel + 32 + countBlockSize*p.Counts.Len()
	}
	return annModel
}

// annCounts is the offset of the count blocks (secagg only).
const annCounts = annModel + 32

// ErrSignature: an announcement's signature or key does not match the
// pinned aggregator key.
var ErrSignature = errors.New("wire: announcement signature invalid")

// Announcement opens a round: the aggregator signs it and the relay forwards
// it unchanged to every client.
type Announcement struct {
	Round    uint64
	Deadline time.Time // encoded as unix milliseconds (sub-ms precision is dropped)
	Params   Params
	HPKEPub  [32]byte
	// RelayPub is the relay's X25519 key, for secure summation only (zero
	// otherwise): volunteers seal the helper's input share to it.
	RelayPub  [32]byte
	Model     []float64 // theta^{t-1}, len D, finite
	Signature [64]byte
}

// check validates the fields that must hold for encoding.
func (a *Announcement) check() error {
	if a.Round < 1 {
		return malformed(ErrValue, "announcement round must be >= 1")
	}
	if err := a.Params.Validate(); err != nil {
		return err
	}
	if uint64(len(a.Model)) != uint64(a.Params.D) {
		return malformed(ErrValue, "model has %d coordinates, d = %d", len(a.Model), a.Params.D)
	}
	if (a.Params.Protocol == ProtocolSecAgg) != (a.RelayPub != [32]byte{}) {
		return malformed(ErrValue, "relay key present %v for %v", a.RelayPub != [32]byte{}, a.Params.Protocol)
	}
	for i, v := range a.Model {
		if !check.Finite(v) {
			return malformed(ErrValue, "model coordinate %d is %v", i, v)
		}
	}
	return nil
}

// SignedBytes returns the encoded announcement without its signature:
// bytes [0, 116+8d) (secagg: [0, 148+8d)), the message the aggregator signs.
func (a *Announcement) SignedBytes() ([]byte, error) {
	b, err := a.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return b[:len(b)-annSignature], nil
}

// MarshalBinary encodes the announcement with its current Signature.
func (a *Announcement) MarshalBinary() ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("wire: encode announcement: %w", err)
	}
	b := make([]byte, announcementSizeFor(a.Params))
	putHeader(b, TypeAnnouncement)
	be.PutUint64(b[annRound:], a.Round)
	be.PutUint64(b[annDeadline:], uint64(a.Deadline.UnixMilli()))
	putParams(b[annParams:], a.Params)
	copy(b[annHPKEPub:], a.HPKEPub[:])
	if a.Params.Protocol == ProtocolSecAgg {
		copy(b[annRelayPub:], a.RelayPub[:])
		copy(b[annCounts:], a.Params.Counts.enc)
	}
	off := modelOffset(a.Params)
	for i, v := range a.Model {
		putF64(b[off+8*i:], v)
	}
	copy(b[len(b)-annSignature:], a.Signature[:])
	return b, nil
}

// Sign sets a.Signature to k's signature over SignedBytes. It does not set
// HPKEPub (the caller chooses the key values are sealed to, normally
// k.Public().HPKE).
func (a *Announcement) Sign(k envelope.Signer) error {
	msg, err := a.SignedBytes()
	if err != nil {
		return err
	}
	a.Signature = k.Sign(msg)
	return nil
}

// Verify checks that the announcement is signed by pub and that HPKEPub is
// pub's HPKE key (clients seal only to the pinned key). The error wraps
// ErrSignature. Announcements decoded by ParseAnnouncement re-encode to the
// exact received bytes, so verifying the decoded value verifies the frame.
func (a *Announcement) Verify(pub envelope.PublicKey) error {
	if a.HPKEPub != pub.HPKE {
		return fmt.Errorf("%w: announced hpke key differs from the pinned key %s", ErrSignature, pub.Fingerprint())
	}
	msg, err := a.SignedBytes()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if !envelope.Verify(pub, msg, a.Signature) {
		return fmt.Errorf("%w: not signed by %s", ErrSignature, pub.Fingerprint())
	}
	return nil
}

// ParseAnnouncement decodes and validates an Announcement frame: header,
// round >= 1, Params.Validate, d <= lim.MaxD (checked before anything is
// allocated), exact length announcementSizeFor(params), a relay key for
// secagg, finite model. It does not verify the
// signature (see Announcement.Verify).
func ParseAnnouncement(b []byte, lim Limits) (*Announcement, error) {
	lim, err := lim.resolve()
	if err != nil {
		return nil, err
	}
	if err := header(b, TypeAnnouncement); err != nil {
		return nil, err
	}
	if len(b) < annModel+annSignature {
		return nil, malformed(ErrTruncated, "announcement: %d bytes, need at least %d", len(b), annModel+annSignature)
	}
	params, blocks := getParams(b[annParams:])
	a := &Announcement{
		Round:    be.Uint64(b[annRound:]),
		Deadline: time.UnixMilli(int64(be.Uint64(b[annDeadline:]))),
		Params:   params,
	}
	if blocks > MaxCountBlocks {
		return nil, malformed(ErrParams, "announcement of %d count blocks, at most %d", blocks, MaxCountBlocks)
	}
	if blocks > 0 {
		if len(b) < annCounts+countBlockSize*int(blocks)+annSignature {
			return nil, malformed(ErrTruncated, "announcement: %d bytes for %d count blocks", len(b), blocks)
		}
		a.Params.Counts = CountList{enc: string(b[annCounts : annCounts+countBlockSize*int(blocks)])}
	}
	if a.Round < 1 {
		return nil, malformed(ErrValue, "announcement round must be >= 1")
	}
	if uint64(a.Params.D) > uint64(lim.MaxD) {
		return nil, malformed(ErrLimit, "announcement d = %d above limit %d", a.Params.D, lim.MaxD)
	}
	if err := a.Params.Validate(); err != nil {
		return nil, err
	}
	d := int(a.Params.D)
	if err := exactLen(b, uint64(announcementSizeFor(a.Params)), "announcement"); err != nil {
		return nil, err
	}
	copy(a.HPKEPub[:], b[annHPKEPub:])
	off := modelOffset(a.Params)
	if a.Params.Protocol == ProtocolSecAgg {
		copy(a.RelayPub[:], b[annRelayPub:])
		if a.RelayPub == [32]byte{} {
			return nil, malformed(ErrValue, "secagg announcement without the relay's key")
		}
	}
	a.Model = make([]float64, d)
	for i := range a.Model {
		v := getF64(b[off+8*i:])
		if !check.Finite(v) {
			return nil, malformed(ErrValue, "model coordinate %d is %v", i, v)
		}
		a.Model[i] = v
	}
	copy(a.Signature[:], b[off+8*d:])
	return a, nil
}
