package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// The leader's side of one secure-summation round (docs/secagg.md) as a
// state machine with no HTTP and no server state, the counterpart of
// Analyze for the shuffle protocols:
//
//	collecting: Prepare (any goroutine) opens and prepares one report with
//	            the helper's 'P' entry; Fold (one goroutine, in the relay's
//	            order) folds its output share into the running aggregate
//	            and drops the share, returning the report's 'M' entry.
//	Charge:     below MinBatch accepted, or a refused charge, closes the
//	            round with nothing released; otherwise charged.
//	charged:    Unshard, once, with the relay's noised aggregate share.
//
// The guarantee (docs/architecture.md, "Where each invariant lives";
// TestSecAggNothingUnshardsBeforeCharge): the leader's aggregate share is
// handed out, noised, only by Unshard, which refuses unless the round's
// release was charged first (Charge, ChargeSecAgg). The 'M' messages
// (PrepareChunk's verdicts) let the relay fold its own shares, never
// release them: the relay's noised aggregate share, which lets the
// aggregator unshard, is sent only after the aggregator's server answered
// the close with the charged count.

// SecAgg leader states.
const (
	secAggCollecting = iota
	secAggCharged
	secAggDone // unsharded, or closed without a release
)

// ErrBelowMinBatch: fewer reports accepted than the announced minimum
// batch; nothing is charged or released.
var ErrBelowMinBatch = errors.New("fewer accepted reports than the minimum batch")

// ErrTooManyRejected: more than roundspec.DefaultMaxRejectedShare of the
// round's reports failed preparation; the relay would release nothing
// (roundspec.Floor), so the round is closed without a charge.
var ErrTooManyRejected = errors.New("too many reports failed verification")

// SecAggLeader is the leader's state of one secure-summation round. Its
// methods other than Prepare are not safe for concurrent use.
type SecAggLeader struct {
	eng secagg.Engine
	r   *secagg.Round
	key *sealkey.PrivateKey
	// consent is task.ConsentHash of the aggregator's task: leader shares
	// open only under it (envelope.ShareInfo).
	consent [32]byte
	round   uint64
	state   int

	agg      *secagg.Aggregate
	nonces   map[[16]byte]struct{}
	reports  int
	rejected map[secagg.Reason]int
	unopened int
}

// NewSecAggLeader returns the leader of round r (its number r.ID()),
// opening leader shares with key under the consent hash consent
// (task.ConsentHash of the aggregator's task: a share sealed under another
// consent text does not open and its report is rejected, counted as
// unopened) and preparing them with eng.
func NewSecAggLeader(key *sealkey.PrivateKey, consent [32]byte, r *secagg.Round, eng secagg.Engine) (*SecAggLeader, error) {
	if key == nil || r == nil || eng == nil || !eng.Leader() {
		return nil, errors.New("analysis: secagg leader needs a key, a round and a leader engine")
	}
	return &SecAggLeader{eng: eng, r: r, key: key, consent: consent, round: r.ID(), agg: eng.NewAggregate(),
		nonces: make(map[[16]byte]struct{}), rejected: make(map[secagg.Reason]int)}, nil
}

// Decided is one report prepared by the leader, waiting to be folded.
type Decided struct {
	m        secagg.Entry
	out      secagg.OutShare
	unopened bool
}

// Prepare opens one sealed leader share and decides its report with the
// helper's 'P' entry (PrepInit, PrepSharesToPrep, PrepNext). It changes
// nothing in l and is safe for concurrent use; a share that does not
// open (wrong length, key, round or consent text, or modified bytes) is
// rejected as of the wrong length (as the sealed bytes would be; counted
// by Fold as unopened).
func (l *SecAggLeader) Prepare(sealed []byte, helper secagg.Entry) Decided {
	pt, err := l.key.OpenLeaderShare(l.round, l.consent, sealed, l.r.LeaderShareSize())
	if err != nil {
		return Decided{m: secagg.Entry{Nonce: helper.Nonce, Reason: secagg.RejectWrongLength}, unopened: true}
	}
	own := l.eng.PrepInit(pt)
	m, out := l.eng.Decide(own, helper)
	return Decided{m: m, out: out}
}

// Fold records one decided report in the relay's order: an accepted
// report whose nonce an earlier accepted report of the round holds is
// rejected (the first complete report is kept; a rejected one claims no
// nonce), an accepted one is folded into the running aggregate and its
// output share dropped. It
// returns the report's 'M' entry for the helper.
func (l *SecAggLeader) Fold(d Decided) (secagg.Entry, error) {
	if l.state != secAggCollecting {
		return secagg.Entry{}, fmt.Errorf("analysis: report folded after the round closed: %w", secagg.ErrProtocol)
	}
	l.reports++
	if d.unopened {
		l.unopened++
	}
	m := d.m
	if m.Reason == secagg.Accepted {
		if _, dup := l.nonces[m.Nonce]; dup {
			m = secagg.Entry{Nonce: m.Nonce, Reason: secagg.RejectDuplicateNonce}
		} else if err := l.agg.Fold(d.out); err != nil {
			return secagg.Entry{}, err
		} else {
			// Only an accepted report claims its nonce: a copy of one
			// share that fails preparation never displaces the genuine
			// report that follows it (issue 18).
			l.nonces[m.Nonce] = struct{}{}
		}
	}
	if m.Reason != secagg.Accepted {
		l.rejected[m.Reason]++
	}
	return m, nil
}

