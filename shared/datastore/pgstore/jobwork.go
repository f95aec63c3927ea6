package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"
)

// Executor does one job: it takes the job's bytes and gives the result's,
// using up to workers goroutines. An error means the job does not execute
// on any replica (bytes that do not parse, a key or format it is not
// for): the enqueuer then does the work itself.
type Executor interface {
	Execute(job []byte, workers int) ([]byte, error)
}

// DefaultJobLease is how long a replica holds a job before another may
// take it over, when JobWorker.Lease is 0: a job (a chunk of at most the
// relay's chunk size, 8 reports by default) is done in well under a
// second even on a busy machine.
const DefaultJobLease = 10 * time.Second

// JobWorker leases the jobs of one kind from a queue and executes them:
// the replicas of a party that share work (aggregator/internal/prepjob,
// relay/internal/prepjob) each run one, and the party's owner runs one
// inside its JobOffload.
type JobWorker struct {
	Jobs    *Jobs
	Kind    string
	Exec    Executor
	Workers int           // goroutines per job (0: GOMAXPROCS)
	Lease   time.Duration // 0: DefaultJobLease
	Log     *slog.Logger

	done, takenOver, lost, failed atomic.Int64
}

// Done is the number of jobs this worker executed and completed.
func (w *JobWorker) Done() int64 { return w.done.Load() }

// Failed is the number of jobs this worker could not execute (it stored
// why: the enqueuer does them), Lost the number whose result it could not
// store (its lease was taken over, or PostgreSQL failed).
func (w *JobWorker) Failed() int64 { return w.failed.Load() }

// Lost: see Failed.
func (w *JobWorker) Lost() int64 { return w.lost.Load() }

// TakenOver is the number of jobs this worker completed on a lease it
// took over (another replica's expired: attempt 2 or more).
func (w *JobWorker) TakenOver() int64 { return w.takenOver.Load() }

func (w *JobWorker) lease() time.Duration {
	if w.Lease > 0 {
		return w.Lease
	}
	return DefaultJobLease
}

// A job's result starts with one of these.
const (
	jobOK     byte = 0 // then the Executor's result
	jobFailed byte = 1 // then why (text)
)

// completeTimeout bounds storing a result.
const completeTimeout = 10 * time.Second

