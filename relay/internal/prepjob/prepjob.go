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
	"encoding/binary"
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
// fingerprint key: the header's length (4) | the header (JSON) | the
// reports' count (4) | each sealed helper share, its length (4) first.
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
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(hb)))
	b = append(b, hb...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(sealed)))
	for _, s := range sealed {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b, nil
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

// list reads a count (4) and that many length-prefixed items, to the end
// of b; at most limit items.
func list(b []byte, limit uint64) ([][]byte, error) {
	if len(b) < 4 {
		return nil, errTruncated
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > limit || uint64(n) > uint64(len(b))/4 {
		return nil, fmt.Errorf("prepjob: a list of %d items", n)
	}
	items := make([][]byte, n)
	var err error
	for i := range items {
		if items[i], b, err = take(b); err != nil {
			return nil, err
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("prepjob: %d bytes after the list", len(b))
	}
	return items, nil
}

// decode is Encode's inverse (the slices alias b).
func decode(b []byte) (hb []byte, h header, sealed [][]byte, err error) {
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
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(out)))
	for _, o := range out {
		b = binary.BigEndian.AppendUint32(b, uint32(len(o)))
		b = append(b, o...)
	}
	return b, nil
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

// Serve is a replica that only prepares: it waits for the helper key in
// the relay's schema (the owner stores it at its first start), then
// leases and executes jobs until ctx ends (`relay prep-worker`, and a
// standby while it waits) with w's Workers, Lease and Log (NewWorker(nil,
// nil, ...)); it sets w's Jobs and Exec.
func Serve(ctx context.Context, dsn, schema string, w *pgstore.JobWorker) error {
	log := w.Log
	var key *helperkey.Key
	for {
		st, err := pgstore.ReadBuckets(ctx, dsn, schema, []string{relaystore.BucketKeys})
		if err == nil {
			if raw, ok := st[relaystore.BucketKeys][relaystore.HelperKeyName]; ok {
				if key, err = helperkey.Unmarshal(raw); err != nil {
					return fmt.Errorf("prepjob: the stored helper key: %w", err)
				}
				break
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			log.Debug("prepjob: reading the helper key", "err", err)
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
	log.Info("preparing secure-summation reports for the relay's replicas", "schema", schema, "helper_key", Fingerprint(key))
	w.Run(ctx)
	return nil
}
