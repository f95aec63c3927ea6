// Package pgstore is the datastore's second engine: PostgreSQL, through
// github.com/jackc/pgx/v5. Open returns a *datastore.Store, so a server
// uses the same Update, View, Tx and ReadTx whichever engine it runs on.
//
// Each store is one schema (a relay and an aggregator can share a
// cluster, one schema each) holding one table:
//
//	kv (bucket bytea, key bytea, value bytea, primary key (bucket, key))
//
// bytea, not text: keys may hold any bytes (the aggregator's nonces), and
// bytea sorts bytewise, as Go sorts strings, so Keys keeps its order.
//
// An Update is one SQL transaction at READ COMMITTED whose first
// statement takes a transaction-scoped advisory lock on the schema
// (pg_advisory_xact_lock): the Updates of one schema, from this process
// or another, run one after the other, so each reads the state the
// previous one committed and none can fail to serialize; fn is called
// exactly once, as with the log, and never retried. (REPEATABLE READ
// would take its snapshot at that first statement, before the lock is
// granted, and read a state a concurrent Update is about to change.) The
// transaction's writes are kept in the Tx and sent at the end in one
// pipelined batch, the transaction's own reads seeing them through the
// Tx; an Update that read nothing sends lock and writes as one implicit
// transaction, one round trip. A View is a REPEATABLE READ READ ONLY
// transaction: one snapshot, begun at its first read.
//
// One store per schema: Open takes a session-level advisory lock on the
// schema (OwnerKey, on a connection of its own that every Update uses)
// and refuses with an error wrapping datastore.ErrLocked when another
// store holds it (waiting up to LockWait for a store just closed or
// killed, whose session PostgreSQL ends a moment later), as the log's
// flock refuses a second process on a state directory. Open also
// increments the schema's owner epoch (table owner): if the writing
// connection is lost, the next Update reconnects, takes the lock again and
// goes on only if the epoch is still its own, so that a store which lost
// its lock never writes after another store opened the schema in between
// (its error wraps ErrLocked and every later Update returns it). Needs a
// session, not a transaction pooler (pgbouncer's transaction mode would
// drop the lock).
//
// Durability: every connection sets synchronous_commit = on, so a COMMIT
// returns only once its WAL record is flushed. A commit whose outcome is
// unknown (the connection failed after the batch or the COMMIT was sent
// and before its answer, or the server answered the COMMIT itself, or
// the implicit transaction's end, with a FATAL or PANIC) returns an error
// wrapping datastore.ErrNotDurable, and the Store refuses every later
// Update, as with the log: the server restarts and re-reads the state,
// which is then whichever outcome PostgreSQL recovered. A failure known to
// have committed nothing (a connection that could not be made, a request
// never sent, an error of any severity, FATAL included, in answer to a
// statement before the commit point: the server processes a pipeline in
// order and processed nothing after it; a read that failed before the
// commit was sent) returns a plain error and the store goes on: the next
// Update reconnects. A connection lost while idle (the server restarted
// between two Updates) is found before anything is sent (a read without
// waiting, when it was idle for IdleCheck or more) and replaced,
// transparently.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table is the store's table inside its schema.
const Table = "kv"

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// OwnerTable holds the schema's owner epoch (one row), incremented by
// every Open.
const OwnerTable = "owner"

// LockWait is how long Open waits for the schema's owner lock before it
// returns ErrLocked: a store that was just closed, or whose process was
// killed, releases it when PostgreSQL has ended its session.
var LockWait = 10 * time.Second

// IdleCheck is how long the writing connection must have been idle for an
// Update to check it first (without waiting: a read of what the server
// may have sent, such as the FATAL of a shutdown) and replace it if it
// was lost; as pgxpool checks its idle connections. A busy store does not
// pay for the check; a server restarted under it fails the Update under
// way (ErrNotDurable, or a plain error if nothing was sent).
var IdleCheck = time.Second

// engine implements datastore.Backend.
type engine struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	schema string
	// lock is the advisory lock key of the schema; lockSQL takes it.
	lock    int64
	lockSQL string
	// owner is the session lock key (OwnerKey) and epoch the value of
	// the owner table this store wrote at Open.
	owner, epoch int64
	// The statements, with the schema's table in them.
	get, keys, put, del, delBucket, readEpoch string

	// wcfg configures the writing connection w, which holds the owner
	// lock; Updates run on it one at a time (the Store runs one Update
	// at a time), Views on the pool. wused is when w was last used;
	// fenced, once set, fails every Update (another store owns the
	// schema).
	wcfg   *pgx.ConnConfig
	w      *pgx.Conn
	wused  time.Time
	fenced error

	fsyncs, written atomic.Int64
}

