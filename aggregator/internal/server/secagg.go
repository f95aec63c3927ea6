package server

// The aggregator's side of secure summation (docs/secagg.md, steps 1, 5
// and 6): it fetches the relay's helper key for the announcement, prepares
// the leader shares of the relay's chunks with the relay's 'P' messages
// and charges the ledger at the relay's close (secagg_stream.go), and
// unshards the relay's noised aggregate share with its own.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/durable"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// helperKeyMismatch is the relay's detail when an announcement carries a
// RelayPub that is not its key (docs/secagg.md, "Keys and secrets").
const helperKeyMismatch = "helper key mismatch"

// secaggState is the aggregator's secure-summation state. The relay's key
// has its own lock; everything else is guarded by Server.procMu. The open
// round's collection and the charged round's pending aggregate are
// persisted at each step (CollectFile, PendingFile), so a restart resumes
// them (restoreCollect, restorePending).
type secaggState struct {
	keyMu    sync.Mutex
	relayPub [32]byte // the relay's helper key, once fetched
	haveKey  bool

	collect *secaggCollect // the open round's chunks (secagg_stream.go)
	pending *secaggPending // the charged round awaiting its aggregate
	last    *secaggLast    // the last finished round's frames (identical re-sends)
	// noise is the aggregator's noise source for tests (set under
	// procMu); nil, the production value, draws from noise.Secure().
	noise noise.Source

	sigmaOnce sync.Once // the operator page's calibrated σ
	sigma     float64
	sigmaErr  error
}

// secaggPending is a charged round whose 'M' was answered: the leader
// holds the accepted reports' aggregate share until the relay's 'A'.
type secaggPending struct {
	round  int
	sr     *secagg.Round
	leader *analysis.SecAggLeader
	digest string // of the close frame
	reply  []byte // the SecAggCharged frame answered (ok)
	rec    checkpoint.RoundRecord
	until  time.Time // no aggregate by then: the round is lost
}

// secaggLast remembers the last secure-summation round answered, so that
// an identical re-send of its close or aggregate gets its answer again.
type secaggLast struct {
	round       int
	closeDigest string
	closeReply  []byte
	aggDigest   string
}

func digestOf(frame []byte) string {
	d := sha256.Sum256(frame)
	return hex.EncodeToString(d[:])
}

// prepFrame encodes a SecAggPrep without a message (a chunk refused or
// invalid).
func prepFrame(round uint64, status uint8) []byte {
	b, err := (&wire.SecAggPrep{Round: round, Status: status}).MarshalBinary()
	if err != nil {
		return nil // round 0: no frame
	}
	return b
}

