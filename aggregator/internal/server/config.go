package server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Config configures a Server. New validates it; fields documented as
// optional take their default when zero.
type Config struct {
	// Params is the round configuration announced every round (protocol,
	// randomizer, sizes, budgets, MinBatch, Quota). It must pass
	// wire.Params.Validate, and Params.D must equal the number of
	// parameters of the test set's logistic-regression model.
	Params wire.Params
	// RelayURL is the relay's base URL (announcements are POSTed to
	// RelayURL + "/v1/rounds").
	RelayURL string
	// Anchor checks the ledger at start against the head the relay holds
	// and exchanges ledger heads with the relay (anchor.go;
	// docs/threat-model.md). The binary sets it (-anchor, default on).
	Anchor bool
	// Token is the shared bearer token of the relay-aggregator link
	// (required, at least 16 bytes).
	Token string
	// StateDir holds the datastore (store.log, 0600: the key, the privacy
	// ledger, the relay's head, the checkpoint and the round state). It is
	// created (0700) if missing. The files of a directory in the former
	// format (key.bin, ledger.jsonl, relay-anchor.json, state.json) are
	// imported once and kept read-only as NAME.imported; export the
	// ledger in its file format with "aggregator export-ledger".
	StateDir string
	// Rounds stops announcing after this many rounds have updated the
	// model (status ok), counting those of earlier runs; 0 means until
	// the privacy budget refuses the next round.
	Rounds int
	// RoundTimeout is the time from announcement to the round's deadline
	// (default 60 s).
	RoundTimeout time.Duration
	// BatchGrace is how long after the deadline the server waits for the
	// relay's batch or abort before abandoning the round (nothing is
	// charged) and announcing the next (default 60 s).
	BatchGrace time.Duration
	// RetryInterval separates attempts to deliver an announcement to the
	// relay (default 2 s).
	RetryInterval time.Duration
	// TargetEpsilon and TargetDelta are the privacy ledger's budget.
	TargetEpsilon float64
	TargetDelta   float64
	// ExpectedN is the number of reports per round assumed by the
	// pre-announcement budget check (ledger.CanCharge of the would-be
	// release); default Params.MinBatch. The batch's actual release is
	// charged (and may still be refused) when it arrives.
	ExpectedN int
	// ServerLR multiplies the estimated mean update before it is added to
	// the model (default 1; FLAME's code uses d/k for SS-Topk).
	ServerLR float64
	// Test is the held-out test set the model is evaluated on every round
	// (standardized like the clients' data). A task without public test
	// data gives a Dataset of no examples carrying the model's shape
	// (logreg.ShapeOnly): no accuracy is computed and /api/status says
	// accuracy_source "none".
	Test logreg.Dataset
	// Task is the task being learned (optional): its name and title are
	// in /api/status and its public definition at GET /api/task, for the
	// pages (consent text, questions, classes).
	Task *task.Task
	// Workers is the number of decryption goroutines (default
	// runtime.GOMAXPROCS(0) at each batch).
	Workers int
	// AuditTrials, when positive (at least 10), audits every announced
	// configuration in the background (package liveaudit) with that many
	// trials per hypothesis and phase (secure summation:
	// audit.SecAggTrials), and shows the audited
	// lower bound next to the charge in /api/status, /api/rounds and the
	// dashboard. 0: off.
	AuditTrials int
	// Accountant composes the releases; nil (the default) is the
	// incremental privacy.Session inside the ledger. The ledger admits
	// rounds by the report's Tightest row.
	Accountant accounting.Accountant
	// HTTPClient posts announcements (default: a client with a 30 s
	// timeout).
	HTTPClient *http.Client
	// Logger receives the server's log (nil discards).
	Logger *slog.Logger
	// Web configures the dashboard, its event stream and the operator
	// controls (web.go).
	Web WebOptions

	// Store, if its URL is set, puts the datastore in PostgreSQL
	// (shared/datastore/serverstore) instead of StateDir, which then
	// keeps only the former files imported once; Store.Dir is StateDir.
	Store serverstore.Config
	// PrepJobs (-prep-jobs; PostgreSQL only) spreads the preparation of
	// secure summation's chunks over the aggregator's replicas: each chunk
	// becomes a job in the schema that every replica leases (package
	// prepjob), this server included while it waits. PrepLease is a job's
	// lease (0: prepjob.DefaultLease); PrepHelpAfter how long this
	// server leaves its chunks' jobs to the other replicas before it
	// prepares them itself (prepjob.Offload.HelpAfter).
	PrepJobs                 bool
	PrepLease, PrepHelpAfter time.Duration

	// storeFS, if set (tests only), is the datastore's file system (to
	// inject a failing write or fsync: of a charge too, the ledger being
	// in the datastore).
	storeFS datastore.FileSystem
	// secaggNoise, if set (tests only), is the aggregator's secure
	// summation noise (rounds.Options.Noise; nil: noise.Secure()).
	secaggNoise noise.Source
}

