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
	"runtime"
	"sync"
	"sync/atomic"
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
// it over: a chunk (at most the relay's chunk size, 8 reports by default)
// is prepared in well under a second even on a busy machine.
const DefaultLease = 10 * time.Second

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

// Worker leases jobs from a queue and executes them.
type Worker struct {
	Jobs    *pgstore.Jobs
	Prep    *Preparer
	Workers int           // goroutines per job (0: GOMAXPROCS)
	Lease   time.Duration // 0: DefaultLease
	Log     *slog.Logger

	done, takenOver, lost, failed atomic.Int64
}

// Done is the number of jobs this worker prepared and completed.
func (w *Worker) Done() int64 { return w.done.Load() }

// Failed is the number of jobs this worker could not prepare (it stored
// why: the owner prepares them), Lost the number whose result it could not
// store (its lease was taken over, or PostgreSQL failed).
func (w *Worker) Failed() int64 { return w.failed.Load() }

// Lost: see Failed.
func (w *Worker) Lost() int64 { return w.lost.Load() }

// TakenOver is the number of jobs this worker completed on a lease it
// took over (another replica's expired: attempt 2 or more).
func (w *Worker) TakenOver() int64 { return w.takenOver.Load() }

func (w *Worker) lease() time.Duration {
	if w.Lease > 0 {
		return w.Lease
	}
	return DefaultLease
}

// One executes the leased job l and completes it, with a context of its
// own: work done is not lost to a replica stopping (a standby taking
// over), nor to a job that ran past its lease and was not taken over
// (the token decides, whatever the clocks say).
func (w *Worker) One(l *pgstore.Lease) {
	n := w.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	res, err := w.Prep.Execute(l.Payload, n)
	if err != nil {
		// A job that does not execute here will not anywhere (a 'P'
		// message that does not parse, a round that does not build): its
		// result says why, and the enqueuer prepares the chunk itself,
		// which closes the round if the relay's bytes are at fault.
		w.Log.Warn("prepjob: a job does not execute", "job", l.ID, "round", l.Round, "err", err)
		res = append([]byte{resultFailed}, err.Error()...)
	} else {
		res = append([]byte{resultOK}, res...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	if err := w.Jobs.Complete(ctx, l, res); err != nil {
		w.lost.Add(1)
		w.Log.Warn("prepjob: a job's result was not stored", "job", l.ID, "round", l.Round, "attempt", l.Attempt, "err", err)
		return
	}
	if res[0] == resultFailed {
		w.failed.Add(1)
		return
	}
	w.done.Add(1)
	if l.Attempt > 1 {
		w.takenOver.Add(1)
		w.Log.Info("prepjob: completed a job whose lease another replica let expire", "job", l.ID, "round", l.Round, "attempt", l.Attempt)
	}
}

// completeTimeout bounds storing a result.
const completeTimeout = 10 * time.Second

// A job's result starts with one of these.
const (
	resultOK     byte = 0 // then analysis.ChunkPrep.MarshalBinary
	resultFailed byte = 1 // then why (text)
)

// Run leases and executes jobs until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	for {
		l, err := w.Jobs.Next(ctx, Kind, w.lease())
		if err != nil {
			return
		}
		w.One(l)
	}
}

// Offload is the owner's side: Prepare enqueues a chunk and waits for its
// result, executing jobs itself meanwhile.
type Offload struct {
	W *Worker
	// HelpAfter is how long Prepare leaves the jobs to the other replicas
	// before it leases them itself (0: at once; more keeps the owner's CPU
	// for its intake while other replicas keep up).
	HelpAfter time.Duration
	// round is the last round Prepare enqueued a job of: at the next, the
	// jobs of every other round (left by a replica that died) are removed.
	round atomic.Uint64
}

// Prepare enqueues the chunk as a job and returns its result once a
// replica (this one included: while it waits it leases jobs, its own or
// others', and executes them) has prepared it. It returns an error if the
// queue fails, the job is lost (a crash of PostgreSQL empties the
// unlogged table) or no result came within twice the lease and 30 s: the
// caller then prepares the chunk itself.
func (o *Offload) Prepare(ctx context.Context, r Round, sealed [][]byte, prep []byte) ([]byte, error) {
	w := o.W
	job, err := Encode(w.Prep.fp, r, sealed, prep)
	if err != nil {
		return nil, err
	}
	if o.round.Swap(r.Round) != r.Round {
		if err := w.Jobs.RemoveEarlierRounds(ctx, Kind, int64(r.Round)); err != nil {
			w.Log.Warn("prepjob: removing earlier rounds' jobs", "err", err)
		}
	}
	id, err := w.Jobs.Enqueue(ctx, Kind, int64(r.Round), job)
	if err != nil {
		return nil, err
	}
	defer func() {
		w.Jobs.Forget(id.ID)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Jobs.Remove(rctx, id); err != nil {
			w.Log.Warn("prepjob: removing a job", "job", id.ID, "err", err)
		}
	}()
	start := time.Now()
	bound := start.Add(2*w.lease() + 30*time.Second)
	for {
		done := w.Jobs.Done(id.ID)
		res, ok, err := w.Jobs.Result(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			switch {
			case len(res) > 0 && res[0] == resultOK:
				return res[1:], nil
			case len(res) > 0 && res[0] == resultFailed:
				return nil, fmt.Errorf("prepjob: job %d of round %d: %s", id.ID, r.Round, res[1:])
			}
			return nil, fmt.Errorf("prepjob: job %d of round %d: a result of an unknown kind", id.ID, r.Round)
		}
		if time.Now().After(bound) {
			return nil, fmt.Errorf("prepjob: job %d of round %d not done in twice the lease and 30 s", id.ID, r.Round)
		}
		if time.Since(start) >= o.HelpAfter {
			l, err := w.Jobs.Lease(ctx, Kind, w.lease())
			if err != nil {
				return nil, err
			}
			if l != nil {
				w.One(l)
				continue
			}
		}
		select {
		case <-done:
		case <-w.Jobs.NewJob():
		case <-time.After(pgstore.PollEvery):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Serve is a replica that only prepares: it waits for the aggregator's
// key in schema (the owner stores it at its first start), then leases and
// executes jobs until ctx ends (`aggregator prep-worker`, and a standby
// while it waits) with w's Workers, Lease and Log; it sets w's Jobs and
// Prep.
func Serve(ctx context.Context, dsn, schema string, w *Worker) error {
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
	w.Jobs, w.Prep = jobs, NewPreparer(key)
	log.Info("preparing secure-summation chunks for the aggregator's replicas", "schema", schema, "fingerprint", key.Public().Fingerprint())
	w.Run(ctx)
	return nil
}
