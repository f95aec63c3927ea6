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
	"encoding/binary"
	"encoding/json"
	"errors"
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
// header's length (4) | the header (JSON) | the reports' count (4) | each
// sealed leader share, its length (4) first | the helper's 'P' message.
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
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(hb)))
	b = append(b, hb...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(sealed)))
	for _, s := range sealed {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return append(b, prep...), nil
}

var errTruncated = errors.New("prepjob: truncated job")

func take(b []byte) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errTruncated
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(len(b)-4) < uint64(n) {
		return nil, nil, errTruncated
	}
	return b[4 : 4+n], b[4+n:], nil
}

// decode is Encode's inverse (the slices alias b).
func decode(b []byte) (hb []byte, h header, sealed [][]byte, prep []byte, err error) {
	if hb, b, err = take(b); err != nil {
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
	if len(b) < 4 {
		err = errTruncated
		return
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(h.Params.Quota)+1 || uint64(n) > uint64(len(b))/4 {
		err = fmt.Errorf("prepjob: a job of %d reports", n)
		return
	}
	sealed = make([][]byte, n)
	for i := range sealed {
		if sealed[i], b, err = take(b); err != nil {
			return
		}
	}
	return hb, h, sealed, b, nil
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

// Serve is a replica that only prepares: it waits for the aggregator's
// key in schema (the owner stores it at its first start), then leases and
// executes jobs until ctx ends (`aggregator prep-worker`, and a standby
// while it waits) with w's Workers, Lease and Log (NewWorker(nil, nil,
// ...)); it sets w's Jobs and Exec.
func Serve(ctx context.Context, dsn, schema string, w *pgstore.JobWorker) error {
	log := w.Log
	var key *sealkey.PrivateKey
	for {
		st, err := pgstore.ReadBuckets(ctx, dsn, schema, []string{sealkey.BucketKeys})
		if err == nil {
			if raw, ok := st[sealkey.BucketKeys][sealkey.KeyName]; ok {
				if key, err = sealkey.UnmarshalPrivateKey(raw); err != nil {
					return fmt.Errorf("prepjob: the stored key: %w", err)
				}
				break
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			log.Debug("prepjob: reading the key", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	jobs, err := pgstore.OpenJobs(ctx, dsn, schema, log)
	if err != nil {
		return err
	}
	defer jobs.Close()
	w.Jobs, w.Exec, w.Kind = jobs, NewPreparer(key), Kind
	log.Info("preparing secure-summation chunks for the aggregator's replicas", "schema", schema, "fingerprint", key.Public().Fingerprint())
	w.Run(ctx)
	return nil
}