// Open connects to the PostgreSQL database of dsn (a URL or key=value
// connection string, as pgx reads it) and returns the store kept in
// schema (lower case letters, digits, underscores), creating the schema
// and its table if needed. ctx bounds the connection and the creation;
// opt's Logger receives the store's failures (FS and CompactMin concern
// the log engine only).
func Open(ctx context.Context, dsn, schema string, opt *datastore.Options) (*datastore.Store, error) {
	if !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want lower case letters, digits and underscores, at most 63", schema)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	// A COMMIT returns once its WAL is flushed, whatever the server's
	// default.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	e := &engine{log: slog.New(slog.DiscardHandler), schema: schema}
	if opt != nil && opt.Logger != nil {
		e.log = opt.Logger
	}
	e.lock = LockKey(schema)
	e.lockSQL = fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", e.lock)
	t := pgx.Identifier{schema, Table}.Sanitize()
	e.get = "SELECT value FROM " + t + " WHERE bucket = $1 AND key = $2"
	e.keys = "SELECT key FROM " + t + " WHERE bucket = $1 ORDER BY key"
	e.put = "INSERT INTO " + t + " (bucket, key, value) VALUES ($1, $2, $3) ON CONFLICT (bucket, key) DO UPDATE SET value = excluded.value"
	e.del = "DELETE FROM " + t + " WHERE bucket = $1 AND key = $2"
	e.delBucket = "DELETE FROM " + t + " WHERE bucket = $1"

	e.readEpoch = "SELECT epoch FROM " + pgx.Identifier{schema, OwnerTable}.Sanitize() + " WHERE id = 1"
	e.owner = OwnerKey(schema)
	e.wcfg = cfg.ConnConfig.Copy()

	e.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	if e.w, err = pgx.ConnectConfig(ctx, e.wcfg); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if err := e.takeOwnerLock(ctx); err != nil {
		return nil, err
	}
	// Created under the schema's lock: two servers starting at once do
	// not race on CREATE ... IF NOT EXISTS.
	ot := pgx.Identifier{schema, OwnerTable}.Sanitize()
	create := "BEGIN; " + e.lockSQL + "; CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize() +
		"; CREATE TABLE IF NOT EXISTS " + t + " (bucket bytea NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (bucket, key))" +
		"; CREATE TABLE IF NOT EXISTS " + ot + " (id int PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL); COMMIT"
	if _, err := e.w.Exec(ctx, create); err != nil {
		return nil, fmt.Errorf("pgstore: creating schema %s: %w", schema, err)
	}
	if err := e.w.QueryRow(ctx, "INSERT INTO "+ot+" (id, epoch) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET epoch = "+ot+".epoch + 1 RETURNING epoch").Scan(&e.epoch); err != nil {
		return nil, fmt.Errorf("pgstore: schema %s: taking ownership: %w", schema, err)
	}
	var fsync string
	if err := e.w.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if fsync != "on" {
		e.log.Warn("pgstore: the server runs with fsync off: a commit survives a server crash but not a power loss", "fsync", fsync)
	}
	e.wused = time.Now()
	ok = true
	return datastore.New(e, opt), nil
}

