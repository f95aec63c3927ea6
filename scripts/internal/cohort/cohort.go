// Package cohort runs many Blanket volunteers in one process against a
// relay: the load generator behind scripts/cohort, exported so tests can run
// a cohort in-process. Every volunteer is a shared/client.Client on its own
// goroutine with its own transport, reconnecting with backoff, holding a
// disjoint IID share of the standardized training digits (a slice of one
// array shared by the cohort, not a copy of its own).
//
// The volunteers check in as soon as a round is announced but prepare
// their reports (train, shard or encode, seal) through one client.Pool of
// Config.Workers slots: on a machine with fewer cores than volunteers they
// finish one after another at the machine's pace, each report reaching the
// relay as soon as it is sealed, instead of all of them finishing together
// late; and only Workers rounds hold their transient buffers (about 44 MB
// each for secure summation at d = 7850: BenchmarkRoundSecAgg in
// shared/client) at a time. BenchmarkVolunteerMemory measures the memory
// per volunteer with and without the pool.
package cohort

import (
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/wsclient"
	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Config configures a cohort. Run validates it.
type Config struct {
	// Relay is the relay's websocket URL, e.g. ws://127.0.0.1:8081/ws.
	Relay string
	// Origin is sent as the Origin header ("" for none).
	Origin string
	// Key is the pinned aggregator key (see FetchKey).
	Key envelope.PublicKey
	// Clients is the number of volunteers (>= 1) and PerUser the examples
	// each holds (>= 1); Clients*PerUser must not exceed the training set.
	Clients int
	PerUser int
	// Dataset names the data (sample.Name, the embedded digits, by
	// default) and DataDir where other datasets live (see sample.Open).
	Dataset string
	DataDir string
	// Shares, if set, are the volunteers' data (one per client, e.g. a
	// task's simulation rows dealt by taskdata.Shares); Dataset, DataDir
	// and PerUser are then unused.
	Shares []logreg.Dataset
	// Answers, if set, are each volunteer's survey answers (one list per
	// client, task.Task.SurveyAnswers of its row: client.Config.Answers),
	// for a form task whose rounds count them.
	Answers [][]int
	// Seed fixes the partition of the examples among volunteers.
	Seed uint64
	// SeededNoise derives each volunteer's randomness (coin, training,
	// privacy noise) from Seed instead of crypto/rand. For reproducible
	// tests only: seeded noise gives no privacy.
	SeededNoise bool
	// Train is the local training (zero value: logreg.FLAMEConfig(10, 0.1)).
	Train logreg.TrainConfig
	// Backoff is the reconnect schedule (zero value: client.DefaultBackoff).
	Backoff client.Backoff
	// Dial opens a transport (nil: wsclient.Dial).
	Dial func(ctx context.Context, url, origin string) (client.Transport, error)
	// Logger receives the volunteers' diagnostics (nil: discarded).
	Logger *slog.Logger
	// Out receives one summary line per round observed (nil: none).
	Out io.Writer
	// Personal, if set, gives volunteer i's privacy level
	// (client.Config.PersonalFraction; APES: its own budget).
	Personal func(i int) float64
	// Workers is how many volunteers prepare a report at once (a
	// client.Pool shared by the cohort); 0 means DefaultWorkers(), a
	// negative value no bound (every volunteer at once).
	Workers int
	// Consent is task.ConsentHash of the consent text the volunteers
	// agree to (client.Config.Consent: secure summation's leader shares
	// are sealed under it). Zero: Run reads the text the relay's join
	// page shows (FetchConsent of the relay's GET /api/task), waiting for
	// it as a volunteer would; with a custom Dial (a test's fake relay)
	// zero stays zero (no consent text: a real aggregator rejects the
	// shares).
	Consent [32]byte
}

// DefaultWorkers is the cohort's default pool: two reports in preparation
// per core (GOMAXPROCS), so the cores stay busy while a volunteer sends.
func DefaultWorkers() int { return 2 * runtime.GOMAXPROCS(0) }

// RoundSummary aggregates what the cohort saw of one round.
type RoundSummary struct {
	Round     uint64
	Announced int // volunteers that accepted the announcement
	Rejected  int // volunteers that rejected it
	CheckedIn int // coins that came up heads
	SatOut    int
	Failed    int // checked in but could not build a report
	Reports   int // complete reports handed to the transport
	Messages  int // Report frames sent
	Bytes     int // bytes of Report frames sent
	AcksOK    int
	AcksError int
	// ReportAcks counts the accepted acks of report frames (an Ack
	// counting at least one message received; a check-in's counts none):
	// in secure summation, the reports the relay told their volunteers
	// are in the round.
	ReportAcks int
	// MaxEpsilon is the largest own (local-model) ε among the volunteers
	// that reported in this round, over all their rounds so far.
	MaxEpsilon float64
}

// String is the one-line summary printed per round.
func (s RoundSummary) String() string {
	eps := "-"
	if s.MaxEpsilon > 0 {
		eps = fmt.Sprintf("%.3g", s.MaxEpsilon)
	}
	return fmt.Sprintf("round %d: announced to %d, joined %d, sat out %d, failed %d, reports %d (%d messages, %d bytes), acks %d ok %d refused, rejected %d, max own eps %s",
		s.Round, s.Announced, s.CheckedIn, s.SatOut, s.Failed, s.Reports, s.Messages, s.Bytes, s.AcksOK, s.AcksError, s.Rejected, eps)
}

func (cfg *Config) fill() error {
	if cfg.Relay == "" {
		return errors.New("cohort: no relay URL")
	}
	if err := cfg.Key.Validate(); err != nil {
		return fmt.Errorf("cohort: aggregator key: %w", err)
	}
	if cfg.Clients < 1 || cfg.PerUser < 1 {
		return fmt.Errorf("cohort: need clients >= 1 and examples per user >= 1, got %d and %d", cfg.Clients, cfg.PerUser)
	}
	if cfg.Dataset == "" {
		cfg.Dataset = sample.Name
	}
	if cfg.Train == (logreg.TrainConfig{}) {
		cfg.Train = logreg.FLAMEConfig(10, 0.1)
	}
	if cfg.Backoff == (client.Backoff{}) {
		cfg.Backoff = client.DefaultBackoff()
	}
	if cfg.Dial == nil {
		cfg.Dial = wsclient.Dial
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers()
	}
	return nil
}

// LoadShares opens the named dataset, deals its training examples IID to
// train.Len()/perUser users, from seed, and returns the first clients
// users' shares, preprocessed as the built-in digits task says
// (task.Task.FitPrep: its feature map, then the public standardization;
// the aggregator evaluates with the same). The shares are consecutive
// slices of one array holding exactly the examples dealt, so the cohort
// holds one copy of its data.
func LoadShares(name, dir string, clients, perUser int, seed uint64) ([]logreg.Dataset, error) {
	train, _, err := sample.Open(name, dir)
	if err != nil {
		return nil, fmt.Errorf("cohort: dataset %q: %w", name, err)
	}
	// The built-in digits task's preprocessing (task.Task.FitPrep: its
	// feature map, then the public standardization of the mapped training
	// part), the one the aggregator evaluates with, applied below to the
	// examples dealt only.
	tk, err := task.Digits()
	if err != nil {
		return nil, err
	}
	prep, err := tk.FitPrep(train)
	if err != nil {
		return nil, fmt.Errorf("cohort: %w", err)
	}
	if perUser < 1 || clients < 1 || clients*perUser > train.Len() {
		return nil, fmt.Errorf("cohort: %d clients x %d examples exceed the %d training examples", clients, perUser, train.Len())
	}
	parts, err := dataset.PartitionIID(train.Len(), train.Len()/perUser, noise.NewSeeded(seed))
	if err != nil {
		return nil, fmt.Errorf("cohort: partition: %w", err)
	}
	var idx []int
	for _, p := range parts[:clients] {
		idx = append(idx, p...)
	}
	all, err := train.Subset(idx)
	if err != nil {
		return nil, fmt.Errorf("cohort: %w", err)
	}
	if all, err = prep.Apply(all); err != nil {
		return nil, fmt.Errorf("cohort: %w", err)
	}
	f := all.Features
	out := make([]logreg.Dataset, clients)
	at := 0
	for i := range out {
		n := len(parts[i])
		s := &dataset.Set{X: all.X[at*f : (at+n)*f : (at+n)*f], Y: all.Y[at : at+n : at+n], Features: f, Classes: all.Classes}
		if out[i], err = client.LocalDataset(s); err != nil {
			return nil, fmt.Errorf("cohort: user %d: %w", i, err)
		}
		at += n
	}
	return out, nil
}

// Run starts the cohort and blocks until ctx ends (Ctrl-C), then waits for
// every volunteer to stop and returns the per-round summaries in round
// order. Ending by ctx is the normal way to stop and returns a nil error.
func Run(ctx context.Context, cfg Config) ([]RoundSummary, error) {
	// A real relay (no custom Dial: fill sets wsclient.Dial) serves the
	// study's consent text; a test's fake relay does not.
	realRelay := cfg.Dial == nil
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	shares := cfg.Shares
	if shares == nil {
		var err error
		if shares, err = LoadShares(cfg.Dataset, cfg.DataDir, cfg.Clients, cfg.PerUser, cfg.Seed); err != nil {
			return nil, err
		}
	} else if len(shares) != cfg.Clients {
		return nil, fmt.Errorf("cohort: %d shares for %d clients", len(shares), cfg.Clients)
	}
	if cfg.Consent == ([32]byte{}) && realRelay {
		c, err := waitConsent(ctx, cfg.Relay, cfg.Logger)
		if err != nil {
			return nil, err
		}
		cfg.Consent = c
	}
	var err error
	col := newCollector(cfg.Out)
	var pool *client.Pool
	if cfg.Workers > 0 {
		pool = client.NewPool(cfg.Workers)
	}
	clients := make([]*client.Client, cfg.Clients)
	for i := range clients {
		var src noise.Source // nil: crypto/rand
		if cfg.SeededNoise {
			src = noise.NewSeeded(cfg.Seed ^ (uint64(i+1) * 0x9e3779b97f4a7c15))
		}
		cc := client.Config{
			Consent: cfg.Consent,
			Pinned:  cfg.Key,
			Data:    shares[i],
			Train:   cfg.Train,
			Source:  src,
			Logger:  cfg.Logger.With("client", i),
			OnEvent: col.add,
			Pool:    pool,
		}
		if cfg.Personal != nil {
			cc.PersonalFraction = cfg.Personal(i)
		}
		if i < len(cfg.Answers) {
			cc.Answers = cfg.Answers[i]
		}
		clients[i], err = client.New(cc)
		if err != nil {
			return nil, fmt.Errorf("cohort: client %d: %w", i, err)
		}
	}
	dial := func(ctx context.Context) (client.Transport, error) { return cfg.Dial(ctx, cfg.Relay, cfg.Origin) }
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.RunWithReconnect(ctx, dial, cfg.Backoff)
		}()
	}
	wg.Wait()
	sums := col.finish()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return sums, fmt.Errorf("cohort: client %d: %w", i, err)
		}
	}
	return sums, nil
}

