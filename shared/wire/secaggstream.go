package wire

// Streaming secure summation (docs/secagg.md, "Streaming"): the relay
// forwards the round's reports in chunks as they arrive, the aggregator
// prepares each chunk on arrival and answers its verdicts (a SecAggPrep
// frame with the chunk's 'M' message), and at the close one SecAggClose
// asks the aggregator to charge the round, answered by SecAggCharged.
// The helper's noised aggregate share follows in a SecAggAggregate frame.
//
// SecAggChunk (type 0x0C), relay -> aggregator, POST /v1/secagg/chunk:
//
//	0       2     header (type 0x0C)
//	2       8     round      u64 (>= 1)
//	10      4     seq        u32 (1, 2, ...: the chunk's place in the round)
//	14      4     reports    u32 (reports in the chunk, 1 .. quota)
//	18      4     shareLen   u32 (sealed leader share size)
//	22      R*S   leader shares, in the helper's order
//	..      4     prepLen    u32
//	..      P     the helper's prepare shares for these reports ('P')
//
// SecAggClose (type 0x0D), relay -> aggregator, POST /v1/secagg/close,
// 30 bytes:
//
//	0       2     header (type 0x0D)
//	2       8     round
//	10      4     chunks     u32 (chunks sent, the last one's seq)
//	14      4     reports    u32 (reports in them)
//	18      4     accepted   u32 (reports in the helper's aggregate)
//	22      4     checkedIn  u32
//	26      4     population u32
//
// SecAggCharged (type 0x0E), aggregator -> relay, the answer to a close,
// 15 bytes:
//
//	0       2     header (type 0x0E)
//	2       8     round
//	10      1     status     u8 (BatchStatus: ok, refused, invalid)
//	11      4     accepted   u32 (reports charged; 0 unless ok)
//
// SecAggResume (type 0x0F), relay -> aggregator, POST /v1/secagg/resume,
// 14 bytes: a relay that lost the round's pipeline (its owner was killed
// mid-round, docs/secagg.md "Crash safety") asks for the verdicts of a
// chunk it persisted before posting it:
//
//	0       2     header (type 0x0F)
//	2       8     round
//	10      4     seq        u32 (the chunk, 1, 2, ...)
//
// The answer is a SecAggPrep frame: status ok with the chunk's 'M'
// message exactly as first answered, if the aggregator folded that chunk;
// status invalid if it did not, after which it folds no chunk of the
// round from seq on (the relay closes the round with the chunks before).
const (
	TypeSecAggChunk   Type = 0x0C
	TypeSecAggClose   Type = 0x0D
	TypeSecAggCharged Type = 0x0E
	TypeSecAggResume  Type = 0x0F
)

// SecAggResumeSize is SecAggResume's fixed size.
const SecAggResumeSize = 14

// SecAggResume asks for the verdicts of chunk Seq of a round again.
type SecAggResume struct {
	Round uint64
	Seq   uint32
}

// MarshalBinary encodes the frame.
func (s *SecAggResume) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || s.Seq < 1 {
		return nil, malformed(ErrValue, "secagg resume: round %d, seq %d", s.Round, s.Seq)
	}
	b := make([]byte, SecAggResumeSize)
	putHeader(b, TypeSecAggResume)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], s.Seq)
	return b, nil
}

// ParseSecAggResume decodes a SecAggResume frame.
func ParseSecAggResume(b []byte) (*SecAggResume, error) {
	if err := header(b, TypeSecAggResume); err != nil {
		return nil, err
	}
	if err := exactLen(b, SecAggResumeSize, "secagg resume"); err != nil {
		return nil, err
	}
	s := &SecAggResume{Round: be.Uint64(b[2:]), Seq: be.Uint32(b[10:])}
	if s.Round < 1 || s.Seq < 1 {
		return nil, malformed(ErrValue, "secagg resume: round %d, seq %d", s.Round, s.Seq)
	}
	return s, nil
}

// SecAggCloseSize and SecAggChargedSize are the fixed frame sizes.
const (
	SecAggCloseSize   = 30
	SecAggChargedSize = 15
)

// SecAggChunk is a run of reports the relay forwards as they arrive.
type SecAggChunk struct {
	Round  uint64
	Seq    uint32
	Leader [][]byte // sealed leader shares, one per report (alias the input)
	Prep   []byte   // the helper's 'P' message for them (aliases the input)
}

// MarshalBinary encodes the frame; every leader share must have the same
// length.
func (s *SecAggChunk) MarshalBinary() ([]byte, error) {
	n := len(s.Leader)
	if s.Round < 1 || s.Seq < 1 || n < 1 || len(s.Prep) > MaxSecAggPayload {
		return nil, malformed(ErrValue, "secagg chunk: round %d, seq %d, %d shares", s.Round, s.Seq, n)
	}
	sl := len(s.Leader[0])
	if sl < 1 || uint64(sl)*uint64(n) > MaxSecAggPayload {
		return nil, malformed(ErrLimit, "secagg chunk: %d shares of %d bytes", n, sl)
	}
	b := make([]byte, 22+n*sl+4+len(s.Prep))
	putHeader(b, TypeSecAggChunk)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], s.Seq)
	be.PutUint32(b[14:], uint32(n))
	be.PutUint32(b[18:], uint32(sl))
	off := 22
	for i, l := range s.Leader {
		if len(l) != sl {
			return nil, malformed(ErrValue, "secagg chunk: share %d has %d bytes, want %d", i, len(l), sl)
		}
		off += copy(b[off:], l)
	}
	be.PutUint32(b[off:], uint32(len(s.Prep)))
	copy(b[off+4:], s.Prep)
	return b, nil
}

