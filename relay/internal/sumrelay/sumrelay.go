// Package sumrelay is the relay's side of a secure-summation round
// (docs/secagg.md, "Streaming"), apart from HTTP serving and from any
// particular storage: the steps around relay/internal/helper, each over
// explicit state (a Stream, a Closed round, the records of a Store), with
// the aggregator behind Poster and persistence behind outbox.Store:
//
//   - while the round is open, every accepted report goes to the round's
//     stream (Report): its helper share is opened and prepared
//     (helper.Prepare) as it arrives, on a pool of GOMAXPROCS workers (or,
//     with -prep-jobs, in batches on the relay's replicas:
//     Config.PrepareApart), and added (helper.Add) strictly in arrival
//     order; its sealed leader share
//     and 'P' entry join the next chunk; a chunk of ChunkReports reports,
//     or whatever waited ChunkEvery while no chunk was at the aggregator,
//     is posted to /v1/secagg/chunk, up to InFlight (default 8) at once,
//     while the next ones are prepared (the aggregator folds a round's
//     chunks in sequence, and answers each once a checkpoint of its state
//     covers it); their verdicts ('M'), applied in sequence, fold the
//     accepted reports into the helper's running aggregate
//     (helper.Verdicts); the report is then gone from the relay
//     (runStream describes the pipeline and its bound);
//   - at the close (secAggRound), the stream waits at most DrainBound for
//     the reports the round machine accepted but the stream has not yet
//     received, drops the rest (counted, never sent: the aggregator never
//     sees them either), and posts its last chunk;
//   - the close: the SecAggClose frame and the helper's running aggregate
//     are persisted (outbox.SecAggClose) before /v1/secagg/close is posted;
//     a SecAggCharged ok with exactly the helper's accepted count, at least
//     the minimum batch, releases the noised aggregate share
//     (helper.Release), which is persisted (outbox.SecAggAggregate) before
//     it is posted to /v1/secagg/aggregate.
//
// Every request is resent with the identical bytes until a definitive
// answer (outbox.Classify), the relay's stop, or the aggregator's next
// announcement. A relay lost before the close is persisted (a restart, a
// standby taking over) is followed by one that finishes the round with
// the chunks the aggregator folded (Rebuild, resume.go: each chunk's
// helper shares are persisted before it is posted, and a volunteer's ack
// waits for its chunk's answer), or aborts it when none was (its open
// marker: nothing was charged); after the close is persisted, the round
// resumes from the persisted close or aggregate share (Resume).
//
// Privacy: the relay never holds a value nor a leader share in the clear;
// the one value it releases is the noised aggregate share (helper.Release:
// the discrete Gaussian noise of docs/secagg.md, charged to the relay's
// own noise ledger first, Config.Charge), persisted before its first send
// and resent byte for byte, never noised twice (outbox.Recover).
package sumrelay

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/acklog"
	"github.com/blanket-fl/blanket/relay/internal/helper"
	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Secure-summation paths at the aggregator.
const (
	ChunkPath     = "/v1/secagg/chunk"
	ClosePath     = "/v1/secagg/close"
	AggregatePath = "/v1/secagg/aggregate"
)

// Reports the relay drops before they reach the aggregator
// (/metrics secagg.dropped).
const (
	// DropUnopened: the helper share does not open (another key, round or
	// role, or altered bytes).
	DropUnopened = "helper_unopened"
	// DropLate: accepted by the round but not received by the round's
	// stream within DrainBound after the close.
	DropLate = "late"
)

// How a secure-summation round ended at the relay once it had reports
// (/metrics secagg.rounds and last_round.outcome; rounds aborted before
// are counted in rounds_aborted).
const (
	SecAggForwarded  = "forwarded"  // the noised aggregate share was delivered (accepted or duplicate)
	SecAggRefused    = "refused"    // the aggregator's ledger refused the round's charge
	SecAggInvalid    = "invalid"    // the aggregator found a chunk, the close or the aggregate invalid
	SecAggObsolete   = "obsolete"   // the round is closed at the aggregator another way
	SecAggSuperseded = "superseded" // no definitive answer before the aggregator announced a later round
	SecAggFailed     = "failed"     // the helper could not finish (the aggregator's answer contradicts it)
)