// minTokenLen is the shortest accepted bearer token.
const minTokenLen = 16

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if err := cfg.Params.Validate(); err != nil {
		return cfg, fmt.Errorf("server: params: %w", err)
	}
	if err := cfg.Test.Shape().Validate(); err != nil {
		return cfg, errors.New("server: a test set, or the model's shape (logreg.ShapeOnly), is required")
	}
	if cfg.Task != nil && cfg.Task.Shape() != cfg.Test.Shape() {
		return cfg, fmt.Errorf("server: the task's model is %+v but the test set's %+v", cfg.Task.Shape(), cfg.Test.Shape())
	}
	if got := cfg.Test.Shape().NumParams(); got != int(cfg.Params.D) {
		return cfg, fmt.Errorf("server: params d = %d but the test set's model has %d parameters", cfg.Params.D, got)
	}
	u, err := url.Parse(cfg.RelayURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, fmt.Errorf("server: relay URL %q must be an http(s) URL", cfg.RelayURL)
	}
	if len(cfg.Token) < minTokenLen {
		return cfg, fmt.Errorf("server: the relay token must have at least %d bytes", minTokenLen)
	}
	if cfg.StateDir == "" {
		return cfg, errors.New("server: a state directory is required")
	}
	if cfg.Rounds < 0 {
		return cfg, fmt.Errorf("server: rounds must be >= 0, got %d", cfg.Rounds)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"round timeout", &cfg.RoundTimeout, 60 * time.Second}, {"batch grace", &cfg.BatchGrace, 60 * time.Second}, {"retry interval", &cfg.RetryInterval, 2 * time.Second}} {
		if *d.v < 0 {
			return cfg, fmt.Errorf("server: %s must be >= 0, got %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if math.IsNaN(cfg.TargetEpsilon) || math.IsInf(cfg.TargetEpsilon, 0) || cfg.TargetEpsilon <= 0 {
		return cfg, fmt.Errorf("server: target epsilon must be positive and finite, got %v", cfg.TargetEpsilon)
	}
	if !(cfg.TargetDelta > 0 && cfg.TargetDelta < 1) {
		return cfg, fmt.Errorf("server: target delta must be in (0, 1), got %v", cfg.TargetDelta)
	}
	if cfg.ExpectedN < 0 {
		return cfg, fmt.Errorf("server: expected n must be >= 0, got %d", cfg.ExpectedN)
	}
	if cfg.ExpectedN == 0 {
		cfg.ExpectedN = int(cfg.Params.MinBatch)
	}
	if math.IsNaN(cfg.ServerLR) || math.IsInf(cfg.ServerLR, 0) || cfg.ServerLR < 0 {
		return cfg, fmt.Errorf("server: server learning rate must be positive and finite, got %v", cfg.ServerLR)
	}
	if cfg.ServerLR == 0 {
		cfg.ServerLR = 1
	}
	if cfg.PrepJobs && cfg.Store.URL == "" {
		return cfg, errors.New("server: -prep-jobs needs the PostgreSQL store (-store): the replicas share the jobs through it")
	}
	if cfg.Workers < 0 {
		return cfg, fmt.Errorf("server: workers must be >= 0, got %d", cfg.Workers)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Web.validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}
