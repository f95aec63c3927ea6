package wire

// Fixed-size frames. Layouts (offset size field):
//
// CheckIn (0x02), 10 bytes:
//
//	0 1 version, 1 1 type = 0x02, 2 8 round u64 (>= 1)
//
// BatchReply (0x05), 23 bytes:
//
//	0 1 version, 1 1 type = 0x05, 2 8 round u64 (>= 1),
//	10 4 accepted u32, 14 4 rejectedOpen u32, 18 4 rejectedValue u32,
//	22 1 status u8 (BatchStatus*)
//
// Abort (0x06), 23 bytes:
//
//	0 1 version, 1 1 type = 0x06, 2 8 round u64 (>= 1), 10 1 reason u8
//	(AbortReason*), 11 4 reports u32, 15 4 checkedIn u32, 19 4 population u32
//
// Ack (0x07), 13 bytes:
//
//	0 1 version, 1 1 type = 0x07, 2 8 round u64 (0 allowed: the relay may
//	not know the round of a malformed frame), 10 1 status u8 (Ack*),
//	11 2 received u16
const (
	CheckInSize    = 10
	batchReplySize = 23
	abortSize      = 23
	ackSize        = 13
)

// BatchReply statuses.
const (
	BatchStatusOK        uint8 = 0 // accepted and aggregated
	BatchStatusDuplicate uint8 = 1 // a batch for this round was already processed; ignored
	BatchStatusRefused   uint8 = 2 // refused: privacy budget exhausted
	BatchStatusInvalid   uint8 = 3 // invalid batch
)

// Abort reasons.
const (
	AbortBelowMinBatch uint8 = 1 // fewer than MinBatch reports at the deadline
	AbortRelayRestart  uint8 = 2 // the relay restarted during the round
	AbortOverflow      uint8 = 3 // a dimension exceeded n_p
	// AbortNoRelease: a secure-summation round the aggregator charged, for
	// which the relay releases no aggregate share (its noise ledger or the
	// helper refused): the aggregator records it lost at once instead of
	// waiting out its grace.
	AbortNoRelease uint8 = 4
	// AbortRelayFloor: fewer reports were accepted than the relay's own
	// minimum batch, which no announcement lowers (roundspec.Floor):
	// the relay releases nothing for the round.
	AbortRelayFloor uint8 = 5
	// AbortRejected: more than the relay's stated share of the round's
	// reports failed the aggregator's verification (roundspec.Floor):
	// honest PINE reports fail with probability about 2^-101, so the
	// relay releases nothing for a round most of whose reports "failed".
	AbortRejected uint8 = 6
	// AbortRelayBudget: the relay's own noise ledger refused the round
	// (its privacy budget is spent).
	AbortRelayBudget uint8 = 7
)

// Ack statuses.
const (
	AckAccepted    uint8 = 0
	AckNoRound     uint8 = 1 // no open round
	AckWrongRound  uint8 = 2
	AckDuplicate   uint8 = 3 // duplicate report
	AckMalformed   uint8 = 4
	AckTooLate     uint8 = 5
	maxAckStatus         = AckTooLate
	maxBatchStatus       = BatchStatusInvalid
)

// CheckIn is a client's statement that it takes part in the round (its
// check-in coin came up heads). It precedes the client's Report frames.
type CheckIn struct{ Round uint64 }

// MarshalBinary encodes the check-in (10 bytes).
func (c *CheckIn) MarshalBinary() ([]byte, error) {
	if c.Round < 1 {
		return nil, malformed(ErrValue, "check-in round must be >= 1")
	}
	b := make([]byte, CheckInSize)
	putHeader(b, TypeCheckIn)
	be.PutUint64(b[2:], c.Round)
	return b, nil
}

// ParseCheckIn decodes a CheckIn frame.
func ParseCheckIn(b []byte) (*CheckIn, error) {
	if err := header(b, TypeCheckIn); err != nil {
		return nil, err
	}
	if err := exactLen(b, CheckInSize, "check-in"); err != nil {
		return nil, err
	}
	c := &CheckIn{Round: be.Uint64(b[2:])}
	if c.Round < 1 {
		return nil, malformed(ErrValue, "check-in round must be >= 1")
	}
	return c, nil
}

