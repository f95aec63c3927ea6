package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// A hot standby (docs/deploy.md, "Replicas: hot standby") is a second
// server of the same party on the same schema that waits for the owner to
// be gone and then opens the schema itself. Turn is its place in line:
// AwaitTurn returns once this process, alone among the standbys (it holds
// StandbyKey for the Turn's life), has seen the owner lock free for a
// whole grace period. The process then opens its stores (Open takes the
// owner lock and increments the epoch, which fences the former owner if
// it comes back) and releases the Turn, so that the next standby may line
// up behind it.
//
// Exactly one takeover: PostgreSQL grants an advisory lock to one session
// at a time, so one standby at most waits in line (the others wait for
// StandbyKey), and one store at most owns the schema (OwnerKey); a former
// owner that reconnects finds another epoch and writes no more (writer).
// The grace lets an owner whose connection dropped with the database (a
// PostgreSQL restart) take its lock back before a standby does: its store
// reconnects on its next Update, and serverstore's watchdog makes one
// every second.
type Turn struct {
	conn *pgx.Conn
}

// StandbyKey is the session-level advisory lock of the standby next in
// line on schema (distinct from OwnerKey and LockKey).
func StandbyKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("blanket/datastore-standby/" + schema))
	return int64(h.Sum64())
}

// pollEvery is how often a standby looks at the locks.
var pollEvery = 250 * time.Millisecond

// AwaitTurn waits, as a hot standby, until schema's owner lock has been
// free for grace (continuously, as seen by this process's polls every
// 250 ms; a poll that fails starts the count again) while this process
// holds the standby's place in line. It returns ctx's error if ctx ends
// first. A lost connection is remade (the place in line taken again).
func AwaitTurn(ctx context.Context, dsn, schema string, grace time.Duration, log *slog.Logger) (*Turn, error) {
	if !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want lower case letters, digits and underscores, at most 63", schema)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	t := &Turn{}
	inLine := false
	var freeSince time.Time
	owner, standby := OwnerKey(schema), StandbyKey(schema)
	for {
		if err := ctx.Err(); err != nil {
			t.Release()
			return nil, err
		}
		if t.conn == nil || t.conn.IsClosed() {
			inLine, freeSince = false, time.Time{}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			t.conn, err = pgx.ConnectConfig(cctx, cfg)
			cancel()
			if err != nil {
				t.conn = nil
				log.Warn("standby: cannot reach PostgreSQL; retrying", "schema", schema, "err", err)
				sleep(ctx, time.Second)
				continue
			}
		}
		if !inLine {
			if err := t.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", standby).Scan(&inLine); err != nil {
				t.drop()
				continue
			}
			if inLine {
				log.Info("standby: next in line; waiting for the owner to be gone", "schema", schema, "grace", grace)
			}
		}
		if inLine {
			k := uint64(owner)
			var held int
			err := t.conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
				AND classid = $1 AND objid = $2 AND objsubid = 1`, uint32(k>>32), uint32(k)).Scan(&held)
			switch {
			case err != nil:
				t.drop()
				continue
			case held > 0:
				freeSince = time.Time{}
			case freeSince.IsZero():
				freeSince = time.Now()
			case time.Since(freeSince) >= grace:
				log.Info("standby: the owner is gone; taking over", "schema", schema, "free_for", time.Since(freeSince).Round(time.Millisecond))
				return t, nil
			}
		}
		sleep(ctx, pollEvery)
	}
}

// Release gives up the place in line (once the stores are open, or on
// failure); later calls do nothing.
func (t *Turn) Release() {
	if t == nil {
		return
	}
	t.drop()
}

func (t *Turn) drop() {
	if t.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.conn.Close(ctx) // the session ends, and its locks with it
		cancel()
		t.conn = nil
	}
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
