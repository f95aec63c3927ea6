package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// JobsTable is the schema's queue of leased jobs (Jobs).
const JobsTable = "jobs"

// Jobs is a queue of jobs in a schema, shared by the replicas of one
// party (the Janus pattern): a replica Enqueues a job, any replica Leases
// it with one UPDATE ... FOR UPDATE SKIP LOCKED statement (a fresh random
// token, an expiry, an attempt count) and Completes it with its result,
// which only the holder of the current lease can do; the enqueuer reads
// the Result (woken by Done) and Removes the row.
//
// Exactly once: a job is leased by at most one replica at a time (the
// row is locked while the statement chooses it, skipped by the others,
// and leasable again only once its lease expired), a lease that expires is
// taken over by exactly one replica (attempts + 1), and a job is completed
// once: Complete matches the lease's token and the job not yet done, so
// the holder of an expired lease that another replica took over gets
// ErrLeaseLost (TestLeaseTakenOverOnce).
//
// The table is UNLOGGED: a job is work a replica can do again, not state
// (the state its result enters is written by the owner through the Store,
// durably), so its bytes (a chunk of reports) cost no WAL; after a crash
// of PostgreSQL the table is empty, Result returns ErrJobGone and the
// enqueuer does the work itself. The id sequence of an unlogged table
// restarts too after a crash, so a job is named by its id and a random
// tag (Ticket): a waiter from before the crash never reads, nor removes,
// the job that reuses its id. Completion and new jobs are announced with
// NOTIFY; waiters also poll, so a lost notification costs at most
// PollEvery.
type Jobs struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	schema string
	ch     string // the NOTIFY channel
	// The statements, with the schema's table in them.
	enqueue, lease, complete, result, remove, removeRounds string

	// mu guards newJob, done and warned: channels closed when a job was
	// enqueued, and when the job of that id was completed; when Next last
	// logged a failure.
	mu     sync.Mutex
	newJob chan struct{}
	done   map[int64]chan struct{}
	warned time.Time

	stop   context.CancelFunc
	listen sync.WaitGroup
}

// PollEvery is how often Next and Wait look again without a notification.
var PollEvery = 250 * time.Millisecond

// ErrLeaseLost: the lease expired and another replica took the job over,
// or the job was completed or removed; the result was not stored.
var ErrLeaseLost = errors.New("pgstore: the job's lease was lost")

// Ticket names an enqueued job: its id and its random tag.
type Ticket struct {
	ID  int64
	tag int64
}

// ErrJobGone: the job is no longer in the queue (removed, or lost with an
// unlogged table at a crash of PostgreSQL).
var ErrJobGone = errors.New("pgstore: the job is gone")

// Lease is one job leased to this replica until Expires.
type Lease struct {
	ID      int64
	Kind    string
	Round   int64
	Attempt int // 1 for the first lease, more for a lease taken over
	Payload []byte
	Expires time.Time
	token   int64
}