// SecAggAggregateIntake is POST /v1/secagg/aggregate after authentication
// (docs/secagg.md step 6): for the round whose close was charged and
// answered ok, it noises its own aggregate share, unshards it with the
// relay's 'A' and moves the model by ServerLR times the noisy mean.
//
// Guarantee: the leader's aggregate share is released into the sum only
// with its own discrete Gaussian noise (noise.Secure()), so the model
// update is a post-processing of a release the ledger already charged
// (SecAggCloseIntake); it happens at most once per round (the leader hands
// out its aggregate share once, and the pending round is cleared before
// anything else can fail).
func (s *Server) SecAggAggregateIntake(frame []byte) api.IntakeAnswer {
	dig := digestOf(frame)
	a, err := wire.ParseSecAggAggregate(frame)
	if err != nil {
		_, round, _ := wire.PeekRound(frame)
		return api.IntakeAnswer{Round: round, Outcome: api.IntakeInvalid, Detail: "invalid secagg aggregate: " + err.Error()}
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	r := int(a.Round)
	ans := api.IntakeAnswer{Round: a.Round}
	p := s.sa.pending
	if p == nil || p.round != r || a.Round > uint64(s.st.Round+1) {
		if l := s.sa.last; l != nil && l.round == r && l.aggDigest == dig {
			ans.Outcome, ans.Detail = api.IntakeDuplicate, fmt.Sprintf("round %d already applied", r)
			return ans
		}
		ans.Outcome = api.IntakeObsolete
		if rec := s.record(r); rec != nil {
			ans.Detail = fmt.Sprintf("round %d already closed: %s", r, rec.Status)
		} else {
			ans.Detail = fmt.Sprintf("round %d has no charged close here", r)
		}
		s.log.Info("secagg aggregate ignored", "round", r, "reason", ans.Detail)
		return ans
	}
	// Check the relay's share before taking the leader's own, which can
	// be taken only once: a malformed 'A' leaves the round pending.
	h, err := p.sr.ParseAggregateShare(a.Share)
	if err != nil {
		ans.Outcome, ans.Detail = api.IntakeInvalid, "invalid aggregate share: "+err.Error()
		return ans
	}
	if h.Count() != p.leader.Accepted() {
		ans.Outcome, ans.Detail = api.IntakeInvalid, fmt.Sprintf("aggregate share over %d reports, the leader accepted %d", h.Count(), p.leader.Accepted())
		return ans
	}
	start := time.Now()
	model, err := s.unshardInto(p, a.Share)
	if err != nil {
		s.loseSecAgg(p, "charged, not applied: "+err.Error())
		ans.Outcome, ans.Detail = api.IntakeInvalid, err.Error()
		return ans
	}
	rec := p.rec
	if rec.EpsilonTightest == nil { // resumed after a restart (restorePending)
		s.fillEpsilon(&rec)
	}
	rec.Status, rec.FinishedAt = checkpoint.StatusOK, time.Now()
	rec.Seconds += time.Since(start).Seconds()
	acc, aerr := logreg.Accuracy(model, s.cfg.Test)
	loss, lerr := logreg.Loss(model, s.cfg.Test, 0)
	if aerr == nil && lerr == nil {
		rec.Accuracy, rec.Loss = accounting.FinitePtr(acc), accounting.FinitePtr(loss)
	} else {
		s.log.Error("evaluation failed", "round", r, "err", errors.Join(aerr, lerr))
	}
	s.sa.pending = nil
	s.sa.last = &secaggLast{round: r, closeDigest: p.digest, closeReply: p.reply, aggDigest: dig}
	s.commit(func(c *checkpoint.State) {
		c.Model = model
		c.History = append(c.History, rec)
		c.Round, c.Open, c.Charging = r, nil, nil
	})
	s.removePending()
	s.notify()
	args := []any{"round", r, "status", rec.Status, "n", rec.N, "reports", rec.Reports, "seconds", rec.Seconds}
	if rec.Accuracy != nil {
		args = append(args, "accuracy", *rec.Accuracy, "loss", *rec.Loss)
	}
	if rec.EpsilonTightest != nil {
		args = append(args, "epsilon", *rec.EpsilonTightest, "method", rec.Method)
	}
	s.log.Info("round finished", args...)
	ans.Outcome = api.IntakeAccepted
	return ans
}

// unshardInto takes the leader's aggregate share, adds the aggregator's
// discrete Gaussian noise, unshards with the relay's 'A' and returns the
// current model moved by ServerLR times the noisy mean (not yet stored).
// The caller holds procMu; p cannot be unsharded again afterwards.
func (s *Server) unshardInto(p *secaggPending, helperMsg []byte) ([]float64, error) {
	src := s.sa.noise
	if src == nil {
		src = noise.Secure()
	}
	res, err := p.leader.Unshard(src, helperMsg)
	if err != nil {
		return nil, err
	}
	model := slices.Clone(s.st.Model)
	if len(res.Mean) != len(model) {
		return nil, fmt.Errorf("server: unsharded mean has %d coordinates, the model %d", len(res.Mean), len(model))
	}
	for j, v := range res.Mean {
		model[j] += s.rounds().serverLR * v
	}
	for _, v := range model {
		if !finiteF(v) {
			return nil, errors.New("model update is not finite")
		}
	}
	return model, nil
}

// loseSecAgg closes a charged secure-summation round without applying it:
// the ledger keeps its charge, the model stays, the next round follows.
// The caller holds procMu.
func (s *Server) loseSecAgg(p *secaggPending, why string) {
	rec := p.rec
	rec.Status, rec.Detail, rec.FinishedAt = checkpoint.StatusLost, why, time.Now()
	// The relay's later frames for the round are obsolete.
	s.sa.pending, s.sa.last = nil, nil
	s.log.Warn("secagg round lost: charged, not applied", "round", p.round, "reason", why)
	s.commit(func(c *checkpoint.State) {
		c.History = append(c.History, rec)
		c.Round, c.Open, c.Charging = p.round, nil, nil
	})
	s.removePending()
	s.notify()
}

// secaggPendingUntil returns when the pending aggregate of round expires
// (zero if the round has none).
func (s *Server) secaggPendingUntil(round int) time.Time {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if p := s.sa.pending; p != nil && p.round == round {
		return p.until
	}
	return time.Time{}
}

// extendSecAggPending moves the expiry of round's pending aggregate to
// until (nothing if the round has none).
func (s *Server) extendSecAggPending(round int, until time.Time) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if p := s.sa.pending; p != nil && p.round == round {
		p.until = until
	}
}

