// Package server is Blanket's aggregator (analyzer) service
// (docs/protocol.md): it announces signed rounds to the relay, receives
// each round's padded and shuffled batch, charges the privacy ledger
// durably before decrypting anything, opens the sealed values in parallel,
// debiases them with the FLAME analyzer, updates and evaluates the model,
// checkpoints atomically, and serves a JSON API and the teacher's pages.
//
// The round state and its transitions are package rounds' (rounds.Machine,
// embedded in Server: the round life cycle, the intake of the relay's
// frames, secure summation's leader, the crash safety). The Server adds
// the relay link and the timers of the round loop (driver.go), the
// relay's helper key (secagg.go), the ledgers' anchor (anchor.go), the
// operator's controls (operator.go, nexttask.go), and it is the Backend
// of the HTTP API (api.go) and the pages' handlers (web.go, events.go).
// What needs no server state lives in its own package: the HTTP API
// (api), the batch analysis (analysis), the checkpoint (checkpoint), the
// accountant's wiring (accounting), parameter building (params), the
// operator's form and password (operator), a class's task on disk
// (classtask), the pages' view model (dashboard) and the event fan-out
// (events). docs/architecture.md follows one report through them.
//
// Config is never modified after New. The round configuration the
// operator may change (parameters, spec and analyzer, server learning
// rate, round timeout) is a rounds.RoundConfig, immutable, replaced whole
// between rounds.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/events"
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
	"github.com/blanket-fl/blanket/aggregator/internal/operator"
	"github.com/blanket-fl/blanket/aggregator/internal/prepjob"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/web"
)

// Former files of Config.StateDir, each imported once into its datastore
// (datastore.LogFile), which holds all the state, and kept read-only as
// NAME.imported.
const (
	KeyFile        = "key.bin"
	LedgerFile     = "ledger.jsonl"
	CheckpointFile = rounds.CheckpointFile
)

// Server is the aggregator. Create it with New, run the round loop with
// Run, serve Handler over HTTP, and Close it after Run returned. The
// round state and its transitions are the embedded rounds.Machine; the
// Server adds the relay link, the pages and the operator's controls.
type Server struct {
	*rounds.Machine
	cfg    Config
	log    *slog.Logger
	key    *sealkey.PrivateKey
	pub    envelope.PublicKey
	fp     string
	ledger *ledger.Ledger
	acct   *accounting.Accounting

	// taskMu serializes the operator's choice of the next class's task
	// (nexttask.go).
	taskMu sync.Mutex

	events *events.Broker // the /events streams

	// audit audits announced configurations in the background;
	// auditOf maps each round announced since start to its
	// configuration (guarded by auditMu).
	audit   *liveaudit.Monitor
	auditMu sync.Mutex
	auditOf map[int]auditKey
	auth    operator.Auth // the operator password
	live    *liveState    // chart markers and a new class request (web.go)

	relay relayKeyState // the relay's helper key and the offered σ (secagg.go)
	// relayDown is the open round waiting for a relay that does not
	// answer (0: none); set by waitRound, read by Status.
	relayDown atomic.Int64

	peer *ledger.Peer // the relay's noise-ledger head (anchor.go)

	db *datastore.Store // the state directory's datastore (rounds.DBStore)
	// jobs is the queue of chunk preparations (Config.PrepJobs; nil
	// otherwise).
	jobs *pgstore.Jobs
	prep *pgstore.JobWorker
	// stopPrep ends the chunks' waits for their jobs (Close): they are
	// prepared here then.
	stopPrep context.CancelFunc
}

