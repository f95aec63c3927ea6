// Package prepjob spreads the helper's preparation of secure summation's
// reports over the relay's replicas (docs/deploy.md, "Relay replicas that
// prepare"): the owning relay's stream enqueues each batch of helper
// shares as a job in its PostgreSQL schema (pgstore.Jobs, kind Kind), any
// replica holding the helper key leases it, opens each share and runs
// VDAF PrepInit (the helper's step that costs: about 1.5 ms of the
// 1.6 ms a report costs the helper at d = 7,850), and stores each
// report's 'P' entry and preparation state; the owner adds them to the
// round's helper in arrival order and finishes them itself when the
// leader's verdicts come (helper.Verdicts: Next and the fold, tens of
// microseconds a report), exactly as if it had prepared them.
//
// Who prepares: the owner itself while it waits (pgstore.JobOffload, after
// -prep-help-after), a relay -standby started with -prep-jobs while it
// waits for its turn, and any number of `relay prep-worker` processes.
//
// Each step is a function apart from HTTP and storage: Encode,
// Preparer.Execute and ParseResult take bytes and give bytes; the queue
// moves them. A job names its format's version and the helper key it is
// for: a replica of another version, or with another key, fails the job
// instead of preparing it wrong, and the owner prepares the batch itself.
//
// Trust: a replica that prepares is the relay. It holds the helper key,
// and the owner folds the output shares it returns unchecked (Next checks
// the joint-randomness seeds, not the output share), so a faulty one can
// bias the relay's aggregate share, never release anything un-noised.
//
// What the bytes hold: a job holds sealed helper shares; a result holds,
// for each report, its prep share and its preparation state, which
// includes the helper's un-noised output share (its additive share of
// the volunteer's gradient). Both stay in the relay's schema, the one
// that holds the helper key that opens the shares, and nothing of them
// leaves the relay's party: what the aggregator receives is the 'P'
// entry, as before, and the round's aggregate share with the relay's
// noise (helper.Release).
package prepjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/relaystore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Kind is the jobs' kind in the relay's queue.
const Kind = "helper-prep"

// DefaultLease is how long a replica holds a job before another may take
// it over (pgstore.DefaultJobLease).
const DefaultLease = pgstore.DefaultJobLease

// Version is the jobs' format (header, result).
const Version = 1

// Round is what a replica needs besides the helper key to prepare a
// round's reports: the round, its announced parameters and its verify
// key (secagg.DeriveVerifyKey).
type Round struct {
	Round     uint64
	Params    wire.Params
	VerifyKey []byte
}

// header is Round as encoded (wire.Params holds its count blocks
// encoded), with the format's version and the fingerprint of the helper
// key the shares are sealed to.
type header struct {
	Version   int               `json:"v"`
	Key       string            `json:"key"`
	Round     uint64            `json:"round"`
	Params    wire.Params       `json:"params"`
	Counts    []wire.CountBlock `json:"counts,omitempty"`
	VerifyKey []byte            `json:"vk"`
}

// Fingerprint names a helper key in jobs: the first 16 bytes of the
// SHA-256 of its public half, in hex.
func Fingerprint(k *helperkey.Key) string {
	pub := k.Public()
	h := sha256.Sum256(pub[:])
	return hex.EncodeToString(h[:16])
}

// Encode is the job of one batch of sealed helper shares for the key of
// fingerprint key: the header (JSON) | the sealed helper shares, each item
// and the list framed as pgstore.AppendItem and AppendList frame them.
func Encode(key string, r Round, sealed [][]byte) ([]byte, error) {
	h := header{Version: Version, Key: key, Round: r.Round, Params: r.Params, Counts: r.Params.Counts.Blocks(), VerifyKey: r.VerifyKey}
	h.Params.Counts = wire.CountList{}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("prepjob: %w", err)
	}
	n := 8 + len(hb)
	for _, s := range sealed {
		n += 4 + len(s)
	}
	return pgstore.AppendList(pgstore.AppendItem(make([]byte, 0, n), hb), sealed), nil
}

// list reads a pgstore.AppendList list of at most limit items that ends b.
func list(b []byte, limit uint64) ([][]byte, error) {
	items, rest, err := pgstore.TakeList(b, limit)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("prepjob: %d bytes after the list", len(rest))
	}
	return items, err
}

// decode is Encode's inverse (the slices alias b).
func decode(b []byte) (hb []byte, h header, sealed [][]byte, err error) {
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
	sealed, err = list(b, uint64(h.Params.Quota)+1)
	return hb, h, sealed, err
}

// Preparer executes jobs with the relay's helper key; it keeps the last
// round's engine (built once per round, not per batch). Safe for
// concurrent use.
type Preparer struct {
	key *helperkey.Key
	fp  string

	// mu guards lastHeader, sr and eng: the last round seen.
	mu         sync.Mutex
	lastHeader string
	sr         *secagg.Round
	eng        secagg.Engine
}

// NewPreparer returns a Preparer opening helper shares with key.
func NewPreparer(key *helperkey.Key) *Preparer {
	return &Preparer{key: key, fp: Fingerprint(key)}
}

