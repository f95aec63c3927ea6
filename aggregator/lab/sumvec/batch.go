package sumvec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// The two servers prepare one batch per round (VDAF preparation with two
// aggregators, draft-irtf-cfrg-vdaf §7.2.2, one round trip):
//
//	helper: h.Prepare(helper shares)        -> 'P' message to the leader
//	leader: l.Prepare(leader shares)
//	leader: l.Combine('P' message)          -> 'M' message to the helper;
//	        decides every proof, aggregates accepted out shares
//	helper: h.Finish('M' message)           -> aggregates the same reports
//	both:   AggregateShare(), AddNoise(noise.Secure())
//	helper: MarshalBinary()                 -> 'A' message to the leader
//	leader: l.Unshard(own, 'A' message)     -> Result
//
// Both servers must receive the batch in the same order (the relay fixes
// it); position i of every message refers to the same report, and the
// nonces are compared. A report enters the sum only if both servers
// accepted it and the FLP check on their combined verifier shares passed.

type stage uint8

const (
	stageNew stage = iota
	stagePrepared
	stageDone
	stageReleased
)

// party is the state both servers share: the batch's nonces, per-report
// outcome, prep states and shares, and the running aggregate.
type party struct {
	r       *Round
	aggID   uint8
	vk      sumvec.VerifyKey
	workers int
	stage   stage

	nonces  [][nonceSize]byte
	reasons []Reason
	errs    []error
	states  []*sumvec.PrepState
	shares  []*sumvec.PrepShare

	agg   sumvec.AggShare
	count int
}

func newParty(r *Round, aggID uint8, verifyKey []byte) (party, error) {
	if r == nil || r.vdaf == nil {
		return party{}, errors.New("sumvec: no round")
	}
	if len(verifyKey) != VerifyKeySize {
		return party{}, fmt.Errorf("sumvec: verify key of %d bytes, want %d", len(verifyKey), VerifyKeySize)
	}
	p := party{r: r, aggID: aggID, workers: runtime.GOMAXPROCS(0), agg: r.vdaf.AggregateInit()}
	copy(p.vk[:], verifyKey)
	return p, nil
}

// SetWorkers sets how many goroutines prepare reports in parallel
// (default GOMAXPROCS).
func (p *party) setWorkers(n int) {
	if n >= 1 {
		p.workers = n
	}
}

// prepInit decodes every share and runs VDAF PrepInit on it in parallel.
func (p *party) prepInit(shares [][]byte) ([]Rejection, error) {
	if p.stage != stageNew {
		return nil, fmt.Errorf("sumvec: prepare called twice: %w", ErrProtocol)
	}
	if len(shares) > p.r.p.MaxReports {
		return nil, fmt.Errorf("sumvec: batch of %d reports exceeds max %d: %w", len(shares), p.r.p.MaxReports, ErrProtocol)
	}
	p.stage = stagePrepared
	n := len(shares)
	p.nonces = make([][nonceSize]byte, n)
	p.reasons = make([]Reason, n)
	p.errs = make([]error, n)
	p.states = make([]*sumvec.PrepState, n)
	p.shares = make([]*sumvec.PrepShare, n)
	leader := p.aggID == 0

	// Decode sequentially (cheap) so duplicate detection is deterministic:
	// the first report with a nonce is kept.
	decoded := make([]*ReportShare, n)
	seen := make(map[[nonceSize]byte]struct{}, n)
	for i, b := range shares {
		s, reason, err := p.r.ParseReportShare(b, leader)
		if err != nil {
			p.reasons[i], p.errs[i] = reason, err
			continue
		}
		p.nonces[i] = s.Nonce
		if _, dup := seen[s.Nonce]; dup {
			p.reasons[i] = RejectDuplicateNonce
			p.errs[i] = fmt.Errorf("sumvec: nonce %x seen earlier in round %d", s.Nonce, p.r.id)
			continue
		}
		seen[s.Nonce] = struct{}{}
		decoded[i] = s
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	var setupErr error
	for range min(p.workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := p.r.newVDAF()
			if err != nil {
				mu.Lock()
				setupErr = err
				mu.Unlock()
				return
			}
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				s := decoded[i]
				if s == nil {
					continue
				}
				nonce := sumvec.Nonce(s.Nonce)
				st, ps, err := v.PrepInit(&p.vk, &nonce, p.aggID, s.public, s.input)
				decoded[i] = nil // let the large share go
				if err != nil {
					p.reasons[i], p.errs[i] = classify(err), fmt.Errorf("sumvec: prep init: %w", err)
					continue
				}
				p.states[i], p.shares[i] = st, ps
			}
		}()
	}
	wg.Wait()
	if setupErr != nil {
		return nil, setupErr
	}
	return p.rejections(), nil
}