// Outcomes lists every outcome, for /metrics.
var Outcomes = []string{SecAggForwarded, SecAggRefused, SecAggInvalid, SecAggObsolete, SecAggSuperseded, SecAggFailed}

// Streaming defaults (secaggRelay).
const (
	defaultChunkReports = 8                      // about 8.6 MB of leader shares at d = 7850
	defaultChunkEvery   = 250 * time.Millisecond // a partial chunk waits at most this
	defaultDrainBound   = 10 * time.Second       // at the close, for reports still on their way
	// defaultInFlight chunks are posted at once: the aggregator holds each
	// answer until a checkpoint of its running state covers it (once per
	// group of chunks, not per chunk), so the stream keeps posting while
	// the earlier answers wait; 8 × 8.6 MB of leader shares in flight.
	defaultInFlight = 8
	// With -prep-jobs (Config.PrepareApart): apartBatches batches at the
	// relay's replicas at once, each cut once it holds ChunkReports or
	// BatchLinger after its first report (fewer, larger jobs: each costs
	// PostgreSQL a handful of statements whatever its size).
	apartBatches       = 4
	defaultBatchLinger = 20 * time.Millisecond
)

// Poster posts a secure-summation request until a definitive answer
// (aggclient.Client.Post): the outcome, the reply (for accepted and
// duplicate, one that check accepts) and a short reason; or
// aggclient.ErrStopped, aggclient.ErrSuperseded without one.
type Poster interface {
	Post(ctx context.Context, num uint64, path string, body []byte, limit int64,
		check func([]byte) error) (outbox.Outcome, []byte, string, error)
}

// Config is what the secure-summation steps act on; every field is
// required.
type Config struct {
	Store outbox.Store // the close and the aggregate share, persisted before they are sent
	Post  Poster
	// Charge charges a round's release to the relay's noise ledger before
	// it is noised (anchor.Anchor.Charge); aggclient.ErrStopped if the
	// relay stops first.
	Charge func(ctx context.Context, num uint64, p wire.Params, accepted int) error
	// Abort persists closed round c's Abort and returns its outbox entry
	// (false: not persisted); Enqueue hands an entry to the Sender.
	Abort   func(c *round.Closed, rep metrics.RoundReport, reason uint8, why string) (outbox.Entry, bool)
	Enqueue func(outbox.Entry)
	Metrics *metrics.Metrics
	Token   string        // the bearer token: the rounds' verify keys derive from it (secagg.DeriveVerifyKey)
	Open    helper.Opener // the helper key's opener
	// PrepareApart, if set (-prep-jobs), has a batch of a round's sealed
	// helper shares opened and prepared by the relay's replicas
	// (relay/internal/prepjob.Offload.Prepare): each report's preparation
	// in order, nil for a share that did not open. On an error the stream
	// prepares the batch itself.
	PrepareApart func(ctx context.Context, r Apart, sealed [][]byte) ([]*secagg.Prep, error)
	Floor        roundspec.Floor
	// Chunks, if set, keeps each chunk's sealed helper shares before the
	// chunk is posted (persistChunk), so that the relay that starts next
	// on the same store finishes a round lost mid-way (Rebuild); nil: such
	// a round is aborted. CheckedIn returns the round machine's count of
	// check-ins of round num (recorded with each chunk; nil: 0).
	Chunks    acklog.Log
	CheckedIn func(num uint64) uint32
	// NewSource returns the randomness of the release's noise
	// (noise.Secure in production).
	NewSource func() noise.Source
	Logger    *slog.Logger
	// Class, when set, names the class on every round's log line (the
	// relay's four-character join code; nil: no class attribute).
	Class func() string
}

// Apart is the round a batch prepared apart belongs to.
type Apart struct {
	Num       uint64
	Params    wire.Params
	VerifyKey []byte
	Round     *secagg.Round
}

// roundLog is the logger of round num's lines: the class and the round.
func (rl *Relay) roundLog(num uint64) *slog.Logger {
	l := rl.cfg.Logger
	if rl.cfg.Class != nil {
		l = l.With("class", rl.cfg.Class())
	}
	return l.With("round", num)
}