// PrepareChunk prepares and folds reports in order (the sealed leader
// shares and the helper's 'P' message for the same reports) on workers
// goroutines, holding at most 2*workers prepared reports at a time, and
// returns the 'M' message of the chunk. A 'P' message that does not
// parse, or has another count, is a protocol violation (nothing folded).
func (l *SecAggLeader) PrepareChunk(sealed [][]byte, prep []byte, workers int) ([]byte, error) {
	entries, err := l.r.ParsePrep(prep)
	if err != nil {
		return nil, fmt.Errorf("analysis: the helper's prep shares: %w", err)
	}
	if len(entries) != len(sealed) {
		return nil, fmt.Errorf("analysis: %d prep shares for %d reports: %w", len(entries), len(sealed), secagg.ErrProtocol)
	}
	workers = max(workers, 1)
	out := make([]secagg.Entry, 0, len(sealed))
	window := make([]Decided, 2*workers)
	for lo := 0; lo < len(sealed); lo += len(window) {
		hi := min(lo+len(window), len(sealed))
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(workers, hi-lo) {
			wg.Go(func() {
				for i := range next {
					window[i-lo] = l.Prepare(sealed[i], entries[i])
				}
			})
		}
		for i := lo; i < hi; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		for i := range hi - lo {
			m, err := l.Fold(window[i])
			if err != nil {
				return nil, err
			}
			window[i] = Decided{}
			out = append(out, m)
		}
	}
	return l.r.MarshalVerdicts(out)
}

// Accepted returns the number of reports in the running aggregate.
func (l *SecAggLeader) Accepted() int { return l.agg.Count() }

// Reports returns the number of reports folded (accepted or not).
func (l *SecAggLeader) Reports() int { return l.reports }

// Unopened returns how many reports' leader shares did not open.
func (l *SecAggLeader) Unopened() int { return l.unopened }

// Rejected returns the rejected reports by reason.
func (l *SecAggLeader) Rejected() map[secagg.Reason]int {
	m := make(map[secagg.Reason]int, len(l.rejected))
	for k, v := range l.rejected {
		m[k] = v
	}
	return m
}

// Charge ends collection: with fewer than minBatch accepted reports it
// returns ErrBelowMinBatch and charges nothing; otherwise it calls charge
// with release(accepted) once, and only if charge returns nil is the
// round charged (Unshard allowed). Either way no report can be folded
// afterwards.
func (l *SecAggLeader) Charge(minBatch int, release func(accepted int) privacy.Release, charge func(privacy.Release) error) error {
	if l.state != secAggCollecting {
		return fmt.Errorf("analysis: charge called twice: %w", secagg.ErrProtocol)
	}
	l.state = secAggDone
	if n := l.agg.Count(); n < minBatch || n == 0 {
		return fmt.Errorf("%w: %d accepted, minimum %d", ErrBelowMinBatch, n, minBatch)
	}
	// The relay's floor on the share of rejected reports (roundspec.Floor,
	// the one rule both servers check): a round the relay will not
	// release is not charged here either.
	floor := roundspec.Floor{MinBatch: max(minBatch, 1), MaxRejectedShare: roundspec.DefaultMaxRejectedShare}
	if err := floor.Check(minBatch, l.agg.Count(), l.reports-l.agg.Count()); errors.Is(err, roundspec.ErrTooManyRejected) {
		return fmt.Errorf("%w: %w", ErrTooManyRejected, err)
	}
	if err := charge(release(l.agg.Count())); err != nil {
		return err
	}
	l.state = secAggCharged
	return nil
}

// Charged tells whether the round's release was charged and not yet
// unsharded.
func (l *SecAggLeader) Charged() bool { return l.state == secAggCharged }

// Unshard adds the leader's discrete Gaussian noise (src: noise.Secure()
// in production) to its aggregate share and unshards it with the relay's
// 'A' message (secagg.Round.Unshard), once, and only for a charged round.
// A malformed 'A', or one over another report count, is refused and
// leaves the round charged (the relay may resend a good one).
//
// Guarantee: the noisy sum is released only after its release was
// charged (Charge), with the leader's own noise (secagg.AggregateShare.
// AddNoise: rho-zCDP by this server's noise alone), at most once.
func (l *SecAggLeader) Unshard(src noise.Source, helperMsg []byte) (*secagg.Result, error) {
	if l.state != secAggCharged {
		return nil, fmt.Errorf("analysis: unshard of a round not charged: %w", secagg.ErrProtocol)
	}
	h, err := l.r.ParseAggregateShare(helperMsg)
	if err != nil {
		return nil, err
	}
	if h.Count() != l.agg.Count() {
		return nil, fmt.Errorf("analysis: aggregate share over %d reports, the leader accepted %d: %w", h.Count(), l.agg.Count(), secagg.ErrProtocol)
	}
	l.state = secAggDone
	own, err := l.agg.Share()
	if err != nil {
		return nil, err
	}
	if err := own.AddNoise(src); err != nil {
		return nil, err
	}
	return l.r.Unshard(own, helperMsg)
}

