// Package prepjob spreads the preparation of secure summation's chunks
// over the aggregator's replicas (docs/deploy.md, "Replicas"): the owning
// aggregator enqueues each chunk the relay posts as a job in its
// PostgreSQL schema (pgstore.Jobs), any replica holding the key leases it,
// prepares it apart from the round's running state
// (analysis.SecAggLeader.PrepareApart) and stores the result; the owner
// folds the results in the relay's order (FoldPrepared), under its own
// checkpoints, exactly as if it had prepared them itself.
//
// Who prepares:
//   - the owner's chunk intake, while it waits for its own job, leases
//     jobs too (Offload.Prepare), so a round never waits for a replica
//     that is not there;
//   - a hot standby (aggregator -standby -prep-jobs) while it waits for
//     its turn;
//   - any number of `aggregator prep-worker` processes.
//
// Each step is a function apart from HTTP and storage: Encode and
// Preparer.Execute take bytes and give bytes (Execute keeps the last
// round's leader, to build it once per round); Worker and Offload move
// them through the queue. A job names the format's version and the
// fingerprint of the key it is for: a replica of another version, or
// with another key (a schema made afresh), fails the job instead of
// preparing it wrong, and the owner prepares the chunk itself. A job holds sealed leader shares and its result an
// un-noised leader share of a partial sum: both are kept in the schema
// that holds the key that opens them, and nothing of a partial sum leaves
// the aggregator's party (the owner folds it into the running aggregate,
// which Unshard releases only after the charge).
package prepjob

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Kind is the jobs' kind in the queue.
const Kind = "secagg-prep"

// DefaultLease is how long a replica holds a job before another may take
// it over (pgstore.DefaultJobLease).
const DefaultLease = pgstore.DefaultJobLease

// Round is what a replica needs besides the key to prepare a chunk of a
// round: the round, its announced parameters, the consent hash its leader
// shares are sealed under and the round's verify key.
type Round struct {
	Round     uint64
	Params    wire.Params
	Consent   [32]byte
	VerifyKey []byte
}

// Version is the jobs' format (header, result).
const Version = 1

// header is Round as encoded (wire.Params holds its count blocks
// encoded), with the format's version and the fingerprint of the key the
// leader shares are sealed to.
type header struct {
	Version   int               `json:"v"`
	Key       string            `json:"key"`
	Round     uint64            `json:"round"`
	Params    wire.Params       `json:"params"`
	Counts    []wire.CountBlock `json:"counts,omitempty"`
	Consent   [32]byte          `json:"consent"`
	VerifyKey []byte            `json:"vk"`
}

// Encode is the job of one chunk for the key of fingerprint key: the
// header (JSON) | the sealed leader shares (framed as pgstore.AppendItem
// and AppendList frame them) | the helper's 'P' message.
func Encode(key string, r Round, sealed [][]byte, prep []byte) ([]byte, error) {
	h := header{Version: Version, Key: key, Round: r.Round, Params: r.Params, Counts: r.Params.Counts.Blocks(), Consent: r.Consent, VerifyKey: r.VerifyKey}
	h.Params.Counts = wire.CountList{}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("prepjob: %w", err)
	}
	n := 8 + len(hb) + len(prep)
	for _, s := range sealed {
		n += 4 + len(s)
	}
	return append(pgstore.AppendList(pgstore.AppendItem(make([]byte, 0, n), hb), sealed), prep...), nil
}

// decode is Encode's inverse (the slices alias b).
func decode(b []byte) (hb []byte, h header, sealed [][]byte, prep []byte, err error) {
	if hb, b, err = pgstore.TakeItem(b); err != nil {
		return
	}
	if err = json.Unmarshal(hb, &h); err != nil {
		err = fmt.Errorf("prepjob: job header: %w", err)
		return
	}
	if h.Version != Version {
		err = fmt.Errorf("prepjob: a job of format %d, this replica reads %d", h.Version, Version)
		return
	}
	h.Params.Counts = wire.NewCountList(h.Counts...)
	sealed, prep, err = pgstore.TakeList(b, uint64(h.Params.Quota)+1)
	return hb, h, sealed, prep, err
}