// New validates cfg, creates the state directory, loads or creates the
// key, opens the ledger and the checkpoint, and reconciles them (see the
// package documentation, "Crash safety").
func New(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rc, err := rounds.NewRoundConfig(c.Params, c.ServerLR, c.RoundTimeout)
	if err != nil {
		return nil, err
	}
	if err := rc.Proto.Release(1, c.ExpectedN, int(c.Params.NP)).Validate(); err != nil {
		return nil, fmt.Errorf("server: expected n = %d does not fit the padding n_p = %d: %w", c.ExpectedN, c.Params.NP, err)
	}
	// Every piece of state is in the directory's datastore; the former
	// files (checkpoint, key, ledger, relay anchor) are imported once.
	sc := c.Store
	sc.Dir = c.StateDir
	db, store, err := rounds.OpenDBIn(context.Background(), sc, c.Logger, c.storeFS)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	key, created, err := sealkey.LoadOrCreateKeyIn(db, filepath.Join(c.StateDir, KeyFile))
	if err != nil {
		return nil, err
	}
	fp := key.Public().Fingerprint()
	c.Logger = c.Logger.With("class", web.JoinCodeOf(fp)) // the class code on every line (docs/deploy.md)
	if err := c.Web.pinJoinURL(fp); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: c, log: c.Logger, key: key, pub: key.Public(), fp: fp, live: &liveState{},
		auth:   operator.NewAuth(c.Web.OperatorToken),
		acct:   accounting.New(c.Accountant),
		events: events.New(c.Web.MaxSubscribers), db: db,
	}
	if created {
		s.log.Info("generated a new aggregator key", "fingerprint", s.fp)
	}
	if s.audit, err = liveaudit.New(c.Logger, c.AuditTrials); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.auditOf = map[int]auditKey{}
	ck, err := store.LoadState()
	if err != nil {
		return nil, err
	}
	if ck == nil {
		ck = &checkpoint.State{Version: checkpoint.Version, Model: make([]float64, c.Params.D)}
	}
	if len(ck.Model) != int(c.Params.D) {
		return nil, fmt.Errorf("server: checkpoint model has %d parameters, the configuration d = %d", len(ck.Model), c.Params.D)
	}
	ck.Params = checkpoint.ParamsOf(c.Params)
	lo, err := s.acct.LedgerOptions(c.TargetEpsilon, c.TargetDelta)
	if err != nil {
		return nil, err
	}
	lo.Logger = c.Logger
	l, err := ledger.OpenStore(db, lo, ledger.Former{Ledger: filepath.Join(c.StateDir, LedgerFile), Peer: filepath.Join(c.StateDir, RelayAnchorFile)})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := ck.VerifyLedger(l); err != nil {
		l.Close()
		return nil, err
	}
	if err := s.openAnchor(l); err != nil { // anchor.go: against the head the relay holds
		l.Close()
		return nil, err
	}
	s.ledger = l
	var prepareApart func(context.Context, prepjob.Round, [][]byte, []byte) ([]byte, error)
	if c.PrepJobs {
		if s.jobs, err = pgstore.OpenJobs(context.Background(), c.Store.URL, c.Store.Schema, c.Logger); err != nil {
			l.Close()
			return nil, fmt.Errorf("server: %w", err)
		}
		// A former owner's jobs are of no use now: their waiters died
		// with it, and this one enqueues the chunks it resumes afresh.
		if err := s.jobs.RemoveEarlierRounds(context.Background(), prepjob.Kind, math.MaxInt64); err != nil {
			c.Logger.Warn("removing a former owner's jobs", "err", err)
		}
		prep := prepjob.NewPreparer(key)
		w := prepjob.NewWorker(s.jobs, prep, c.Workers, c.PrepLease, c.Logger)
		s.prep = w
		off := &prepjob.Offload{JobOffload: pgstore.JobOffload{W: w, HelpAfter: c.PrepHelpAfter}, Prep: prep}
		var pctx context.Context
		pctx, s.stopPrep = context.WithCancel(context.Background())
		prepareApart = func(_ context.Context, r prepjob.Round, sealed [][]byte, prep []byte) ([]byte, error) {
			return off.Prepare(pctx, r, sealed, prep)
		}
	}
	// Resumes a charged secure-summation round awaiting its aggregate
	// share, reconciles the checkpoint with the ledger, and resumes the
	// open round's chunks.
	s.Machine, err = rounds.Open(rounds.Options{Key: key, Ledger: l, Acct: s.acct, Store: store, Round: rc, Test: c.Test, Optimizer: rounds.OptimizerOf(c.Task, c.Params), Consent: rounds.ConsentOf(c.Task),
		Token: c.Token, Workers: c.Workers, BatchGrace: c.BatchGrace, ExpectedN: c.ExpectedN, Rounds: c.Rounds,
		TargetEpsilon: c.TargetEpsilon, TargetDelta: c.TargetDelta, Paused: c.Web.StartPaused, Logger: c.Logger,
		Noise: c.secaggNoise, PrepareApart: prepareApart, Hooks: rounds.Hooks{PublishChange: s.publishChange, PublishStatus: s.publishStatus,
			RoundOpened: s.watchAudit, ProtocolChanged: s.live.mark}}, *ck)
	if err != nil {
		if s.jobs != nil {
			s.stopPrep()
			s.jobs.Close()
		}
		l.Close()
		return nil, err
	}
	ok = true
	s.log.Info("aggregator ready", "fingerprint", s.fp, "last_round", ck.Round, "rounds_ok", s.RoundsOK(),
		"ledger_rounds", len(l.Releases()), "protocol", c.Params.Protocol, "d", c.Params.D, "k", c.Params.K,
		"l", c.Params.L, "n_p", c.Params.NP, "eps_l", c.Params.EpsL, "sigma", c.Params.Sigma, "bits", c.Params.Bits)
	return s, nil
}

// Fingerprint returns the aggregator key's fingerprint (clients pin it).
func (s *Server) Fingerprint() string { return s.fp }

// PublicKey returns the aggregator's public key.
func (s *Server) PublicKey() envelope.PublicKey { return s.pub }

// chunks is opsview.Source.Chunks.
func (s *Server) chunks() (apart, here, jobs int64) {
	apart, here = s.ChunksPrepared()
	if s.prep != nil {
		jobs = s.prep.Done()
	}
	return apart, here, jobs
}

// Close closes the ledger. Call it after Run returned and the HTTP server
// stopped.
func (s *Server) Close() error {
	s.audit.Close()
	if s.jobs != nil {
		s.stopPrep()
		s.jobs.Close()
	}
	return errors.Join(s.ledger.Close(), s.db.Close())
}
