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
// Durability: every connection sets synchronous_commit = on, so a COMMIT
// returns only once its WAL record is flushed. A commit whose outcome is
// unknown (the connection failed after the batch or the COMMIT was sent,
// or the server answered FATAL or PANIC) returns an error wrapping
// datastore.ErrNotDurable, and the Store refuses every later Update, as
// with the log: the server restarts and re-reads the state, which is then
// whichever outcome PostgreSQL recovered. A failure known to have
// committed nothing (a connection that could not be made, a request never
// sent, a statement the server refused with an ERROR, a read that failed
// before the commit was sent) returns a plain error and the store goes
// on: a later Update reconnects.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"sync/atomic"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table is the store's table inside its schema.
const Table = "kv"

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// engine implements datastore.Backend.
type engine struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	schema string
	// lock is the advisory lock key of the schema; lockSQL takes it.
	lock    int64
	lockSQL string
	// The statements, with the schema's table in them.
	get, keys, put, del, delBucket string

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

	e.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	// Created under the schema's lock: two servers starting at once do
	// not race on CREATE ... IF NOT EXISTS.
	create := "BEGIN; " + e.lockSQL + "; CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{schema}.Sanitize() +
		"; CREATE TABLE IF NOT EXISTS " + t + " (bucket bytea NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (bucket, key)); COMMIT"
	if _, err := e.pool.Exec(ctx, create); err != nil {
		e.pool.Close()
		return nil, fmt.Errorf("pgstore: creating schema %s: %w", schema, err)
	}
	var fsync string
	if err := e.pool.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		e.pool.Close()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if fsync != "on" {
		e.log.Warn("pgstore: the server runs with fsync off: a commit survives a server crash but not a power loss", "fsync", fsync)
	}
	return datastore.New(e, opt), nil
}

// LockKey is the advisory lock (pg_advisory_xact_lock's bigint key) that
// every Update of schema holds until its transaction ends: whoever holds
// it (an operator's session, a test) holds back the store's writers.
func LockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("blanket/datastore/" + schema))
	return int64(h.Sum64())
}

// Update implements datastore.Backend.
func (e *engine) Update(fn func(datastore.Source) ([]datastore.Op, error)) error {
	ctx := context.Background()
	src := &source{e: e, begin: "BEGIN ISOLATION LEVEL READ COMMITTED; " + e.lockSQL}
	defer src.release()
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
	} else if err := src.acquire(ctx); err != nil {
		return fmt.Errorf("pgstore: %w", err) // nothing sent
	}
	br := src.conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
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
		if outcomeUnknown(err) {
			return fmt.Errorf("pgstore: commit: %w: %w", datastore.ErrNotDurable, err)
		}
		return fmt.Errorf("pgstore: commit refused, nothing written: %w", err)
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

// View implements datastore.Backend.
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
// wrote (each flushes its WAL record once, synchronous_commit being on;
// the server may share one flush between commits of different sessions),
// BytesWritten the bytes of buckets, keys and values sent in them (the
// server's WAL and heap write more: tuple headers, index entries, full
// page images).
func (e *engine) Stats() datastore.Stats {
	return datastore.Stats{Fsyncs: e.fsyncs.Load(), BytesWritten: e.written.Load()}
}

// Close implements datastore.Backend.
func (e *engine) Close() error {
	e.pool.Close()
	return nil
}

// source is one transaction's connection, acquired and begun at its first
// read.
type source struct {
	e     *engine
	begin string
	conn  *pgxpool.Conn
}

func (s *source) acquire(ctx context.Context) error {
	c, err := s.e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

// tx returns the connection, in its transaction.
func (s *source) tx(ctx context.Context) (*pgxpool.Conn, error) {
	if s.conn != nil {
		return s.conn, nil
	}
	if err := s.acquire(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if _, err := s.conn.Exec(ctx, s.begin); err != nil {
		return nil, fmt.Errorf("pgstore: beginning a transaction: %w", err)
	}
	return s.conn, nil
}

// release ends a transaction still open (fn failed) and returns the
// connection to the pool, which closes it if that did not work.
func (s *source) release() {
	if s.conn != nil {
		if pc := s.conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
			s.conn.Exec(context.Background(), "ROLLBACK")
		}
		s.conn.Release()
		s.conn = nil
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