// Preparer executes jobs with the aggregator's key; it keeps the last
// round's leader (the round's sharding and engine are built once per
// round, not per chunk). Safe for concurrent use.
type Preparer struct {
	key *sealkey.PrivateKey
	fp  string // its fingerprint

	// mu guards last and lastHeader: the leader of the last round seen.
	mu         sync.Mutex
	lastHeader string
	last       *analysis.SecAggLeader
}

// NewPreparer returns a Preparer opening leader shares with key.
func NewPreparer(key *sealkey.PrivateKey) *Preparer {
	return &Preparer{key: key, fp: key.Public().Fingerprint()}
}

// leader returns a leader of the job's round, fresh or the last one (only
// its key, round and engine are used: PrepareApart changes no state).
func (p *Preparer) leader(hb []byte, h header) (*analysis.SecAggLeader, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != nil && p.lastHeader == string(hb) {
		return p.last, nil
	}
	spec, err := roundspec.New(h.Params)
	if err != nil {
		return nil, fmt.Errorf("prepjob: %w", err)
	}
	sr, err := spec.SecAggRound(h.Round)
	if err != nil {
		return nil, fmt.Errorf("prepjob: %w", err)
	}
	eng, err := secagg.NewEngine(sr, true, h.VerifyKey)
	if err != nil {
		return nil, fmt.Errorf("prepjob: %w", err)
	}
	l, err := analysis.NewSecAggLeader(p.key, h.Consent, sr, eng)
	if err != nil {
		return nil, fmt.Errorf("prepjob: %w", err)
	}
	p.last, p.lastHeader = l, string(hb)
	return l, nil
}

// Execute prepares one job's chunk apart on workers goroutines and
// returns the result (analysis.ChunkPrep.MarshalBinary).
func (p *Preparer) Execute(job []byte, workers int) ([]byte, error) {
	hb, h, sealed, prep, err := decode(job)
	if err != nil {
		return nil, err
	}
	if h.Key != p.fp {
		return nil, fmt.Errorf("prepjob: a job for key %s, this replica holds %s", h.Key, p.fp)
	}
	l, err := p.leader(hb, h)
	if err != nil {
		return nil, err
	}
	cp, err := l.PrepareApart(sealed, prep, workers)
	if err != nil {
		return nil, fmt.Errorf("prepjob: round %d: %w", h.Round, err)
	}
	return cp.MarshalBinary()
}

// NewWorker returns the worker that leases this kind's jobs from jobs and
// prepares them with p (pgstore.JobWorker; Serve fills in Jobs and Exec).
func NewWorker(jobs *pgstore.Jobs, p *Preparer, workers int, lease time.Duration, log *slog.Logger) *pgstore.JobWorker {
	w := &pgstore.JobWorker{Jobs: jobs, Kind: Kind, Workers: workers, Lease: lease, Log: log}
	if p != nil {
		w.Exec = p
	}
	return w
}

// Offload is the owner's side: Prepare enqueues a chunk and waits for its
// result, preparing jobs itself meanwhile (pgstore.JobOffload).
type Offload struct {
	pgstore.JobOffload
	Prep *Preparer
}

// Prepare enqueues the chunk as a job and returns its result once a
// replica (this one included) has prepared it; an error (the queue
// failed, the job was lost with PostgreSQL, it failed, or it timed out)
// means the caller prepares the chunk itself (pgstore.JobOffload.Do).
func (o *Offload) Prepare(ctx context.Context, r Round, sealed [][]byte, prep []byte) ([]byte, error) {
	job, err := Encode(o.Prep.fp, r, sealed, prep)
	if err != nil {
		return nil, err
	}
	return o.Do(ctx, r.Round, job)
}

// Serve is a replica that only prepares (`aggregator prep-worker`, and a
// standby while it waits): pgstore.ServeJobs with the aggregator's key in
// schema, and w's Workers, Lease and Log (NewWorker(nil, nil, ...)).
func Serve(ctx context.Context, dsn, schema string, w *pgstore.JobWorker) error {
	w.Kind = Kind
	return pgstore.ServeJobs(ctx, dsn, schema, sealkey.BucketKeys, sealkey.KeyName, func(raw []byte) (pgstore.Executor, error) {
		key, err := sealkey.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, err
		}
		w.Log.Info("preparing secure-summation chunks for the aggregator's replicas", "schema", schema, "fingerprint", key.Public().Fingerprint())
		return NewPreparer(key), nil
	}, w)
}