// classify maps a circl preparation error to a Reason. circl's sentinel
// errors live in an internal package, so their messages are matched;
// TestRejections pins both (a changed message shows up there as
// RejectInternal).
func classify(err error) Reason {
	switch err.Error() {
	case "invalid joint randomness":
		return RejectJointRand
	case "proof verifier check failed":
		return RejectInvalidProof
	}
	return RejectInternal
}

func (p *party) rejections() []Rejection {
	var out []Rejection
	for i, r := range p.reasons {
		if r != Accepted {
			out = append(out, Rejection{Index: i, Nonce: p.nonces[i], Reason: r, Err: p.errs[i]})
		}
	}
	return out
}

func (p *party) reject(i int, r Reason, err error) {
	p.reasons[i], p.errs[i] = r, err
	p.states[i], p.shares[i] = nil, nil
}

// accept turns report i's prep state into its output share and adds it to
// the aggregate (VDAF PrepNext and AggregateUpdate).
func (p *party) accept(i int, msg *sumvec.PrepMessage) error {
	out, err := p.r.vdaf.PrepNext(p.states[i], msg)
	if err != nil {
		return err
	}
	p.r.vdaf.AggregateUpdate(&p.agg, out)
	p.count++
	p.states[i], p.shares[i] = nil, nil
	return nil
}

// aggregateShare hands out the aggregate share exactly once: a second
// noised copy of the same sum would let its receiver average the two
// noises away.
func (p *party) aggregateShare() (*AggregateShare, error) {
	switch p.stage {
	case stageDone:
	case stageReleased:
		return nil, fmt.Errorf("sumvec: aggregate share already released: %w", ErrProtocol)
	default:
		return nil, fmt.Errorf("sumvec: aggregate share before preparation finished: %w", ErrProtocol)
	}
	p.stage = stageReleased
	a := &AggregateShare{r: p.r, count: p.count, share: p.agg}
	p.agg = p.r.vdaf.AggregateInit()
	return a, nil
}

// Helper is the relay's side of preparation (Prio3 aggregator 1). It is
// not safe for concurrent use; it prepares exactly one batch.
type Helper struct{ p party }

// NewHelper returns the helper for round r with the verify key shared
// with the leader.
func NewHelper(r *Round, verifyKey []byte) (*Helper, error) {
	p, err := newParty(r, 1, verifyKey)
	if err != nil {
		return nil, err
	}
	return &Helper{p: p}, nil
}

// SetWorkers sets the number of goroutines Prepare uses (default
// GOMAXPROCS).
func (h *Helper) SetWorkers(n int) { h.p.setWorkers(n) }

// Prepare decodes the helper input shares of the batch (in the relay's
// order), runs PrepInit on each and returns the 'P' message for the
// leader and the reports rejected so far.
func (h *Helper) Prepare(shares [][]byte) ([]byte, []Rejection, error) {
	rej, err := h.p.prepInit(shares)
	if err != nil {
		return nil, nil, err
	}
	msg := &PrepShares{Round: h.p.r.id, Entries: make([]PrepShareEntry, len(shares))}
	for i := range shares {
		msg.Entries[i] = PrepShareEntry{Nonce: h.p.nonces[i], Reason: h.p.reasons[i], share: h.p.shares[i]}
	}
	b, err := h.p.r.MarshalPrepShares(msg)
	if err != nil {
		return nil, nil, err
	}
	clear(h.p.shares) // sent; only the prep states are needed to finish
	return b, rej, nil
}