// round returns the job's round and helper engine, fresh or the last.
func (p *Preparer) round(hb []byte, h header) (*secagg.Round, secagg.Engine, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sr != nil && p.lastHeader == string(hb) {
		return p.sr, p.eng, nil
	}
	spec, err := roundspec.New(h.Params)
	if err != nil {
		return nil, nil, fmt.Errorf("prepjob: %w", err)
	}
	sr, err := spec.SecAggRound(h.Round)
	if err != nil {
		return nil, nil, fmt.Errorf("prepjob: %w", err)
	}
	eng, err := secagg.NewEngine(sr, false, h.VerifyKey)
	if err != nil {
		return nil, nil, fmt.Errorf("prepjob: %w", err)
	}
	p.sr, p.eng, p.lastHeader = sr, eng, string(hb)
	return sr, eng, nil
}

// Execute prepares one job's helper shares on workers goroutines: each
// share is opened with the helper key (helperkey.Key.OpenHelperShare) and
// prepared (secagg.Engine.PrepInit), exactly as helper.Helper.Prepare
// does. The result is the reports' count (4) | for each report, in the
// job's order, its length (4) and secagg.Round.MarshalHelperPrep's bytes,
// or a length of 0 for a share that did not open.
func (p *Preparer) Execute(job []byte, workers int) ([]byte, error) {
	hb, h, sealed, err := decode(job)
	if err != nil {
		return nil, err
	}
	if h.Key != p.fp {
		return nil, fmt.Errorf("prepjob: a job for helper key %s, this replica holds %s", h.Key, p.fp)
	}
	sr, eng, err := p.round(hb, h)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(sealed))
	errs := make([]error, len(sealed))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(1, min(workers, len(sealed))) {
		wg.Go(func() {
			for i := range next {
				pt, err := p.key.OpenHelperShare(h.Round, sealed[i], sr.HelperShareSize())
				if err != nil {
					continue // a share that does not open: length 0
				}
				out[i], errs[i] = sr.MarshalHelperPrep(eng.PrepInit(pt))
			}
		})
	}
	for i := range sealed {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("prepjob: round %d: %w", h.Round, err)
	}
	n := 4
	for _, o := range out {
		n += 4 + len(o)
	}
	return pgstore.AppendList(make([]byte, 0, n), out), nil
}

// ParseResult parses Execute's result for a job of n reports of round sr:
// each report's preparation (secagg.Round.ParseHelperPrep), or nil for a
// share that did not open.
func ParseResult(sr *secagg.Round, b []byte, n int) ([]*secagg.Prep, error) {
	items, err := list(b, uint64(n))
	if err != nil {
		return nil, err
	}
	if len(items) != n {
		return nil, fmt.Errorf("prepjob: a result of %d reports for a job of %d", len(items), n)
	}
	out := make([]*secagg.Prep, n)
	for i, it := range items {
		if len(it) == 0 {
			continue
		}
		p, err := sr.ParseHelperPrep(it)
		if err != nil {
			return nil, fmt.Errorf("prepjob: report %d: %w", i, err)
		}
		out[i] = &p
	}
	return out, nil
}

// NewWorker returns the worker that leases this kind's jobs from jobs and
// prepares them with p (Serve fills in Jobs and Exec when they are nil).
func NewWorker(jobs *pgstore.Jobs, p *Preparer, workers int, lease time.Duration, log *slog.Logger) *pgstore.JobWorker {
	w := &pgstore.JobWorker{Jobs: jobs, Kind: Kind, Workers: workers, Lease: lease, Log: log}
	if p != nil {
		w.Exec = p
	}
	return w
}

// Offload is the owner's side: Prepare enqueues a batch and waits for its
// result, preparing jobs itself meanwhile (pgstore.JobOffload).
type Offload struct {
	pgstore.JobOffload
	Prep *Preparer
}

// Prepare enqueues a batch of round r's sealed helper shares as a job and
// returns each report's preparation (nil: the share did not open) once a
// replica (this one included) has prepared it. An error (the queue
// failed, the job was lost with PostgreSQL, it failed, timed out, or its
// result does not parse) means the caller prepares the batch itself.
func (o *Offload) Prepare(ctx context.Context, r Round, sr *secagg.Round, sealed [][]byte) ([]*secagg.Prep, error) {
	job, err := Encode(o.Prep.fp, r, sealed)
	if err != nil {
		return nil, err
	}
	res, err := o.Do(ctx, r.Round, job)
	if err != nil {
		return nil, err
	}
	return ParseResult(sr, res, len(sealed))
}

// Serve is a replica that only prepares (`relay prep-worker`, and a
// standby while it waits): pgstore.ServeJobs with the helper key the owner
// stored in the relay's schema, and w's Workers, Lease and Log
// (NewWorker(nil, nil, ...)).
func Serve(ctx context.Context, dsn, schema string, w *pgstore.JobWorker) error {
	w.Kind = Kind
	return pgstore.ServeJobs(ctx, dsn, schema, relaystore.BucketKeys, relaystore.HelperKeyName, func(raw []byte) (pgstore.Executor, error) {
		key, err := helperkey.Unmarshal(raw)
		if err != nil {
			return nil, err
		}
		w.Log.Info("preparing secure-summation reports for the relay's replicas", "schema", schema, "helper_key", Fingerprint(key))
		return NewPreparer(key), nil
	}, w)
}