// collector aggregates events per round and prints a round's line once a
// later round has been announced (or at the end).
type collector struct {
	mu      sync.Mutex
	out     io.Writer
	rounds  map[uint64]*RoundSummary
	printed uint64 // rounds <= printed have been printed
}

func newCollector(out io.Writer) *collector {
	return &collector{out: out, rounds: map[uint64]*RoundSummary{}}
}

func (c *collector) add(e client.Event) {
	if e.Round == 0 {
		return // connection events and malformed announcements
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.rounds[e.Round]
	if s == nil {
		s = &RoundSummary{Round: e.Round}
		c.rounds[e.Round] = s
	}
	switch e.Kind {
	case client.EventAnnouncement:
		s.Announced++
		c.flush(e.Round - 1)
	case client.EventRejected:
		if !errors.Is(e.Err, client.ErrStale) {
			s.Rejected++
		}
	case client.EventCheckedIn:
		s.CheckedIn++
	case client.EventSatOut:
		s.SatOut++
	case client.EventFailed:
		s.Failed++
	case client.EventSent:
		s.Reports++
		s.Messages += e.Messages
		s.Bytes += e.Messages * e.FrameBytes
	case client.EventAck:
		if e.Err == nil {
			s.AcksOK++
			if e.Received >= 1 {
				s.ReportAcks++
			}
		} else {
			s.AcksError++
		}
	case client.EventPrivacy:
		s.MaxEpsilon = math.Max(s.MaxEpsilon, e.Epsilon)
	}
}

// flush prints the rounds up to r not printed yet; c.mu is held.
func (c *collector) flush(r uint64) {
	if c.out == nil || r <= c.printed {
		return
	}
	var keys []uint64
	for k := range c.rounds {
		if k > c.printed && k <= r {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintln(c.out, c.rounds[k].String())
	}
	c.printed = r
}

// finish prints what is left and returns every round's summary.
func (c *collector) finish() []RoundSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	var maxRound uint64
	for k := range c.rounds {
		maxRound = max(maxRound, k)
	}
	c.flush(maxRound)
	out := make([]RoundSummary, 0, len(c.rounds))
	for _, s := range c.rounds {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b RoundSummary) int {
		switch {
		case a.Round < b.Round:
			return -1
		case a.Round > b.Round:
			return 1
		}
		return 0
	})
	return out
}