// Relay is the relay's secure-summation state: the open rounds' streams,
// the steps found at start to resume, the volunteers' receipts, and the
// streaming knobs (tests shorten them).
type Relay struct {
	cfg      Config
	Receipts Receipts // GET /api/receipt (receipts.go)

	mu      sync.Mutex
	ctx     context.Context // Start's; nil before
	streams map[uint64]*Stream
	knobSet Knobs
	wg      sync.WaitGroup
}

// New returns the secure-summation side of a relay.
func New(cfg Config) *Relay { return &Relay{cfg: cfg} }

// Knobs are the streams' settings; zero fields take the defaults.
type Knobs struct {
	ChunkReports int           // reports per chunk (defaultChunkReports)
	ChunkEvery   time.Duration // a partial chunk's wait (defaultChunkEvery)
	DrainBound   time.Duration // at the close, for reports still on their way (defaultDrainBound)
	InFlight     int           // chunks posted and not yet answered at once (defaultInFlight)
	// Workers prepare reports (helper.Prepare) in parallel; 0:
	// runtime.GOMAXPROCS. Serial selects runStreamSerial, the one-goroutine
	// stream this pipeline replaced (BenchmarkSecAggStream compares them).
	// WrapOpen, if set, wraps the helper's opener (tests observe it).
	Workers  int
	Serial   bool
	WrapOpen func(helper.Opener) helper.Opener
	// BatchLinger is how long a batch prepared apart (-prep-jobs) waits
	// for more reports after its first (defaultBatchLinger).
	BatchLinger time.Duration
}

// SetKnobs sets the settings of the streams started after it.
func (rl *Relay) SetKnobs(k Knobs) {
	rl.mu.Lock()
	rl.knobSet = k
	rl.mu.Unlock()
}

// streamKnobs are a stream's settings, read once when it starts.
type streamKnobs struct {
	size         int           // reports per chunk
	every, drain time.Duration // a partial chunk's wait; the drain after the close
	workers      int           // preparing goroutines
	inFlight     int           // chunks posted at once (runStream's poster)
	window       int           // reports past the stream's channel not yet in a chunk (runStream)
	serial       bool
	wrapOpen     func(helper.Opener) helper.Opener
	linger       time.Duration // a batch prepared apart waits this for more reports
}

func (rl *Relay) knobs() streamKnobs {
	rl.mu.Lock()
	a := rl.knobSet
	rl.mu.Unlock()
	k := streamKnobs{size: a.ChunkReports, every: a.ChunkEvery, drain: a.DrainBound, workers: a.Workers,
		inFlight: a.InFlight, serial: a.Serial, wrapOpen: a.WrapOpen, linger: a.BatchLinger}
	if k.linger <= 0 {
		k.linger = defaultBatchLinger
	}
	if k.size <= 0 {
		k.size = defaultChunkReports
	}
	if k.every <= 0 {
		k.every = defaultChunkEvery
	}
	if k.drain <= 0 {
		k.drain = defaultDrainBound
	}
	if k.inFlight <= 0 {
		k.inFlight = defaultInFlight
	}
	if k.workers <= 0 {
		k.workers = runtime.GOMAXPROCS(0)
	}
	k.window = max(k.size, 2*k.workers)
	if rl.cfg.PrepareApart != nil {
		// Batches prepared apart: apartBatches of them at once, and one
		// filling (runStream's batchApart).
		k.window = k.size * (apartBatches + 1)
	}
	return k
}

// Start sets the context the streams and the steps run under (the
// relay's Run) and resumes the steps of resume (outbox.Recovery.Resume)
// in the background.
func (rl *Relay) Start(ctx context.Context, resume []outbox.Entry) {
	rl.mu.Lock()
	rl.ctx = ctx
	rl.mu.Unlock()
	for _, e := range resume {
		rl.wg.Go(func() { rl.Resume(ctx, e) })
	}
}

// Wait waits for every stream and step started.
func (rl *Relay) Wait() { rl.wg.Wait() }

// Closed ends closed round c in the background (its close: Close).
func (rl *Relay) Closed(ctx context.Context, c *round.Closed) {
	rl.wg.Go(func() { rl.Close(ctx, c) })
}