// BatchReply is the aggregator's answer to a Batch: counts only (a
// per-message status would let the relay link values to senders).
type BatchReply struct {
	Round         uint64
	Accepted      uint32 // messages opened and aggregated
	RejectedOpen  uint32 // HPKE open failed
	RejectedValue uint32 // non-finite value
	Status        uint8  // BatchStatus*
}

func (r *BatchReply) check() error {
	if r.Round < 1 {
		return malformed(ErrValue, "batch reply round must be >= 1")
	}
	if r.Status > maxBatchStatus {
		return malformed(ErrValue, "unknown batch reply status %d", r.Status)
	}
	return nil
}

// MarshalBinary encodes the reply (23 bytes).
func (r *BatchReply) MarshalBinary() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	b := make([]byte, batchReplySize)
	putHeader(b, TypeBatchReply)
	be.PutUint64(b[2:], r.Round)
	be.PutUint32(b[10:], r.Accepted)
	be.PutUint32(b[14:], r.RejectedOpen)
	be.PutUint32(b[18:], r.RejectedValue)
	b[22] = r.Status
	return b, nil
}

// ParseBatchReply decodes a BatchReply frame.
func ParseBatchReply(b []byte) (*BatchReply, error) {
	if err := header(b, TypeBatchReply); err != nil {
		return nil, err
	}
	if err := exactLen(b, batchReplySize, "batch reply"); err != nil {
		return nil, err
	}
	r := &BatchReply{
		Round:         be.Uint64(b[2:]),
		Accepted:      be.Uint32(b[10:]),
		RejectedOpen:  be.Uint32(b[14:]),
		RejectedValue: be.Uint32(b[18:]),
		Status:        b[22],
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

// Abort tells the aggregator that a round ended without a batch.
type Abort struct {
	Round      uint64
	Reason     uint8 // AbortReason*
	Reports    uint32
	CheckedIn  uint32
	Population uint32
}

func (a *Abort) check() error {
	if a.Round < 1 {
		return malformed(ErrValue, "abort round must be >= 1")
	}
	if a.Reason < AbortBelowMinBatch || a.Reason > AbortRelayBudget {
		return malformed(ErrValue, "unknown abort reason %d", a.Reason)
	}
	return nil
}

// MarshalBinary encodes the abort (23 bytes).
func (a *Abort) MarshalBinary() ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	b := make([]byte, abortSize)
	putHeader(b, TypeAbort)
	be.PutUint64(b[2:], a.Round)
	b[10] = a.Reason
	be.PutUint32(b[11:], a.Reports)
	be.PutUint32(b[15:], a.CheckedIn)
	be.PutUint32(b[19:], a.Population)
	return b, nil
}

// ParseAbort decodes an Abort frame.
func ParseAbort(b []byte) (*Abort, error) {
	if err := header(b, TypeAbort); err != nil {
		return nil, err
	}
	if err := exactLen(b, abortSize, "abort"); err != nil {
		return nil, err
	}
	a := &Abort{
		Round:      be.Uint64(b[2:]),
		Reason:     b[10],
		Reports:    be.Uint32(b[11:]),
		CheckedIn:  be.Uint32(b[15:]),
		Population: be.Uint32(b[19:]),
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return a, nil
}

// Ack is the relay's answer to a client's CheckIn or Report frame.
type Ack struct {
	Round    uint64
	Status   uint8  // Ack*
	Received uint16 // messages of this client's report received so far
}

// MarshalBinary encodes the ack (13 bytes).
func (a *Ack) MarshalBinary() ([]byte, error) {
	if a.Status > maxAckStatus {
		return nil, malformed(ErrValue, "unknown ack status %d", a.Status)
	}
	b := make([]byte, ackSize)
	putHeader(b, TypeAck)
	be.PutUint64(b[2:], a.Round)
	b[10] = a.Status
	be.PutUint16(b[11:], a.Received)
	return b, nil
}

// ParseAck decodes an Ack frame.
func ParseAck(b []byte) (*Ack, error) {
	if err := header(b, TypeAck); err != nil {
		return nil, err
	}
	if err := exactLen(b, ackSize, "ack"); err != nil {
		return nil, err
	}
	a := &Ack{Round: be.Uint64(b[2:]), Status: b[10], Received: be.Uint16(b[11:])}
	if a.Status > maxAckStatus {
		return nil, malformed(ErrValue, "unknown ack status %d", a.Status)
	}
	return a, nil
}