// FetchKey reads the aggregator's public key from GET base/api/key (JSON
// {"sign","hpke","fingerprint"}; envelope.PublicKey.UnmarshalJSON checks the
// fingerprint against the keys). If want is not empty the key's fingerprint
// must equal it: that is the pin; without it the key is trusted on first
// use and its fingerprint should be compared with the one the aggregator
// printed.
func FetchKey(ctx context.Context, hc *http.Client, base, want string) (envelope.PublicKey, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/key", nil)
	if err != nil {
		return envelope.PublicKey{}, fmt.Errorf("cohort: key request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return envelope.PublicKey{}, fmt.Errorf("cohort: fetch key: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return envelope.PublicKey{}, fmt.Errorf("cohort: fetch key: HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return envelope.PublicKey{}, fmt.Errorf("cohort: fetch key: %w", err)
	}
	var k envelope.PublicKey
	if err := json.Unmarshal(body, &k); err != nil {
		return envelope.PublicKey{}, fmt.Errorf("cohort: aggregator key: %w", err)
	}
	if want != "" && !strings.EqualFold(strings.TrimSpace(want), k.Fingerprint()) {
		return envelope.PublicKey{}, fmt.Errorf("cohort: aggregator key fingerprint %s, expected %s", k.Fingerprint(), want)
	}
	return k, nil
}

// FetchConsent reads the study's task from GET base/api/task (a relay's:
// the definition its join page shows; an aggregator's) and returns
// task.ConsentHash of its consent text, the hash the cohort's volunteers
// seal their leader shares under, and the text's short version.
func FetchConsent(ctx context.Context, hc *http.Client, base string) ([32]byte, string, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/task", nil)
	if err != nil {
		return [32]byte{}, "", fmt.Errorf("cohort: task request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return [32]byte{}, "", fmt.Errorf("cohort: fetch task: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return [32]byte{}, "", fmt.Errorf("cohort: fetch task: HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, task.MaxFileBytes+1))
	if err != nil {
		return [32]byte{}, "", fmt.Errorf("cohort: fetch task: %w", err)
	}
	t, err := task.Parse(body)
	if err != nil {
		return [32]byte{}, "", fmt.Errorf("cohort: task: %w", err)
	}
	h := task.ConsentHash(t)
	return h, task.ConsentVersion(h), nil
}

// waitConsent is FetchConsent of the relay whose websocket URL is relay,
// retried every second until ctx ends (the relay serves the task once it
// has reached the aggregator).
func waitConsent(ctx context.Context, relay string, log *slog.Logger) ([32]byte, error) {
	u, err := url.Parse(relay)
	if err != nil {
		return [32]byte{}, fmt.Errorf("cohort: relay URL: %w", err)
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.Path, u.RawQuery, u.Fragment = "", "", ""
	for {
		// Each attempt is bounded, so that a request the relay never
		// answers is retried rather than waited on for ever.
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		h, v, err := FetchConsent(actx, nil, u.String())
		cancel()
		if err == nil {
			log.Info("consent text agreed", "version", v)
			return h, nil
		}
		log.Debug("no consent text yet", "err", err)
		select {
		case <-ctx.Done():
			return [32]byte{}, fmt.Errorf("cohort: no consent text from the relay: %w (%w)", err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// ReportCost measures what a volunteer's report costs on this machine now,
// the way the cohort runs them: cfg.Workers volunteers (0: DefaultWorkers)
// of cfg's data and training (cfg.Key may be the zero value: a throwaway
// key is pinned then) each prepare reports for parameters p at once
// (client.Client.Rehearse: train, encode or shard, seal; nothing sent),
// once to warm up and then twice; it returns the wall time of those rounds
// divided by the reports prepared: the cohort's time per report, with
// whatever else competes for the cores right now.
func ReportCost(ctx context.Context, cfg Config, p wire.Params) (time.Duration, error) {
	if cfg.Dataset == "" {
		cfg.Dataset = sample.Name
	}
	if cfg.Train == (logreg.TrainConfig{}) {
		cfg.Train = logreg.FLAMEConfig(10, 0.1)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers()
	}
	shares, err := LoadShares(cfg.Dataset, cfg.DataDir, workers, cfg.PerUser, cfg.Seed)
	if err != nil {
		return 0, err
	}
	if cfg.Key.Validate() != nil {
		sign, _, err := ed25519.GenerateKey(crand.Reader)
		if err != nil {
			return 0, fmt.Errorf("cohort: rehearsal key: %w", err)
		}
		x, err := ecdh.X25519().GenerateKey(crand.Reader)
		if err != nil {
			return 0, fmt.Errorf("cohort: rehearsal key: %w", err)
		}
		if cfg.Key, err = envelope.ParsePublicKey(sign, x.PublicKey().Bytes()); err != nil {
			return 0, fmt.Errorf("cohort: rehearsal key: %w", err)
		}
	}
	clients := make([]*client.Client, workers)
	for i := range clients {
		if clients[i], err = client.New(client.Config{Pinned: cfg.Key, Data: shares[i], Train: cfg.Train}); err != nil {
			return 0, fmt.Errorf("cohort: %w", err)
		}
	}
	model := make([]float64, p.D)
	const warm, timed = 1, 2
	var start time.Time
	for rep := range warm + timed {
		if rep == warm {
			start = time.Now()
		}
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() { _, errs[i] = c.Rehearse(ctx, p, model) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, fmt.Errorf("cohort: rehearsal: %w", err)
		}
	}
	return time.Since(start) / time.Duration(timed*workers), nil
}