// loseSecAggIfPending records round lost if it is charged and awaiting its
// aggregate, and reports whether it did. The caller holds procMu.
func (s *Server) loseSecAggIfPending(round int, why string) bool {
	p := s.sa.pending
	if p == nil || p.round != round {
		return false
	}
	s.loseSecAgg(p, why)
	return true
}

// relayKey returns the relay's helper key (docs/secagg.md, "Keys and
// secrets"): GET {relay}/v1/helper-key with the bearer token, 32 raw
// bytes, cached until forgetRelayKey.
func (s *Server) relayKey(ctx context.Context) ([32]byte, error) {
	s.sa.keyMu.Lock()
	defer s.sa.keyMu.Unlock()
	if s.sa.haveKey {
		return s.sa.relayPub, nil
	}
	var k [32]byte
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.RelayURL, "/")+"/v1/helper-key", nil)
	if err != nil {
		return k, fmt.Errorf("server: relay helper key: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return k, fmt.Errorf("server: relay helper key: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return k, fmt.Errorf("server: relay helper key: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return k, fmt.Errorf("server: relay helper key: relay answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if len(body) != len(k) {
		return k, fmt.Errorf("server: relay helper key of %d bytes, want %d", len(body), len(k))
	}
	copy(k[:], body)
	if k == ([32]byte{}) {
		return k, errors.New("server: relay helper key is all zero")
	}
	s.sa.relayPub, s.sa.haveKey = k, true
	s.log.Info("fetched the relay's helper key", "key", hex.EncodeToString(k[:8]))
	return k, nil
}

// forgetRelayKey drops the cached helper key (the relay refused an
// announcement with "helper key mismatch": it has a new key).
func (s *Server) forgetRelayKey() {
	s.sa.keyMu.Lock()
	s.sa.haveKey = false
	s.sa.keyMu.Unlock()
}

// isHelperKeyMismatch reports whether the relay refused an announcement
// because its RelayPub is not the relay's key.
func isHelperKeyMismatch(err error) bool {
	var re *relayError
	return errors.As(err, &re) && strings.Contains(re.body, helperKeyMismatch)
}

// operatorSigma is the σ the operator page offers secure summation with:
// the current one if the rounds are secure summation, else calibrated to
// the ledger's target over Config.Rounds (params.DefaultSecAggRounds if 0) at
// the current check-in rate, computed once.
func (s *Server) operatorSigma(rc *roundConfig) (float64, error) {
	if rc.params.Protocol == wire.ProtocolSecAgg {
		return rc.params.Sigma, nil
	}
	cfg := s.cfg
	s.sa.sigmaOnce.Do(func() {
		rounds := cfg.Rounds
		if rounds == 0 {
			rounds = params.DefaultSecAggRounds
		}
		eps, delta := s.ledger.Target()
		s.sa.sigma, s.sa.sigmaErr = params.SecAggSigma(int(rc.params.D), cfg.ExpectedN, params.Choice{Randomizer: wire.RandomizerLaplace.String(),
			MinBatch: int(rc.params.MinBatch), CheckIn: rc.params.CheckInP}, rounds, eps, delta)
	})
	return s.sa.sigma, s.sa.sigmaErr
}

// secaggBodyLimits bounds the request bodies of POST /v1/secagg/chunk and
// /v1/secagg/aggregate for the current parameters (the largest frames the
// round's Quota allows: a chunk holds at most the whole round).
func (s *Server) secaggBodyLimits() (chunk, aggregate int64) {
	rc := s.rounds()
	ps, p := rc.proto, rc.params
	if !ps.SecAgg() {
		return 1 << 10, 1 << 10
	}
	sr, err := ps.Spec.SecAggRound(1)
	if err != nil {
		return 1 << 10, 1 << 10
	}
	q := int64(p.Quota)
	chunk = 22 + q*int64(ps.LeaderSealed) + 4 + 64 + q*int64(sr.PrepShareSize())
	aggregate = 14 + 64 + 16*int64(p.D)
	return chunk, aggregate
}

// errPersist marks a failure to persist the round before its charge
// (nothing was charged; answered 500, the relay resends).
var errPersist = errors.New("persisting the prepared round")

// PendingFile is the name, inside Config.StateDir, of the prepared
// secure-summation round: the leader's running aggregate, its
// SecAggCharged reply and its record, written durably before the charge so that a restart
// between the charge and the relay's aggregate share resumes the round
// (docs/secagg.md, "Crash safety").
const PendingFile = "secagg-pending.json"

// pendingFile is PendingFile's content.
type pendingFile struct {
	Round     int                    `json:"round"`
	Digest    string                 `json:"digest"`
	Reply     []byte                 `json:"reply"`
	Rec       checkpoint.RoundRecord `json:"record"`
	Aggregate []byte                 `json:"aggregate"` // secagg.Aggregate.MarshalBinary
}

func (s *Server) pendingPath() string { return filepath.Join(s.cfg.StateDir, PendingFile) }

func (s *Server) savePending(p *pendingFile) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return durable.WriteFile(s.pendingPath(), b, 0o600)
}

// removePending deletes PendingFile (the round ended, or was never
// charged).
func (s *Server) removePending() {
	if err := os.Remove(s.pendingPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("cannot remove the prepared secagg round", "err", err)
	}
}

// restorePending resumes a charged secure-summation round whose aggregate
// share had not arrived when the aggregator stopped: PendingFile names
// the open round, the ledger holds its charge and the checkpoint has not
// closed it. The round stays open and waits BatchGrace from now for the
// relay's (re-sent) aggregate share. Anything else deletes the file: a
// round not charged was never answered with 'M'. Called by New before
// reconcile, which then leaves the round open.
func (s *Server) restorePending() {
	b, err := os.ReadFile(s.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	defer func() {
		if s.sa.pending == nil {
			s.removePending()
		}
	}()
	var p pendingFile
	if err != nil || json.Unmarshal(b, &p) != nil {
		s.log.Error("unreadable prepared secagg round; ignored", "err", err)
		return
	}
	charged := false
	for _, rel := range s.ledger.Releases() {
		if rel.Round == p.Round {
			charged = true
		}
	}
	if !charged || p.Round <= s.st.Round || s.st.Open == nil || s.st.Open.Round != p.Round {
		return
	}
	rc := s.rounds()
	if !rc.proto.SecAgg() {
		return
	}
	sr, err := rc.proto.Spec.SecAggRound(uint64(p.Round))
	if err != nil {
		return
	}
	vk, err := secagg.DeriveVerifyKey([]byte(s.cfg.Token), uint64(p.Round))
	if err != nil {
		return
	}
	eng, err := secagg.NewEngine(sr, true, vk)
	if err != nil {
		return
	}
	leader, err := analysis.RestoreSecAggLeader(s.key, sr, eng, p.Aggregate)
	if err != nil {
		s.log.Error("prepared secagg round does not restore; it is recorded lost", "round", p.Round, "err", err)
		return
	}
	s.sa.pending = &secaggPending{round: p.Round, sr: sr, leader: leader, digest: p.Digest, reply: p.Reply, rec: p.Rec,
		until: time.Now().Add(s.cfg.BatchGrace)}
	s.log.Info("resumed a charged secure-summation round; waiting for the relay's aggregate share", "round", p.Round,
		"accepted", leader.Accepted())
}

// resumedRound is the charged round restorePending resumed (0: none):
// reconcile leaves it open.
func (s *Server) resumedRound() int {
	if s.sa.pending == nil {
		return 0
	}
	return s.sa.pending.round
}