// MarshalAggregate encodes the leader's running aggregate (the exact,
// un-noised partial sum and its count), what a restart needs to unshard
// a charged round (RestoreSecAggLeader). It never leaves the server.
func (l *SecAggLeader) MarshalAggregate() ([]byte, error) { return l.agg.MarshalBinary() }

// RestoreSecAggLeader returns the charged leader of round r from
// MarshalAggregate's bytes: the caller vouches that the round's release
// is in the ledger.
func RestoreSecAggLeader(key *sealkey.PrivateKey, consent [32]byte, r *secagg.Round, eng secagg.Engine, charged []byte) (*SecAggLeader, error) {
	l, err := NewSecAggLeader(key, consent, r, eng)
	if err != nil {
		return nil, err
	}
	if l.agg, err = r.ParseAggregate(charged); err != nil {
		return nil, err
	}
	l.reports, l.state = l.agg.Count(), secAggCharged
	return l, nil
}

// ChargeSecAgg ends a round's collection (Charge) and, between the
// minimum-batch check and the charge, calls persist with the running
// aggregate (MarshalAggregate) so that a restart after the charge can
// resume the round. Errors: ErrBelowMinBatch (nothing charged), persist's
// or charge's error as is (nothing released).
func ChargeSecAgg(l *SecAggLeader, minBatch int, release func(int) privacy.Release,
	persist func(aggregate []byte) error, charge func(privacy.Release) error) error {
	return l.Charge(minBatch, release, func(rel privacy.Release) error {
		agg, err := l.MarshalAggregate()
		if err != nil {
			return err
		}
		if err := persist(agg); err != nil {
			return err
		}
		return charge(rel)
	})
}

// leaderState is MarshalState's content.
type leaderState struct {
	Aggregate []byte        `json:"aggregate"` // secagg.Aggregate.MarshalBinary
	Reports   int           `json:"reports"`
	Unopened  int           `json:"unopened"`
	Rejected  map[uint8]int `json:"rejected"`
	Nonces    []byte        `json:"nonces"` // 16 bytes each
}

// MarshalState encodes a collecting leader (running aggregate, counts and
// the nonces seen) for the aggregator's state directory, so that a
// restart in the middle of a streamed round resumes it
// (RestoreCollecting). It never leaves the server.
func (l *SecAggLeader) MarshalState() ([]byte, error) {
	if l.state != secAggCollecting {
		return nil, fmt.Errorf("analysis: only a collecting leader is persisted with its state: %w", secagg.ErrProtocol)
	}
	agg, err := l.agg.MarshalBinary()
	if err != nil {
		return nil, err
	}
	st := leaderState{Aggregate: agg, Reports: l.reports, Unopened: l.unopened, Rejected: make(map[uint8]int, len(l.rejected)),
		Nonces: make([]byte, 0, 16*len(l.nonces))}
	for k, v := range l.rejected {
		st.Rejected[uint8(k)] = v
	}
	for n := range l.nonces {
		st.Nonces = append(st.Nonces, n[:]...)
	}
	return json.Marshal(st)
}

// RestoreCollecting returns the collecting leader of round r from
// MarshalState's bytes.
func RestoreCollecting(key *sealkey.PrivateKey, consent [32]byte, r *secagg.Round, eng secagg.Engine, state []byte) (*SecAggLeader, error) {
	l, err := NewSecAggLeader(key, consent, r, eng)
	if err != nil {
		return nil, err
	}
	var st leaderState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("analysis: leader state: %w", err)
	}
	if len(st.Nonces)%16 != 0 || st.Reports < 0 || st.Unopened < 0 || st.Unopened > st.Reports {
		return nil, errors.New("analysis: leader state: inconsistent counts")
	}
	if l.agg, err = r.ParseAggregate(st.Aggregate); err != nil {
		return nil, err
	}
	l.reports, l.unopened = st.Reports, st.Unopened
	for k, v := range st.Rejected {
		l.rejected[secagg.Reason(k)] = v
	}
	for i := 0; i < len(st.Nonces); i += 16 {
		l.nonces[[16]byte(st.Nonces[i:i+16])] = struct{}{}
	}
	if l.agg.Count() > l.reports {
		return nil, errors.New("analysis: leader state: more accepted than reports")
	}
	return l, nil
}
