package volunteer

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Event kinds the browser client adds to the client core's
// (client.EventKind.String: "announcement", "rejected", "sat-out",
// "checked-in", "training", "sent", "privacy", "ack", "failed", "connected",
// "disconnected").
const (
	// KindKey: the aggregator key was fetched and checked (Fingerprint;
	// Pinned is false when it is trusted on first use).
	KindKey = "key"
	// KindData: the local examples are ready (Examples).
	KindData = "data"
	// KindNotice: something asked for is not supported (Message).
	KindNotice = "notice"
	// KindError: start failed (Error); the promise is rejected too.
	KindError = "error"
	// KindStopped: the client stopped (Error if not by stop()).
	KindStopped = "stopped"
)

// Record is one event as the page receives it (docs/web.md: {kind, round,
// progress, messages, bytes, noiseStd, trainMs, encodeMs, sealMs,
// accountMs, epsilon, rounds, fingerprint, error}). Epsilon, Delta and Rounds are always the volunteer's own totals
// so far in this page (every start of the page's session included), so the
// page can show them from any event.
type Record struct {
	Kind     string
	Round    uint64
	Progress float64
	Messages int
	Bytes    int // CheckIn plus all Report frames of the round
	NoiseStd float64
	// Work is the round's cost on this device, phase by phase, in ms
	// (sent: client.Work).
	TrainMs, EncodeMs, SealMs, AccountMs float64
	Epsilon                              float64
	Delta                                float64
	Rounds                               int
	Fingerprint                          string
	Pinned                               bool
	Examples                             int
	BackoffMs                            float64
	Message                              string
	Error                                string
	// Correct, Evaluated and Accuracy are the volunteer's own evaluation
	// of the announced model (evaluated: client.EventEvaluated), shown on
	// its page only: what leaves the device is secret-shared.
	Correct, Evaluated int
	Accuracy           float64
}

// Map returns r as the plain object handed to JavaScript (js.ValueOf accepts
// a map of strings, float64 and bools).
func (r Record) Map() map[string]any {
	return map[string]any{
		"kind":        r.Kind,
		"round":       float64(r.Round),
		"progress":    r.Progress,
		"messages":    float64(r.Messages),
		"bytes":       float64(r.Bytes),
		"noiseStd":    r.NoiseStd,
		"trainMs":     r.TrainMs,
		"encodeMs":    r.EncodeMs,
		"sealMs":      r.SealMs,
		"accountMs":   r.AccountMs,
		"epsilon":     r.Epsilon,
		"delta":       r.Delta,
		"rounds":      float64(r.Rounds),
		"fingerprint": r.Fingerprint,
		"pinned":      r.Pinned,
		"examples":    float64(r.Examples),
		"backoffMs":   r.BackoffMs,
		"message":     r.Message,
		"error":       r.Error,
		"correct":     float64(r.Correct),
		"evaluated":   float64(r.Evaluated),
		"accuracy":    r.Accuracy,
	}
}

// Session is the state a page keeps across blanket.start / blanket.stop:
// each start builds a new client.Client (the local examples may have
// changed), so the Session carries the volunteer's own privacy totals and
// the last round decided from one Client to the next. Its methods are safe
// for concurrent use.
type Session struct {
	mu sync.Mutex
	// done: the totals of the clients that finished.
	doneEps, doneDelta float64
	doneRounds         int
	// cur: the last EventPrivacy of the running client.
	curEps, curDelta float64
	curRounds        int
	floor            uint64
}

// Privacy returns the volunteer's own (ε, δ) over every round it reported
// in during the session, and the number of those rounds. Each report is
// (ε_l, δ_l)-LDP (FLAME Lemma 2) and reports of different Clients compose
// by basic composition (Dwork and Roth 2014, Theorem 3.16) exactly as one
// Client's do (client.Client.Privacy), so the totals add.
func (s *Session) Privacy() (eps, delta float64, rounds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doneEps + s.curEps, s.doneDelta + s.curDelta, s.doneRounds + s.curRounds
}

// Floor returns the highest round any finished client of the session
// decided on; announcements up to it must be ignored (SkipDecided).
func (s *Session) Floor() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floor
}

// Finish folds a client that stopped running into the session's totals.
func (s *Session) Finish(c *client.Client) {
	eps, delta, rounds := c.Privacy()
	last := c.LastRound()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doneEps += eps
	s.doneDelta += delta
	s.doneRounds += rounds
	s.curEps, s.curDelta, s.curRounds = 0, 0, 0
	s.floor = max(s.floor, last)
}

// Record converts an event of the running client (set as its
// client.Config.OnEvent) to the page's form.
func (s *Session) Record(e client.Event) Record {
	s.mu.Lock()
	if e.Kind == client.EventPrivacy {
		s.curEps, s.curDelta, s.curRounds = e.Epsilon, e.Delta, e.Rounds
	}
	s.mu.Unlock()
	r := s.Note(e.Kind.String())
	r.Round = e.Round
	r.Progress = e.Progress
	if e.Kind == client.EventSent {
		r.Messages = e.Messages
		r.Bytes = wire.CheckInSize + e.Messages*e.FrameBytes
		r.NoiseStd = e.NoiseStd
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		r.TrainMs, r.EncodeMs, r.SealMs, r.AccountMs = ms(e.Work.Train), ms(e.Work.Encode), ms(e.Work.Seal), ms(e.Work.Account)
	}
	if e.Kind == client.EventAck {
		r.Messages = e.Received
	}
	if e.Kind == client.EventEvaluated {
		r.Correct, r.Evaluated, r.Accuracy = e.Correct, e.Evaluated, e.Accuracy
	}
	r.BackoffMs = float64(e.Backoff.Milliseconds())
	if e.Err != nil {
		r.Error = e.Err.Error()
	}
	return r
}

// Note returns a record of the browser client's own kind carrying the
// session's privacy totals.
func (s *Session) Note(kind string) Record {
	eps, delta, rounds := s.Privacy()
	return Record{Kind: kind, Epsilon: eps, Delta: delta, Rounds: rounds}
}

// Stopped returns the KindStopped record for the error RunWithReconnect
// returned: no Error when it ended by stop() (context cancellation).
func (s *Session) Stopped(err error) Record {
	r := s.Note(KindStopped)
	if err != nil && !errors.Is(err, context.Canceled) {
		r.Error = err.Error()
	}
	return r
}

// SkipDecided wraps t so that Recv drops announcements of rounds up to
// floor, the last round an earlier Client of the session decided on: a new
// Client starts with no memory of rounds, and the relay re-sends the open
// round to a new connection, so without this a volunteer who stops and
// starts again within a round could report twice in it. Only the
// (unauthenticated) round field is read; dropping is always safe, since the
// client core still verifies every announcement it acts on.
func SkipDecided(t client.Transport, floor uint64) client.Transport {
	if floor == 0 {
		return t
	}
	return &skipDecided{Transport: t, floor: floor}
}

type skipDecided struct {
	client.Transport
	floor uint64
}

func (s *skipDecided) Recv(ctx context.Context) ([]byte, error) {
	for {
		f, err := s.Transport.Recv(ctx)
		if err != nil {
			return f, err
		}
		if len(f) >= wire.HeaderSize+8 && f[0] == wire.Version && wire.Type(f[1]) == wire.TypeAnnouncement &&
			binary.BigEndian.Uint64(f[wire.HeaderSize:]) <= s.floor {
			continue
		}
		return f, nil
	}
}