// Finish applies the leader's 'M' message: every report the leader
// accepted becomes an output share and enters the helper's aggregate.
// It returns every report of the batch that is not in the sum.
func (h *Helper) Finish(leaderMsg []byte) ([]Rejection, error) {
	p := &h.p
	if p.stage != stagePrepared {
		return nil, fmt.Errorf("sumvec: finish before prepare or twice: %w", ErrProtocol)
	}
	m, err := p.r.ParsePrepMessages(leaderMsg)
	if err != nil {
		return nil, err
	}
	if len(m.Entries) != len(p.reasons) {
		return nil, fmt.Errorf("sumvec: leader message has %d reports, batch %d: %w", len(m.Entries), len(p.reasons), ErrProtocol)
	}
	for i, e := range m.Entries {
		if e.Reason != Accepted {
			continue
		}
		if p.reasons[i] != Accepted {
			return nil, fmt.Errorf("sumvec: leader accepted report %d that the helper rejected (%v): %w", i, p.reasons[i], ErrProtocol)
		}
		if e.Nonce != p.nonces[i] {
			return nil, fmt.Errorf("sumvec: leader message report %d has nonce %x, want %x: %w", i, e.Nonce, p.nonces[i], ErrProtocol)
		}
	}
	for i, e := range m.Entries {
		if e.Reason != Accepted && p.reasons[i] == Accepted {
			p.reject(i, e.Reason, errors.New("sumvec: rejected by the leader"))
		}
	}
	// Apply only after the whole message is checked.
	for i, e := range m.Entries {
		if e.Reason != Accepted {
			continue
		}
		if err := p.accept(i, e.msg); err != nil {
			return nil, fmt.Errorf("sumvec: report %d: leader's prep message does not match: %w: %w", i, ErrProtocol, err)
		}
	}
	p.stage = stageDone
	return p.rejections(), nil
}

// AggregateShare returns the helper's aggregate share, once; the caller
// must AddNoise before sending it (MarshalBinary refuses otherwise when
// Sigma > 0).
func (h *Helper) AggregateShare() (*AggregateShare, error) { return h.p.aggregateShare() }

// Leader is the aggregator's side of preparation (Prio3 aggregator 0):
// it decides every report and unshards. It is not safe for concurrent
// use; it prepares exactly one batch.
type Leader struct{ p party }

// NewLeader returns the leader for round r with the verify key shared
// with the helper.
func NewLeader(r *Round, verifyKey []byte) (*Leader, error) {
	p, err := newParty(r, 0, verifyKey)
	if err != nil {
		return nil, err
	}
	return &Leader{p: p}, nil
}

// SetWorkers sets the number of goroutines Prepare uses (default
// GOMAXPROCS).
func (l *Leader) SetWorkers(n int) { l.p.setWorkers(n) }

// Prepare decodes the leader input shares of the batch (in the relay's
// order) and runs PrepInit on each; it returns the reports rejected so
// far.
func (l *Leader) Prepare(shares [][]byte) ([]Rejection, error) { return l.p.prepInit(shares) }