// One executes the leased job l and completes it, with a context of its
// own: work done is not lost to a replica stopping (a standby taking
// over), nor to a job that ran past its lease and was not taken over
// (the token decides, whatever the clocks say).
func (w *JobWorker) One(l *Lease) {
	n := w.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	res, err := w.Exec.Execute(l.Payload, n)
	if err != nil {
		// A job that does not execute here will not anywhere: its result
		// says why, and the enqueuer does the work itself (which ends the
		// round if the bytes it was sent are at fault).
		w.Log.Warn("a job does not execute", "kind", w.Kind, "job", l.ID, "round", l.Round, "err", err)
		res = append([]byte{jobFailed}, err.Error()...)
	} else {
		res = append([]byte{jobOK}, res...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	if err := w.Jobs.Complete(ctx, l, res); err != nil {
		w.lost.Add(1)
		w.Log.Warn("a job's result was not stored", "kind", w.Kind, "job", l.ID, "round", l.Round, "attempt", l.Attempt, "err", err)
		return
	}
	if res[0] == jobFailed {
		w.failed.Add(1)
		return
	}
	w.done.Add(1)
	if l.Attempt > 1 {
		w.takenOver.Add(1)
		w.Log.Info("completed a job whose lease another replica let expire", "kind", w.Kind, "job", l.ID, "round", l.Round, "attempt", l.Attempt)
	}
}

// Run leases and executes jobs until ctx ends.
func (w *JobWorker) Run(ctx context.Context) {
	for {
		l, err := w.Jobs.Next(ctx, w.Kind, w.lease())
		if err != nil {
			return
		}
		w.One(l)
	}
}

// JobOffload is the owner's side: Do enqueues a job and waits for its
// result, executing jobs itself meanwhile (after HelpAfter).
type JobOffload struct {
	W *JobWorker
	// HelpAfter is how long Do leaves the jobs to the other replicas
	// before it leases them itself (0: at once; more keeps the owner's CPU
	// for its intake while other replicas keep up).
	HelpAfter time.Duration
	// round is the last round Do enqueued a job of: at the next, the jobs
	// of earlier rounds (left by a replica that died) are removed.
	round atomic.Uint64
}

// Do enqueues job for round and returns its result once a replica (this
// one included: while it waits it leases jobs of its kind, its own or
// others', and executes them) has done it. It returns an error if the
// queue fails, the job is lost (a crash of PostgreSQL empties the
// unlogged table), the job failed, or no result came within twice the
// lease and 30 s: the caller then does the work itself.
func (o *JobOffload) Do(ctx context.Context, round uint64, job []byte) ([]byte, error) {
	w := o.W
	if o.round.Swap(round) != round {
		if err := w.Jobs.RemoveEarlierRounds(ctx, w.Kind, int64(round)); err != nil {
			w.Log.Warn("removing earlier rounds' jobs", "kind", w.Kind, "err", err)
		}
	}
	id, err := w.Jobs.Enqueue(ctx, w.Kind, int64(round), job)
	if err != nil {
		return nil, err
	}
	defer func() {
		w.Jobs.Forget(id.ID)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Jobs.Remove(rctx, id); err != nil {
			w.Log.Warn("removing a job", "kind", w.Kind, "job", id.ID, "err", err)
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
			case len(res) > 0 && res[0] == jobOK:
				return res[1:], nil
			case len(res) > 0 && res[0] == jobFailed:
				return nil, fmt.Errorf("pgstore: %s job %d of round %d: %s", w.Kind, id.ID, round, res[1:])
			}
			return nil, fmt.Errorf("pgstore: %s job %d of round %d: a result of an unknown kind", w.Kind, id.ID, round)
		}
		if time.Now().After(bound) {
			return nil, fmt.Errorf("pgstore: %s job %d of round %d not done in twice the lease and 30 s", w.Kind, id.ID, round)
		}
		// A new job wakes this owner only once it helps: before, it waits
		// for its own job's completion, the poll, or the moment it starts
		// helping, and costs PostgreSQL no read at every other job
		// enqueued.
		var newJob <-chan struct{}
		wait := PollEvery
		if helping := time.Since(start); helping >= o.HelpAfter {
			newJob = w.Jobs.NewJob() // before Lease: a job enqueued meanwhile wakes it
			l, err := w.Jobs.Lease(ctx, w.Kind, w.lease())
			if err != nil {
				return nil, err
			}
			if l != nil {
				w.One(l)
				continue
			}
		} else {
			wait = min(wait, o.HelpAfter-helping)
		}
		select {
		case <-done:
		case <-newJob:
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// ServeJobs is a replica that only does jobs (`aggregator prep-worker`,
// `relay prep-worker`, a standby while it waits): it waits for the key
// stored under name in bucket of schema (the owner stores it at its first
// start; read with ReadBuckets, no lock taken), builds the Executor with
// exec, opens the queue and runs w until ctx ends. It sets w's Jobs and
// Exec; w's Kind, Workers, Lease and Log are the caller's.
func ServeJobs(ctx context.Context, dsn, schema, bucket, name string, exec func(key []byte) (Executor, error), w *JobWorker) error {
	var x Executor
	for x == nil {
		st, err := ReadBuckets(ctx, dsn, schema, []string{bucket})
		if err == nil {
			if raw, ok := st[bucket][name]; ok {
				if x, err = exec(raw); err != nil {
					return fmt.Errorf("pgstore: the stored key: %w", err)
				}
				break
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			w.Log.Debug("reading the key", "kind", w.Kind, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	jobs, err := OpenJobs(ctx, dsn, schema, w.Log)
	if err != nil {
		return err
	}
	defer jobs.Close()
	w.Jobs, w.Exec = jobs, x
	w.Run(ctx)
	return nil
}

// ErrTruncatedJob: a job's or a result's bytes end early.
var ErrTruncatedJob = errors.New("pgstore: truncated job")

// AppendItem appends item with its length (4 bytes, big-endian) first:
// the framing of the jobs' payloads and results.
func AppendItem(b, item []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(item)))
	return append(b, item...)
}

// AppendList appends the items' count (4) and each item (AppendItem).
func AppendList(b []byte, items [][]byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(items)))
	for _, it := range items {
		b = AppendItem(b, it)
	}
	return b
}

// TakeItem reads one AppendItem item from b and returns it and the rest
// (both alias b).
func TakeItem(b []byte) (item, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, ErrTruncatedJob
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(len(b)-4) < uint64(n) {
		return nil, nil, ErrTruncatedJob
	}
	return b[4 : 4+n], b[4+n:], nil
}

// TakeList reads an AppendList list of at most limit items from b and
// returns them and the rest (aliasing b).
func TakeList(b []byte, limit uint64) (items [][]byte, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, ErrTruncatedJob
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > limit || uint64(n) > uint64(len(b))/4 {
		return nil, nil, fmt.Errorf("pgstore: a list of %d items", n)
	}
	items = make([][]byte, n)
	for i := range items {
		if items[i], b, err = TakeItem(b); err != nil {
			return nil, nil, err
		}
	}
	return items, b, nil
}
