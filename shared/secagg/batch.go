package secagg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// The batch API: the two servers prepare one batch per round (VDAF
// preparation with two aggregators, draft-irtf-cfrg-vdaf §7.2.2, one round
// trip), every report through the round's Engine. The servers run the
// same steps one report at a time (Engine, aggregator/internal/analysis,
// relay/internal/helper); tests, benchmarks and examples use this API.
//
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
// accepted it and PINE's checks on their combined verifier shares passed.

// ErrProtocol is wrapped by errors that abort the whole batch: messages
// out of order, a peer's message that contradicts this server's state
// (wrong count, nonces that differ, accepting a report this server
// rejected) or aggregate shares over different counts.
var ErrProtocol = errors.New("protocol violation")

// ErrNoiseOverflow reports an unsharded coordinate of absolute value
// 2^62 or more: the noise was that large (probability at most 2^-40 for
// honest servers, Params.Validate) or a server misbehaved. Nothing is
// released.
var ErrNoiseOverflow = errors.New("noisy sum outside the decodable range")

type stage uint8

const (
	stageNew stage = iota
	stagePrepared
	stageDone
	stageReleased
)

// party is the state both servers share: the batch's nonces, per-report
// outcome and preparation (through the round's Engine), and the running
// aggregate.
type party struct {
	r       *Round
	aggID   uint8
	workers int
	stage   stage

	nonces  [][nonceSize]byte
	reasons []Reason
	errs    []error
	count   int

	eng   Engine
	preps []Prep
	pagg  *Aggregate
}

func newParty(r *Round, aggID uint8, verifyKey []byte) (party, error) {
	eng, err := NewPineEngine(r, aggID == 0, verifyKey)
	if err != nil {
		return party{}, err
	}
	return party{r: r, aggID: aggID, workers: runtime.GOMAXPROCS(0), eng: eng, pagg: eng.NewAggregate()}, nil
}

// SetWorkers sets how many goroutines prepare reports in parallel
// (default GOMAXPROCS).
func (p *party) setWorkers(n int) {
	if n >= 1 {
		p.workers = n
	}
}

// prepInit decodes every share and runs VDAF PrepInit on it in parallel
// (Engine.PrepInit on p.workers goroutines).
func (p *party) prepInit(shares [][]byte) ([]Rejection, error) {
	if p.stage != stageNew {
		return nil, fmt.Errorf("secagg: prepare called twice: %w", ErrProtocol)
	}
	if len(shares) > p.r.p.MaxReports {
		return nil, fmt.Errorf("secagg: batch of %d reports exceeds max %d: %w", len(shares), p.r.p.MaxReports, ErrProtocol)
	}
	p.stage = stagePrepared
	n := len(shares)
	p.nonces = make([][nonceSize]byte, n)
	p.reasons = make([]Reason, n)
	p.errs = make([]error, n)
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
			p.errs[i] = fmt.Errorf("secagg: nonce %x seen earlier in round %d", s.Nonce, p.r.id)
			continue
		}
		seen[s.Nonce] = struct{}{}
		decoded[i] = s
	}
	p.preps = make([]Prep, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range min(p.workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if decoded[i] == nil {
					continue
				}
				pr := p.eng.PrepInit(shares[i])
				p.preps[i] = pr
				if pr.Reason != Accepted {
					p.reasons[i], p.errs[i] = pr.Reason, pr.Err
				}
			}
		}()
	}
	wg.Wait()
	return p.rejections(), nil
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
	p.preps[i] = Prep{}
}

// aggregateShare hands out the aggregate share exactly once: a second
// noised copy of the same sum would let its receiver average the two
// noises away.
func (p *party) aggregateShare() (*AggregateShare, error) {
	switch p.stage {
	case stageDone:
	case stageReleased:
		return nil, fmt.Errorf("secagg: aggregate share already released: %w", ErrProtocol)
	default:
		return nil, fmt.Errorf("secagg: aggregate share before preparation finished: %w", ErrProtocol)
	}
	p.stage = stageReleased
	return p.pagg.Share()
}

// Helper is the relay's side of preparation (VDAF aggregator 1). It is
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
	entries := make([]Entry, len(shares))
	for i := range entries {
		entries[i] = Entry{Nonce: h.p.nonces[i], Reason: h.p.reasons[i]}
		if h.p.reasons[i] == Accepted {
			entries[i].Payload = h.p.preps[i].Payload
		}
	}
	b, err := h.p.r.MarshalPrep(entries)
	if err != nil {
		return nil, nil, err
	}
	return b, rej, nil
}

// Finish applies the leader's 'M' message: every report the leader
// accepted becomes an output share and enters the helper's aggregate.
// It returns every report of the batch that is not in the sum.
func (h *Helper) Finish(leaderMsg []byte) ([]Rejection, error) {
	p := &h.p
	if p.stage != stagePrepared {
		return nil, fmt.Errorf("secagg: finish before prepare or twice: %w", ErrProtocol)
	}
	m, err := p.r.ParseVerdicts(leaderMsg)
	if err != nil {
		return nil, err
	}
	if len(m) != len(p.reasons) {
		return nil, fmt.Errorf("secagg: leader message has %d reports, batch %d: %w", len(m), len(p.reasons), ErrProtocol)
	}
	outs := make([]OutShare, len(m))
	for i, e := range m {
		if e.Reason == Accepted && p.reasons[i] == Accepted && e.Nonce != p.nonces[i] {
			return nil, fmt.Errorf("secagg: leader message report %d has nonce %x, want %x: %w", i, e.Nonce, p.nonces[i], ErrProtocol)
		}
		if e.Reason == Accepted && p.reasons[i] != Accepted {
			return nil, fmt.Errorf("secagg: leader accepted report %d that the helper rejected (%v): %w", i, p.reasons[i], ErrProtocol)
		}
		if e.Reason != Accepted {
			continue
		}
		o, err := p.eng.Next(p.preps[i], e)
		if err != nil {
			return nil, fmt.Errorf("secagg: report %d: %w", i, err)
		}
		outs[i] = o
	}
	for i, e := range m {
		if e.Reason != Accepted {
			if p.reasons[i] == Accepted {
				p.reject(i, e.Reason, errors.New("secagg: rejected by the leader"))
			}
			continue
		}
		if err := p.pagg.Fold(outs[i]); err != nil {
			return nil, err
		}
		p.count++
		p.preps[i] = Prep{}
	}
	p.stage = stageDone
	return p.rejections(), nil
}