// Combine takes the helper's 'P' message, decides each report — accepted
// iff both servers accepted it, the nonces agree and the FLP check of the
// combined verifier shares passes (VDAF PrepSharesToPrep) — adds the
// accepted output shares to the leader's aggregate and returns the 'M'
// message for the helper and the complete list of the batch's rejections
// (count them from here).
func (l *Leader) Combine(helperMsg []byte) ([]byte, []Rejection, error) {
	p := &l.p
	if p.stage != stagePrepared {
		return nil, nil, fmt.Errorf("sumvec: combine before prepare or twice: %w", ErrProtocol)
	}
	hm, err := p.r.ParsePrepShares(helperMsg)
	if err != nil {
		return nil, nil, err
	}
	if len(hm.Entries) != len(p.reasons) {
		return nil, nil, fmt.Errorf("sumvec: helper message has %d reports, batch %d: %w", len(hm.Entries), len(p.reasons), ErrProtocol)
	}
	out := &PrepMessages{Round: p.r.id, Entries: make([]PrepMessageEntry, len(p.reasons))}
	for i, he := range hm.Entries {
		switch {
		case p.reasons[i] != Accepted:
		case he.Reason != Accepted:
			p.reject(i, he.Reason, errors.New("sumvec: rejected by the helper"))
		case he.Nonce != p.nonces[i]:
			p.reject(i, RejectNonceMismatch, fmt.Errorf("sumvec: helper has nonce %x, leader %x", he.Nonce, p.nonces[i]))
		default:
			msg, err := p.r.vdaf.PrepSharesToPrep([]sumvec.PrepShare{*p.shares[i], *he.share})
			if err != nil {
				p.reject(i, classify(err), fmt.Errorf("sumvec: prep shares to prep: %w", err))
				break
			}
			if err := p.accept(i, msg); err != nil {
				p.reject(i, classify(err), fmt.Errorf("sumvec: prep next: %w", err))
				break
			}
			out.Entries[i].msg = msg
		}
		out.Entries[i].Nonce = p.nonces[i]
		out.Entries[i].Reason = p.reasons[i]
	}
	b, err := p.r.MarshalPrepMessages(out)
	if err != nil {
		return nil, nil, err
	}
	p.stage = stageDone
	return b, p.rejections(), nil
}

// AggregateShare returns the leader's aggregate share, once; the caller
// must AddNoise before Unshard (which refuses otherwise when Sigma > 0).
func (l *Leader) AggregateShare() (*AggregateShare, error) { return l.p.aggregateShare() }

// Accepted returns the number of reports in the leader's aggregate.
func (l *Leader) Accepted() int { return l.p.count }

// Accepted returns the number of reports in the helper's aggregate.
func (h *Helper) Accepted() int { return h.p.count }

// PrepShareEntry is one report in the helper's 'P' message.
type PrepShareEntry struct {
	Nonce  [nonceSize]byte
	Reason Reason
	share  *sumvec.PrepShare // non-nil iff Reason == Accepted
}

// PrepShares is the helper's 'P' message.
type PrepShares struct {
	Round   uint64
	Entries []PrepShareEntry
}

// PrepMessageEntry is one report in the leader's 'M' message.
type PrepMessageEntry struct {
	Nonce  [nonceSize]byte
	Reason Reason
	msg    *sumvec.PrepMessage // non-nil iff Reason == Accepted
}

// PrepMessages is the leader's 'M' message.
type PrepMessages struct {
	Round   uint64
	Entries []PrepMessageEntry
}

type binaryMarshaler interface{ MarshalBinary() ([]byte, error) }

// marshalEntries encodes header | count | entries.
func (r *Round) marshalEntries(kind byte, round uint64, n int, entry func(i int) ([nonceSize]byte, Reason, binaryMarshaler)) ([]byte, error) {
	if round != r.id {
		return nil, fmt.Errorf("sumvec: message of round %d in round %d", round, r.id)
	}
	if n > r.p.MaxReports {
		return nil, fmt.Errorf("sumvec: %d reports exceed max %d", n, r.p.MaxReports)
	}
	b := r.header(kind)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for i := range n {
		nonce, reason, payload := entry(i)
		if reason >= numReasons {
			return nil, fmt.Errorf("sumvec: report %d has unknown reason %d", i, reason)
		}
		b = append(b, nonce[:]...)
		b = append(b, byte(reason))
		if (reason == Accepted) != (payload != nil) {
			return nil, fmt.Errorf("sumvec: report %d: payload present=%v with reason %v", i, payload != nil, reason)
		}
		if payload != nil {
			enc, err := payload.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("sumvec: report %d: %w", i, err)
			}
			b = append(b, enc...)
		}
	}
	return b, nil
}