// ParseSecAggChunk decodes a SecAggChunk frame whose leader shares must
// have shareLen bytes each and whose report count must lie in
// [1, maxReports].
func ParseSecAggChunk(b []byte, shareLen, maxReports int) (*SecAggChunk, error) {
	if err := header(b, TypeSecAggChunk); err != nil {
		return nil, err
	}
	if len(b) < 26 {
		return nil, malformed(ErrTruncated, "secagg chunk: %d bytes", len(b))
	}
	s := &SecAggChunk{Round: be.Uint64(b[2:]), Seq: be.Uint32(b[10:])}
	n := be.Uint32(b[14:])
	if s.Round < 1 || s.Seq < 1 {
		return nil, malformed(ErrValue, "secagg chunk: round %d, seq %d", s.Round, s.Seq)
	}
	if n < 1 || int64(n) > int64(maxReports) {
		return nil, malformed(ErrLimit, "secagg chunk of %d reports, want 1 .. %d", n, maxReports)
	}
	if got := be.Uint32(b[18:]); int64(got) != int64(shareLen) || shareLen < 1 {
		return nil, malformed(ErrValue, "secagg chunk shares of %d bytes, the round's are %d", got, shareLen)
	}
	end := 22 + uint64(n)*uint64(shareLen)
	if end+4 > uint64(len(b)) {
		return nil, malformed(ErrTruncated, "secagg chunk: %d bytes, need %d for %d shares", len(b), end+4, n)
	}
	s.Leader = make([][]byte, n)
	for i := range s.Leader {
		off := 22 + i*shareLen
		s.Leader[i] = b[off : off+shareLen : off+shareLen]
	}
	if err := exactLen(b, end+4+uint64(be.Uint32(b[end:])), "secagg chunk"); err != nil {
		return nil, err
	}
	s.Prep = b[end+4:]
	return s, nil
}

// SecAggClose ends the relay's forwarding of a round and asks for its
// charge.
type SecAggClose struct {
	Round                                            uint64
	Chunks, Reports, Accepted, CheckedIn, Population uint32
}

// MarshalBinary encodes the frame.
func (s *SecAggClose) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || s.Accepted > s.Reports || (s.Chunks == 0) != (s.Reports == 0) || s.Chunks > s.Reports {
		return nil, malformed(ErrValue, "secagg close: round %d, %d chunks, %d reports, %d accepted", s.Round, s.Chunks, s.Reports, s.Accepted)
	}
	b := make([]byte, SecAggCloseSize)
	putHeader(b, TypeSecAggClose)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], s.Chunks)
	be.PutUint32(b[14:], s.Reports)
	be.PutUint32(b[18:], s.Accepted)
	be.PutUint32(b[22:], s.CheckedIn)
	be.PutUint32(b[26:], s.Population)
	return b, nil
}

// ParseSecAggClose decodes a SecAggClose frame.
func ParseSecAggClose(b []byte) (*SecAggClose, error) {
	if err := header(b, TypeSecAggClose); err != nil {
		return nil, err
	}
	if err := exactLen(b, SecAggCloseSize, "secagg close"); err != nil {
		return nil, err
	}
	s := &SecAggClose{Round: be.Uint64(b[2:]), Chunks: be.Uint32(b[10:]), Reports: be.Uint32(b[14:]),
		Accepted: be.Uint32(b[18:]), CheckedIn: be.Uint32(b[22:]), Population: be.Uint32(b[26:])}
	if s.Round < 1 || s.Accepted > s.Reports || (s.Chunks == 0) != (s.Reports == 0) || s.Chunks > s.Reports {
		return nil, malformed(ErrValue, "secagg close: round %d, %d chunks, %d reports, %d accepted", s.Round, s.Chunks, s.Reports, s.Accepted)
	}
	return s, nil
}

// SecAggCharged is the aggregator's answer to a SecAggClose.
type SecAggCharged struct {
	Round    uint64
	Status   uint8  // BatchStatusOK, BatchStatusRefused or BatchStatusInvalid
	Accepted uint32 // reports charged (ok only)
}

// MarshalBinary encodes the frame.
func (s *SecAggCharged) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || !validSecAggStatus(s.Status) || (s.Status == BatchStatusOK) != (s.Accepted > 0) {
		return nil, malformed(ErrValue, "secagg charged: round %d, status %d, %d accepted", s.Round, s.Status, s.Accepted)
	}
	b := make([]byte, SecAggChargedSize)
	putHeader(b, TypeSecAggCharged)
	be.PutUint64(b[2:], s.Round)
	b[10] = s.Status
	be.PutUint32(b[11:], s.Accepted)
	return b, nil
}

// ParseSecAggCharged decodes a SecAggCharged frame.
func ParseSecAggCharged(b []byte) (*SecAggCharged, error) {
	if err := header(b, TypeSecAggCharged); err != nil {
		return nil, err
	}
	if err := exactLen(b, SecAggChargedSize, "secagg charged"); err != nil {
		return nil, err
	}
	s := &SecAggCharged{Round: be.Uint64(b[2:]), Status: b[10], Accepted: be.Uint32(b[11:])}
	if s.Round < 1 || !validSecAggStatus(s.Status) || (s.Status == BatchStatusOK) != (s.Accepted > 0) {
		return nil, malformed(ErrValue, "secagg charged: round %d, status %d, %d accepted", s.Round, s.Status, s.Accepted)
	}
	return s, nil
}