// AggregateShare returns the helper's aggregate share, once; the caller
// must AddNoise before sending it (MarshalBinary refuses otherwise when
// Sigma > 0).
func (h *Helper) AggregateShare() (*AggregateShare, error) { return h.p.aggregateShare() }

// Leader is the aggregator's side of preparation (VDAF aggregator 0):
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
// combined verifier shares passes (Engine.Decide) — adds the
// accepted output shares to the leader's aggregate and returns the 'M'
// message for the helper and the complete list of the batch's rejections
// (count them from here).
func (l *Leader) Combine(helperMsg []byte) ([]byte, []Rejection, error) {
	p := &l.p
	if p.stage != stagePrepared {
		return nil, nil, fmt.Errorf("secagg: combine before prepare or twice: %w", ErrProtocol)
	}
	hm, err := p.r.ParsePrep(helperMsg)
	if err != nil {
		return nil, nil, err
	}
	if len(hm) != len(p.reasons) {
		return nil, nil, fmt.Errorf("secagg: helper message has %d reports, batch %d: %w", len(hm), len(p.reasons), ErrProtocol)
	}
	out := make([]Entry, len(hm))
	for i, he := range hm {
		out[i] = Entry{Nonce: p.nonces[i], Reason: p.reasons[i]}
		if p.reasons[i] != Accepted {
			continue
		}
		m, o := p.eng.Decide(p.preps[i], he)
		if o == nil {
			p.reject(i, m.Reason, fmt.Errorf("secagg: report rejected at the leader's decision (%v)", m.Reason))
			out[i].Reason = m.Reason
			continue
		}
		if err := p.pagg.Fold(o); err != nil {
			return nil, nil, err
		}
		p.count++
		p.preps[i] = Prep{}
		out[i] = m
	}
	b, err := p.r.MarshalVerdicts(out)
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

type binaryMarshaler interface{ MarshalBinary() ([]byte, error) }

// marshalEntries encodes header | count | entries.
func (r *Round) marshalEntries(kind byte, round uint64, n int, entry func(i int) ([nonceSize]byte, Reason, binaryMarshaler)) ([]byte, error) {
	if round != r.id {
		return nil, fmt.Errorf("secagg: message of round %d in round %d", round, r.id)
	}
	if n > r.p.MaxReports {
		return nil, fmt.Errorf("secagg: %d reports exceed max %d", n, r.p.MaxReports)
	}
	b := r.header(kind)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for i := range n {
		nonce, reason, payload := entry(i)
		if reason >= numReasons {
			return nil, fmt.Errorf("secagg: report %d has unknown reason %d", i, reason)
		}
		b = append(b, nonce[:]...)
		b = append(b, byte(reason))
		if (reason == Accepted) != (payload != nil) {
			return nil, fmt.Errorf("secagg: report %d: payload present=%v with reason %v", i, payload != nil, reason)
		}
		if payload != nil {
			enc, err := payload.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("secagg: report %d: %w", i, err)
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
		return 0, fmt.Errorf("secagg: message of %d bytes has no count: %w", len(b), ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[headerLen:])
	rest := b[headerLen+4:]
	const minEntry = nonceSize + 1
	if uint64(n) > uint64(r.p.MaxReports) || uint64(n)*minEntry > uint64(len(rest)) {
		return 0, fmt.Errorf("secagg: count %d does not fit (max %d, %d bytes left): %w", n, r.p.MaxReports, len(rest), ErrMalformed)
	}
	for i := range int(n) {
		if len(rest) < minEntry {
			return 0, fmt.Errorf("secagg: entry %d truncated: %w", i, ErrMalformed)
		}
		var nonce [nonceSize]byte
		copy(nonce[:], rest)
		reason := Reason(rest[nonceSize])
		rest = rest[minEntry:]
		if reason >= numReasons {
			return 0, fmt.Errorf("secagg: entry %d has unknown reason %d: %w", i, reason, ErrMalformed)
		}
		var payload []byte
		if reason == Accepted {
			if len(rest) < payloadLen {
				return 0, fmt.Errorf("secagg: entry %d payload truncated: %w", i, ErrMalformed)
			}
			payload, rest = rest[:payloadLen], rest[payloadLen:]
		}
		if err := entry(i, nonce, reason, payload); err != nil {
			return 0, fmt.Errorf("secagg: entry %d: %w: %w", i, ErrMalformed, err)
		}
	}
	if len(rest) != 0 {
		return 0, fmt.Errorf("secagg: %d trailing bytes: %w", len(rest), ErrMalformed)
	}
	return int(n), nil
}