// parseEntries strictly decodes header | count | entries, calling
// payload on the fixed-size payload of each accepted entry.
func (r *Round) parseEntries(b []byte, kind byte, payloadLen int, entry func(i int, nonce [nonceSize]byte, reason Reason, payload []byte) error) (int, error) {
	if _, err := r.checkHeader(b, kind); err != nil {
		return 0, err
	}
	if len(b) < headerLen+4 {
		return 0, fmt.Errorf("sumvec: message of %d bytes has no count: %w", len(b), ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[headerLen:])
	rest := b[headerLen+4:]
	const minEntry = nonceSize + 1
	if uint64(n) > uint64(r.p.MaxReports) || uint64(n)*minEntry > uint64(len(rest)) {
		return 0, fmt.Errorf("sumvec: count %d does not fit (max %d, %d bytes left): %w", n, r.p.MaxReports, len(rest), ErrMalformed)
	}
	for i := range int(n) {
		if len(rest) < minEntry {
			return 0, fmt.Errorf("sumvec: entry %d truncated: %w", i, ErrMalformed)
		}
		var nonce [nonceSize]byte
		copy(nonce[:], rest)
		reason := Reason(rest[nonceSize])
		rest = rest[minEntry:]
		if reason >= numReasons {
			return 0, fmt.Errorf("sumvec: entry %d has unknown reason %d: %w", i, reason, ErrMalformed)
		}
		var payload []byte
		if reason == Accepted {
			if len(rest) < payloadLen {
				return 0, fmt.Errorf("sumvec: entry %d payload truncated: %w", i, ErrMalformed)
			}
			payload, rest = rest[:payloadLen], rest[payloadLen:]
		}
		if err := entry(i, nonce, reason, payload); err != nil {
			return 0, fmt.Errorf("sumvec: entry %d: %w: %w", i, ErrMalformed, err)
		}
	}
	if len(rest) != 0 {
		return 0, fmt.Errorf("sumvec: %d trailing bytes: %w", len(rest), ErrMalformed)
	}
	return int(n), nil
}

// MarshalPrepShares encodes a 'P' message.
func (r *Round) MarshalPrepShares(m *PrepShares) ([]byte, error) {
	return r.marshalEntries(kindHelperPrep, m.Round, len(m.Entries), func(i int) ([nonceSize]byte, Reason, binaryMarshaler) {
		e := m.Entries[i]
		if e.share == nil {
			return e.Nonce, e.Reason, nil
		}
		return e.Nonce, e.Reason, e.share
	})
}

// ParsePrepShares strictly decodes a 'P' message of this round.
func (r *Round) ParsePrepShares(b []byte) (*PrepShares, error) {
	vp := r.vdaf.Params()
	m := &PrepShares{Round: r.id}
	n, err := r.parseEntries(b, kindHelperPrep, r.prepShareLen, func(i int, nonce [nonceSize]byte, reason Reason, payload []byte) error {
		e := PrepShareEntry{Nonce: nonce, Reason: reason}
		if payload != nil {
			e.share = new(sumvec.PrepShare)
			e.share.New(&vp)
			if err := e.share.UnmarshalBinary(payload); err != nil {
				return err
			}
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if m.Entries == nil {
		m.Entries = make([]PrepShareEntry, n)
	}
	return m, nil
}

// MarshalPrepMessages encodes an 'M' message.
func (r *Round) MarshalPrepMessages(m *PrepMessages) ([]byte, error) {
	return r.marshalEntries(kindLeaderPrep, m.Round, len(m.Entries), func(i int) ([nonceSize]byte, Reason, binaryMarshaler) {
		e := m.Entries[i]
		if e.msg == nil {
			return e.Nonce, e.Reason, nil
		}
		return e.Nonce, e.Reason, e.msg
	})
}

// ParsePrepMessages strictly decodes an 'M' message of this round.
func (r *Round) ParsePrepMessages(b []byte) (*PrepMessages, error) {
	vp := r.vdaf.Params()
	m := &PrepMessages{Round: r.id}
	n, err := r.parseEntries(b, kindLeaderPrep, r.prepMsgLen, func(i int, nonce [nonceSize]byte, reason Reason, payload []byte) error {
		e := PrepMessageEntry{Nonce: nonce, Reason: reason}
		if payload != nil {
			e.msg = new(sumvec.PrepMessage)
			e.msg.New(&vp)
			if err := e.msg.UnmarshalBinary(payload); err != nil {
				return err
			}
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if m.Entries == nil {
		m.Entries = make([]PrepMessageEntry, n)
	}
	return m, nil
}
