package wire

// Secure summation frames (protocol 4). Sizes of shares are fixed by the
// round's configuration (shared/roundspec derives them from the announced
// Params); the decoders take them as arguments and refuse anything else.
//
// Shares (type 0x08), volunteer -> relay, one per volunteer and round:
//
//	off     size  field
//	0       2     header (version, type 0x08)
//	2       8     round      u64 (>= 1)
//	10      4     leaderLen  u32 (must equal the round's sealed leader share size)
//	14      4     helperLen  u32 (must equal the round's sealed helper share size)
//	18      L     leader     the leader's input share sealed to the aggregator
//	18+L    H     helper     the helper's input share sealed to the relay
//
// Type 0x09 is retired: it was SecAggBatch, a whole round's reports in
// one frame, which the streaming frames (secaggstream.go) replaced. It is
// not a valid type and is never reused.
//
// SecAggPrep (type 0x0A), aggregator -> relay, the answer to a chunk
// (SecAggChunk, secaggstream.go):
//
//	0       2     header (type 0x0A)
//	2       8     round
//	10      1     status     u8 (BatchStatus: ok, refused, invalid)
//	11      4     msgLen     u32 (0 unless ok)
//	15      M     the leader's prepare messages (secagg 'M' message)
//
// SecAggAggregate (type 0x0B), relay -> aggregator:
//
//	0       2     header (type 0x0B)
//	2       8     round
//	10      4     len        u32
//	14      A     the helper's noised aggregate share (secagg 'A' message)
const (
	TypeShares          Type = 0x08
	typeRetired09       Type = 0x09 // was SecAggBatch
	TypeSecAggPrep      Type = 0x0A
	TypeSecAggAggregate Type = 0x0B
)

// MaxSecAggPayload bounds any length field of a secure-summation frame
// (1 GiB): a decoder never trusts a length before checking it against the
// frame it holds.
const MaxSecAggPayload = 1 << 30

// Shares is one volunteer's report in secure summation.
type Shares struct {
	Round  uint64
	Leader []byte // sealed to the aggregator (aliases the input after ParseShares)
	Helper []byte // sealed to the relay (aliases the input after ParseShares)
}

// SharesSize is the size of a Shares frame with sealed shares of the given
// sizes.
func SharesSize(leaderLen, helperLen int) int { return 18 + leaderLen + helperLen }

// MarshalBinary encodes the frame.
func (s *Shares) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || len(s.Leader) == 0 || len(s.Helper) == 0 || len(s.Leader) > MaxSecAggPayload || len(s.Helper) > MaxSecAggPayload {
		return nil, malformed(ErrValue, "shares: round %d, %d and %d bytes", s.Round, len(s.Leader), len(s.Helper))
	}
	b := make([]byte, SharesSize(len(s.Leader), len(s.Helper)))
	putHeader(b, TypeShares)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], uint32(len(s.Leader)))
	be.PutUint32(b[14:], uint32(len(s.Helper)))
	copy(b[18:], s.Leader)
	copy(b[18+len(s.Leader):], s.Helper)
	return b, nil
}

// ParseShares decodes a Shares frame whose sealed shares must have exactly
// leaderLen and helperLen bytes.
func ParseShares(b []byte, leaderLen, helperLen int) (*Shares, error) {
	if err := header(b, TypeShares); err != nil {
		return nil, err
	}
	if err := exactLen(b, uint64(SharesSize(leaderLen, helperLen)), "shares"); err != nil {
		return nil, err
	}
	s := &Shares{Round: be.Uint64(b[2:])}
	if s.Round < 1 {
		return nil, malformed(ErrValue, "shares round must be >= 1")
	}
	if l, h := be.Uint32(b[10:]), be.Uint32(b[14:]); int64(l) != int64(leaderLen) || int64(h) != int64(helperLen) {
		return nil, malformed(ErrValue, "shares of %d and %d bytes, the round's are %d and %d", l, h, leaderLen, helperLen)
	}
	s.Leader = b[18 : 18+leaderLen]
	s.Helper = b[18+leaderLen:]
	return s, nil
}

// SecAggPrep is the aggregator's answer to a SecAggChunk: its reports'
// verdicts (secagg 'M' message).
type SecAggPrep struct {
	Round  uint64
	Status uint8  // BatchStatusOK, BatchStatusRefused or BatchStatusInvalid
	Msg    []byte // the leader's verdicts (ok only)
}

// MarshalBinary encodes the frame.
func (s *SecAggPrep) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || (s.Status == BatchStatusOK) != (len(s.Msg) > 0) || len(s.Msg) > MaxSecAggPayload || !validSecAggStatus(s.Status) {
		return nil, malformed(ErrValue, "secagg prep: round %d, status %d, %d bytes", s.Round, s.Status, len(s.Msg))
	}
	b := make([]byte, 15+len(s.Msg))
	putHeader(b, TypeSecAggPrep)
	be.PutUint64(b[2:], s.Round)
	b[10] = s.Status
	be.PutUint32(b[11:], uint32(len(s.Msg)))
	copy(b[15:], s.Msg)
	return b, nil
}

func validSecAggStatus(s uint8) bool {
	return s == BatchStatusOK || s == BatchStatusRefused || s == BatchStatusInvalid
}

// ParseSecAggPrep decodes a SecAggPrep frame.
func ParseSecAggPrep(b []byte) (*SecAggPrep, error) {
	if err := header(b, TypeSecAggPrep); err != nil {
		return nil, err
	}
	if len(b) < 15 {
		return nil, malformed(ErrTruncated, "secagg prep: %d bytes", len(b))
	}
	s := &SecAggPrep{Round: be.Uint64(b[2:]), Status: b[10]}
	if s.Round < 1 || !validSecAggStatus(s.Status) {
		return nil, malformed(ErrValue, "secagg prep: round %d, status %d", s.Round, s.Status)
	}
	if err := exactLen(b, 15+uint64(be.Uint32(b[11:])), "secagg prep"); err != nil {
		return nil, err
	}
	s.Msg = b[15:]
	if (s.Status == BatchStatusOK) != (len(s.Msg) > 0) {
		return nil, malformed(ErrValue, "secagg prep: status %d with %d message bytes", s.Status, len(s.Msg))
	}
	return s, nil
}

// SecAggAggregate carries the helper's noised aggregate share.
type SecAggAggregate struct {
	Round uint64
	Share []byte
}

// MarshalBinary encodes the frame.
func (s *SecAggAggregate) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || len(s.Share) < 1 || len(s.Share) > MaxSecAggPayload {
		return nil, malformed(ErrValue, "secagg aggregate: round %d, %d bytes", s.Round, len(s.Share))
	}
	b := make([]byte, 14+len(s.Share))
	putHeader(b, TypeSecAggAggregate)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], uint32(len(s.Share)))
	copy(b[14:], s.Share)
	return b, nil
}

// ParseSecAggAggregate decodes a SecAggAggregate frame.
func ParseSecAggAggregate(b []byte) (*SecAggAggregate, error) {
	if err := header(b, TypeSecAggAggregate); err != nil {
		return nil, err
	}
	if len(b) < 15 {
		return nil, malformed(ErrTruncated, "secagg aggregate: %d bytes", len(b))
	}
	s := &SecAggAggregate{Round: be.Uint64(b[2:])}
	if s.Round < 1 {
		return nil, malformed(ErrValue, "secagg aggregate round must be >= 1")
	}
	if err := exactLen(b, 14+uint64(be.Uint32(b[10:])), "secagg aggregate"); err != nil {
		return nil, err
	}
	s.Share = b[14:]
	return s, nil
}