// takeOwnerLock takes the owner lock on e.w, waiting up to LockWait (and
// ctx) for another store to release it.
func (e *engine) takeOwnerLock(ctx context.Context) error {
	deadline := time.Now().Add(LockWait)
	for {
		var got bool
		if err := e.w.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", e.owner).Scan(&got); err != nil {
			return fmt.Errorf("pgstore: schema %s: taking its lock: %w", e.schema, err)
		}
		if got {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: schema %s (another store holds its advisory lock %d)", datastore.ErrLocked, e.schema, e.owner)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: schema %s (another store holds its advisory lock %d; %w)", datastore.ErrLocked, e.schema, e.owner, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writer makes sure e.w is a live connection holding the owner lock, the
// schema still this store's (its epoch unchanged), checking a connection
// idle for IdleCheck or more first. Nothing is sent in a transaction
// before it returns, so its errors are plain (nothing written), but for
// a schema another store took: that error wraps ErrLocked and stays.
func (e *engine) writer(ctx context.Context) error {
	if e.fenced != nil {
		return e.fenced
	}
	if e.w != nil && !e.w.IsClosed() {
		if time.Since(e.wused) < IdleCheck {
			return nil
		}
		err := e.w.PgConn().CheckConn()
		if err == nil {
			return nil
		}
		e.log.Warn("pgstore: the connection was lost while idle; reconnecting", "schema", e.schema, "err", err)
	}
	e.dropWriter()
	w, err := pgx.ConnectConfig(ctx, e.wcfg)
	if err != nil {
		return fmt.Errorf("pgstore: reconnecting: %w", err)
	}
	var got bool
	if err := w.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", e.owner).Scan(&got); err != nil {
		w.Close(ctx)
		return fmt.Errorf("pgstore: reconnecting: %w", err)
	}
	var epoch int64
	if err := w.QueryRow(ctx, e.readEpoch).Scan(&epoch); err != nil {
		w.Close(ctx)
		return fmt.Errorf("pgstore: reconnecting: %w", err)
	}
	if !got && epoch == e.epoch {
		// This one's former session that the server has not ended yet (or
		// a store about to open the schema, whose epoch is not written
		// yet): nothing is written until it is released.
		w.Close(ctx)
		return fmt.Errorf("pgstore: reconnecting: schema %s: its advisory lock is held by another session", e.schema)
	}
	if epoch != e.epoch {
		// Another store opened the schema (a standby took over, whether
		// it still holds the lock or not): this one is fenced for good.
		if got {
			w.Exec(ctx, "SELECT pg_advisory_unlock($1)", e.owner)
		}
		w.Close(ctx)
		e.fenced = fmt.Errorf("pgstore: %w: schema %s was opened by another store (owner epoch %d, this one's %d) while this one was disconnected; it writes no more", datastore.ErrLocked, e.schema, epoch, e.epoch)
		e.log.Error("pgstore: another store took the schema", "err", e.fenced)
		return e.fenced
	}
	e.log.Info("pgstore: reconnected", "schema", e.schema)
	e.w, e.wused = w, time.Now()
	return nil
}

// dropWriter closes the writing connection (its session, and so the
// owner lock, ends with it).
func (e *engine) dropWriter() {
	if e.w != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.w.Close(ctx)
		cancel()
		e.w = nil
	}
}

// OwnerKey is the session-level advisory lock a store holds on its schema
// from Open to Close (pg_try_advisory_lock's bigint key), distinct from
// LockKey, which every Update takes for its transaction.
func OwnerKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("blanket/datastore-owner/" + schema))
	return int64(h.Sum64())
}

// LockKey is the advisory lock (pg_advisory_xact_lock's bigint key) that
// every Update of schema holds until its transaction ends: whoever holds
// it (an operator's session, a test) holds back the store's writers.
func LockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("blanket/datastore/" + schema))
	return int64(h.Sum64())
}