// OpenJobs connects to dsn and returns the queue of schema, creating the
// schema and its unlogged table if needed. It takes no lock on the schema:
// every replica of the party, the standby included, opens it.
func OpenJobs(ctx context.Context, dsn, schema string, log *slog.Logger) (*Jobs, error) {
	if !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want lower case letters, digits and underscores, at most 63", schema)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	j := &Jobs{log: log, schema: schema, newJob: make(chan struct{}), done: make(map[int64]chan struct{})}
	h := fnv.New64a()
	h.Write([]byte("blanket-jobs:" + schema))
	j.ch = fmt.Sprintf("blanket_jobs_%x", h.Sum64())
	t := pgx.Identifier{schema, JobsTable}.Sanitize()
	j.enqueue = "WITH i AS (INSERT INTO " + t + " (kind, round, payload, tag) VALUES ($1, $2, $3, $4) RETURNING id) " +
		"SELECT id, pg_notify('" + j.ch + "', 'n') FROM i"
	j.lease = "UPDATE " + t + " SET token = $2, expires = clock_timestamp() + make_interval(secs => $3), attempts = attempts + 1 " +
		"WHERE id = (SELECT id FROM " + t + " WHERE kind = $1 AND NOT done AND (token IS NULL OR expires < clock_timestamp()) " +
		"ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, round, attempts, payload, expires"
	j.complete = "WITH u AS (UPDATE " + t + " SET done = true, result = $3, payload = NULL, token = NULL " +
		"WHERE id = $1 AND token = $2 AND NOT done RETURNING id) SELECT id, pg_notify('" + j.ch + "', 'd' || id) FROM u"
	j.result = "SELECT done, result FROM " + t + " WHERE id = $1 AND tag = $2"
	j.remove = "DELETE FROM " + t + " WHERE id = $1 AND tag = $2"
	j.removeRounds = "DELETE FROM " + t + " WHERE kind = $1 AND round < $2"

	if j.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	// Created under the schema's lock (that of pgstore.Open and of every
	// Update): replicas and the owner starting at once do not race on
	// CREATE ... IF NOT EXISTS. Sealed shares and partial sums do not
	// compress: stored out of line as they are (STORAGE EXTERNAL),
	// PostgreSQL does not try (pglz) at each insert; altered once, when
	// the table is made (an ALTER locks the table).
	create := fmt.Sprintf("BEGIN; SELECT pg_advisory_xact_lock(%d); CREATE SCHEMA IF NOT EXISTS %s; "+
		"DO $$ BEGIN IF to_regclass('%s') IS NULL THEN "+
		"CREATE UNLOGGED TABLE %s (id bigserial PRIMARY KEY, tag bigint NOT NULL, kind text NOT NULL, round bigint NOT NULL, "+
		"payload bytea, token bigint, expires timestamptz, attempts int NOT NULL DEFAULT 0, done boolean NOT NULL DEFAULT false, "+
		"result bytea); "+
		"ALTER TABLE %s ALTER COLUMN payload SET STORAGE EXTERNAL, ALTER COLUMN result SET STORAGE EXTERNAL; "+
		"END IF; END $$; COMMIT", LockKey(schema), pgx.Identifier{schema}.Sanitize(), t, t, t)
	if _, err := j.pool.Exec(ctx, create); err != nil {
		j.pool.Close()
		return nil, fmt.Errorf("pgstore: creating the jobs of %s: %w", schema, err)
	}
	lctx, stop := context.WithCancel(context.Background())
	j.stop = stop
	j.listen.Go(func() { j.listenLoop(lctx, cfg.ConnConfig) })
	return j, nil
}

// Close stops listening and closes the connections.
func (j *Jobs) Close() {
	j.stop()
	j.listen.Wait()
	j.pool.Close()
}

// listenLoop LISTENs on the queue's channel on a connection of its own,
// reconnecting after a failure, and wakes the waiters.
func (j *Jobs) listenLoop(ctx context.Context, cfg *pgx.ConnConfig) {
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+j.ch)
		}
		for err == nil {
			var n *pgconn.Notification
			n, err = conn.WaitForNotification(ctx)
			if err == nil {
				j.wake(n.Payload)
			}
		}
		if conn != nil {
			conn.Close(context.Background())
		}
		if ctx.Err() == nil {
			j.log.Debug("pgstore: jobs: listening again", "err", err)
			sleep(ctx, PollEvery)
		}
	}
}

func (j *Jobs) wake(payload string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if payload == "n" {
		close(j.newJob)
		j.newJob = make(chan struct{})
		return
	}
	if id, err := strconv.ParseInt(strings.TrimPrefix(payload, "d"), 10, 64); err == nil {
		if c, ok := j.done[id]; ok {
			close(c)
			delete(j.done, id)
		}
	}
}

// Enqueue adds a job of kind for round with payload.
func (j *Jobs) Enqueue(ctx context.Context, kind string, round int64, payload []byte) (Ticket, error) {
	t := Ticket{tag: randomInt64()}
	var ignored string
	if err := j.pool.QueryRow(ctx, j.enqueue, kind, round, payload, t.tag).Scan(&t.ID, &ignored); err != nil {
		return Ticket{}, fmt.Errorf("pgstore: enqueuing a job: %w", err)
	}
	return t, nil
}

func randomInt64() int64 {
	var b [8]byte
	rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// Lease leases the oldest job of kind that is neither done nor leased (or
// whose lease expired) for d, or returns nil if there is none.
func (j *Jobs) Lease(ctx context.Context, kind string, d time.Duration) (*Lease, error) {
	l := &Lease{Kind: kind, token: randomInt64()}
	err := j.pool.QueryRow(ctx, j.lease, kind, l.token, d.Seconds()).Scan(&l.ID, &l.Round, &l.Attempt, &l.Payload, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: leasing a job: %w", err)
	}
	return l, nil
}

// Next waits for a job of kind to lease (Lease), until ctx ends.
func (j *Jobs) Next(ctx context.Context, kind string, d time.Duration) (*Lease, error) {
	for {
		j.mu.Lock()
		woken := j.newJob
		j.mu.Unlock()
		l, err := j.Lease(ctx, kind, d)
		if l != nil || (err != nil && ctx.Err() != nil) {
			return l, err
		}
		if err != nil {
			j.mu.Lock()
			if time.Since(j.warned) > 30*time.Second {
				j.warned = time.Now()
				j.log.Warn("pgstore: leasing a job", "err", err)
			}
			j.mu.Unlock()
		}
		select {
		case <-woken:
		case <-time.After(PollEvery):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Complete stores the result of the leased job, or returns ErrLeaseLost
// if the lease is no longer this replica's (expired and taken over, or
// the job removed): exactly one lease of a job completes it.
func (j *Jobs) Complete(ctx context.Context, l *Lease, result []byte) error {
	var id int64
	var ignored string
	err := j.pool.QueryRow(ctx, j.complete, l.ID, l.token, result).Scan(&id, &ignored)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgstore: job %d, attempt %d: %w", l.ID, l.Attempt, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("pgstore: completing job %d: %w", l.ID, err)
	}
	return nil
}

// Result returns the result of job t and whether it is done, or
// ErrJobGone.
func (j *Jobs) Result(ctx context.Context, t Ticket) ([]byte, bool, error) {
	var done bool
	var res []byte
	err := j.pool.QueryRow(ctx, j.result, t.ID, t.tag).Scan(&done, &res)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("pgstore: job %d: %w", t.ID, ErrJobGone)
	}
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: job %d: %w", t.ID, err)
	}
	return res, done, nil
}

// Done returns a channel closed when job id is announced completed (or
// soon after: callers poll Result as well).
func (j *Jobs) Done(id int64) <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	c, ok := j.done[id]
	if !ok {
		c = make(chan struct{})
		j.done[id] = c
	}
	return c
}

// NewJob returns a channel closed when a job is next enqueued.
func (j *Jobs) NewJob() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.newJob
}

// Forget drops the waiter of job id (Done) that will not be used.
func (j *Jobs) Forget(id int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.done, id)
}

// Remove deletes job t (done or not).
func (j *Jobs) Remove(ctx context.Context, t Ticket) error {
	if _, err := j.pool.Exec(ctx, j.remove, t.ID, t.tag); err != nil {
		return fmt.Errorf("pgstore: removing job %d: %w", t.ID, err)
	}
	return nil
}

// RemoveEarlierRounds deletes the jobs of kind of the rounds before round
// (those of a closed round, or enqueued by a replica that died).
func (j *Jobs) RemoveEarlierRounds(ctx context.Context, kind string, round int64) error {
	if _, err := j.pool.Exec(ctx, j.removeRounds, kind, round); err != nil {
		return fmt.Errorf("pgstore: removing jobs: %w", err)
	}
	return nil
}