// Update implements datastore.Backend, on the writing connection.
func (e *engine) Update(fn func(datastore.Source) ([]datastore.Op, error)) error {
	ctx := context.Background()
	if err := e.writer(ctx); err != nil {
		return err
	}
	src := &source{e: e, begin: "BEGIN ISOLATION LEVEL READ COMMITTED; " + e.lockSQL, writer: true}
	defer func() {
		src.release()
		if e.w != nil && e.w.IsClosed() {
			e.dropWriter() // the next Update reconnects
		}
		e.wused = time.Now()
	}()
	ops, err := fn(src)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		if src.conn != nil {
			// Nothing to commit: ending the transaction releases the lock.
			if _, err := src.conn.Exec(ctx, "ROLLBACK"); err != nil {
				return fmt.Errorf("pgstore: %w", err)
			}
		}
		return nil
	}
	b := &pgx.Batch{}
	if src.conn == nil {
		// Nothing read: lock and writes as one implicit transaction.
		b.Queue(e.lockSQL)
	}
	var written int64
	for _, o := range ops {
		switch o.Kind {
		case "put":
			b.Queue(e.put, []byte(o.Bucket), []byte(o.Key), o.Value)
			written += int64(len(o.Bucket) + len(o.Key) + len(o.Value))
		case "delete":
			b.Queue(e.del, []byte(o.Bucket), []byte(o.Key))
			written += int64(len(o.Bucket) + len(o.Key))
		case "delete-bucket":
			b.Queue(e.delBucket, []byte(o.Bucket))
			written += int64(len(o.Bucket))
		default:
			return fmt.Errorf("pgstore: unknown operation %q", o.Kind)
		}
	}
	explicit := src.conn != nil
	if explicit {
		b.Queue("COMMIT")
	} else {
		src.conn = e.w
	}
	br := src.conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	// beforeCommit: the server answered a statement of the batch with
	// an error before the commit point (the COMMIT statement of an
	// explicit transaction; the end of the batch, its Sync, for an
	// implicit one), so it processed none of the batch after it: the
	// transaction did not commit, even if the answer was a FATAL (a
	// restart or a terminated session).
	beforeCommit := false
	for i := range b.Len() {
		if tag, err = br.Exec(); err != nil {
			var pe *pgconn.PgError
			beforeCommit = errors.As(err, &pe) && (!explicit || i < b.Len()-1)
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && explicit && tag.String() != "COMMIT" {
		err = fmt.Errorf("the transaction ended with %q, not COMMIT", tag.String())
	}
	if err != nil {
		if !beforeCommit && outcomeUnknown(err) {
			return fmt.Errorf("pgstore: commit: %w: %w", datastore.ErrNotDurable, err)
		}
		return fmt.Errorf("pgstore: commit failed, nothing written: %w", err)
	}
	e.fsyncs.Add(1)
	e.written.Add(written)
	return nil
}

// outcomeUnknown reports whether a failed commit may have committed: not
// when the request was never sent, nor when the server answered with an
// ERROR (the transaction is then rolled back); otherwise (the connection
// failed once the request was on its way, a FATAL or PANIC) it may have.
func outcomeUnknown(err error) bool {
	if pgconn.SafeToRetry(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity != "ERROR"
	}
	return true
}

// View implements datastore.Backend, on a connection of the pool.
func (e *engine) View(fn func(datastore.Source) error) error {
	src := &source{e: e, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}
	defer src.release()
	if err := fn(src); err != nil {
		return err
	}
	if src.conn != nil {
		if _, err := src.conn.Exec(context.Background(), "ROLLBACK"); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
	}
	return nil
}

// Stats implements datastore.Backend: Fsyncs counts the commits that
// wrote (each waits for its WAL record's flush, synchronous_commit being
// on; the server may share one flush between commits of different
// sessions: pg_stat_wal's wal_sync counts the server's own), BytesWritten
// the bytes of buckets, keys and values sent in them (the server's WAL
// and heap write more: tuple headers, index entries, full page images;
// pg_stat_wal's wal_bytes).
func (e *engine) Stats() datastore.Stats {
	return datastore.Stats{Fsyncs: e.fsyncs.Load(), BytesWritten: e.written.Load()}
}

// Close implements datastore.Backend: it releases the owner lock (before
// its session ends, so that a store opened next in this process finds it
// free) and closes the connections.
func (e *engine) Close() error {
	if e.w != nil && !e.w.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.w.Exec(ctx, "SELECT pg_advisory_unlock($1)", e.owner)
		cancel()
	}
	e.dropWriter()
	e.pool.Close()
	return nil
}

// source is one transaction's connection: the writing one for an Update,
// one of the pool for a View, begun at its first read.
type source struct {
	e      *engine
	begin  string
	writer bool
	conn   *pgx.Conn
	pc     *pgxpool.Conn // the pool's, for a View
}

// tx returns the connection, in its transaction.
func (s *source) tx(ctx context.Context) (*pgx.Conn, error) {
	if s.conn != nil {
		return s.conn, nil
	}
	if s.writer {
		s.conn = s.e.w
	} else {
		c, err := s.e.pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("pgstore: %w", err)
		}
		s.pc, s.conn = c, c.Conn()
	}
	if _, err := s.conn.Exec(ctx, s.begin); err != nil {
		return nil, fmt.Errorf("pgstore: beginning a transaction: %w", err)
	}
	return s.conn, nil
}

// release ends a transaction still open (fn failed) and returns a pool's
// connection, which the pool closes if that did not work.
func (s *source) release() {
	if s.conn != nil {
		if pc := s.conn.PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
			if _, err := s.conn.Exec(context.Background(), "ROLLBACK"); err != nil && s.writer {
				s.e.dropWriter()
			}
		}
		s.conn = nil
	}
	if s.pc != nil {
		s.pc.Release()
		s.pc = nil
	}
}

// Get implements datastore.Source.
func (s *source) Get(bucket, key string) ([]byte, bool, error) {
	ctx := context.Background()
	c, err := s.tx(ctx)
	if err != nil {
		return nil, false, err
	}
	var v []byte
	err = c.QueryRow(ctx, s.e.get, []byte(bucket), []byte(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: get %s/%q: %w", bucket, key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, nil
}

// Keys implements datastore.Source.
func (s *source) Keys(bucket string) ([]string, error) {
	ctx := context.Background()
	c, err := s.tx(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, s.e.keys, []byte(bucket))
	if err != nil {
		return nil, fmt.Errorf("pgstore: keys %s: %w", bucket, err)
	}
	ks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var k []byte
		err := r.Scan(&k)
		return string(k), err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: keys %s: %w", bucket, err)
	}
	return ks, nil
}
