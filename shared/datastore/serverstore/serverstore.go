// Package serverstore opens a server's datastore where its settings say:
// the embedded log in its state directory (the default: -store empty) or
// PostgreSQL (-store postgres://..., one schema per party, package
// pgstore). Every place that opens the relay's or the aggregator's store
// goes through Open, so both engines see the same checks. It links pgx:
// the wasm client must not import it (it imports shared/datastore alone).
//
// The state directory stays the place of the former files a server
// imports once, whichever engine. So that a directory's state is never
// read from one engine and then silently started afresh on the other (a
// new key, an empty privacy ledger), Open refuses PostgreSQL for a
// directory whose embedded store holds data, and the embedded store for a
// directory that records a PostgreSQL store (datastore.LocationFile,
// written at the first PostgreSQL Open); moving a store between engines
// is not supported yet.
package serverstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
)

// Default schemas of the two parties (-store-schema).
const (
	RelaySchema      = "blanket_relay"
	AggregatorSchema = "blanket_aggregator"
)

// Config says where a server's store is.
type Config struct {
	// Dir is the state directory: the embedded store's, and where the
	// former files are imported from.
	Dir string
	// URL is empty for the embedded store, or a PostgreSQL connection
	// URL (postgres:// or postgresql://). Its password is better left
	// out: pgx reads PGPASSWORD and ~/.pgpass as libpq does.
	URL string
	// Schema is the PostgreSQL schema (one per party: two servers never
	// share one, and a second store on a schema is refused, ErrLocked).
	Schema string
	// ConnectTimeout bounds the connection and the wait for the
	// schema's lock at Open (0: 30 s).
	ConnectTimeout time.Duration
	// Standby (-standby, PostgreSQL only) makes the server a hot standby:
	// AwaitTurn waits until the schema's owner has been gone for
	// StandbyGrace (-standby-grace; 0: DefaultStandbyGrace) before the
	// server opens its store (pgstore.AwaitTurn).
	Standby      bool
	StandbyGrace time.Duration
	// OnLost, if set, is called once (from another goroutine) when a
	// PostgreSQL store opened by Open is lost for good: another store took
	// the schema (an error wrapping datastore.ErrLocked) or a commit's
	// outcome is unknown (datastore.ErrNotDurable). The server should then
	// stop, so that its supervisor starts it again on the durable state,
	// or as a standby. A watchdog checks the store every WatchEvery,
	// which also takes the owner lock back at once after the database
	// restarted (before a standby's grace ends).
	OnLost func(error)
}

// DefaultStandbyGrace is how long a standby waits, the owner's lock free,
// before it takes over: longer than WatchEvery, so that an owner whose
// session ended with a PostgreSQL restart takes its lock back first.
const DefaultStandbyGrace = 3 * time.Second

// WatchEvery is how often the watchdog of Config.OnLost checks a store.
var WatchEvery = time.Second

// AddFlags defines -store and -store-schema on fs, into c; defaultSchema
// is the party's (RelaySchema or AggregatorSchema).
func AddFlags(fs *flag.FlagSet, c *Config, defaultSchema string) {
	fs.StringVar(&c.URL, "store", "", "where the state is: empty for the datastore in -state (store.log), or a PostgreSQL URL, postgres://USER@HOST:PORT/DB?sslmode=... (the password from PGPASSWORD or ~/.pgpass, not the URL)")
	fs.StringVar(&c.Schema, "store-schema", defaultSchema, "the PostgreSQL schema of this server's state (with -store postgres://...): one per server, never shared")
	fs.BoolVar(&c.Standby, "standby", false, "with -store postgres://...: run as a hot standby of the server that owns -store-schema: wait, without listening, until it has been gone for -standby-grace, then take over its state (docs/deploy.md)")
	fs.DurationVar(&c.StandbyGrace, "standby-grace", DefaultStandbyGrace, "with -standby: how long the owner's lock must stay free before this standby takes over")
}

// Postgres reports whether the store is PostgreSQL.
func (c Config) Postgres() bool { return c.URL != "" }

// Validate checks the settings without connecting.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("serverstore: empty state directory")
	}
	if c.URL == "" {
		if c.Standby {
			return errors.New("serverstore: -standby needs a PostgreSQL -store (a standby takes over the schema its owner leaves)")
		}
		return nil
	}
	if c.StandbyGrace < 0 {
		return errors.New("serverstore: -standby-grace must not be negative")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("serverstore: -store %q: want empty (the store in the state directory) or a postgres:// URL", Redact(c.URL))
	}
	if c.Schema == "" {
		return errors.New("serverstore: -store-schema is empty")
	}
	return nil
}

// String describes the store for logs, without a password.
func (c Config) String() string {
	if c.URL == "" {
		return filepath.Join(c.Dir, datastore.LogFile)
	}
	return Redact(c.URL) + " schema " + c.Schema
}

// Redact replaces a URL's password by "***".
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "(an unparsable URL)"
		}
		return s
	}
	return u.Redacted()
}

// Open opens the store c says (see the package comment for the checks).
// opt's Logger receives the engine's events; FS and CompactMin concern
// the embedded store only.
func Open(ctx context.Context, c Config, opt *datastore.Options) (*datastore.Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	loc := filepath.Join(c.Dir, datastore.LocationFile)
	recorded, err := os.ReadFile(loc)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("serverstore: %w", err)
	}
	if !c.Postgres() {
		if recorded != nil {
			return nil, fmt.Errorf("serverstore: %s's store is in PostgreSQL (%s says %q): give its -store and -store-schema", c.Dir, loc, strings.TrimSpace(string(recorded)))
		}
		return datastore.Open(c.Dir, opt)
	}
	if fi, err := os.Stat(filepath.Join(c.Dir, datastore.LogFile)); err == nil && fi.Size() > int64(datastore.HeaderSize) {
		return nil, fmt.Errorf("serverstore: %s holds an embedded store (%s) and -store names PostgreSQL: moving a store between engines is not supported; start PostgreSQL with another state directory, or leave -store empty", c.Dir, datastore.LogFile)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("serverstore: %w", err)
	}
	timeout := c.ConnectTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := pgstore.Open(octx, c.URL, c.Schema, opt)
	if err != nil {
		return nil, fmt.Errorf("serverstore: %s: %w", c, err)
	}
	want := "schema " + c.Schema
	if c.OnLost != nil {
		go watch(s, c.OnLost)
	}
	if recorded != nil {
		if !strings.Contains("\n"+string(recorded), "\n"+want+"\n") {
			s.Close()
			return nil, fmt.Errorf("serverstore: %s records the store of %s in another schema (%q): the state is not started afresh in schema %s (edit or remove the file if that is meant)", c.Dir, loc, strings.TrimSpace(string(recorded)), c.Schema)
		}
	} else {
		rec := "postgres " + Redact(c.URL) + "\n" + want + "\n"
		if err := os.WriteFile(loc, []byte(rec), 0o600); err != nil {
			s.Close()
			return nil, fmt.Errorf("serverstore: %w", err)
		}
	}
	return s, nil
}

// AwaitTurn returns at once for a server that is not a standby (a Turn
// that Release ignores). A standby (c.Standby) waits there until it may
// take over the schema (pgstore.AwaitTurn), or ctx ends; it then opens
// its stores and releases the Turn.
func AwaitTurn(ctx context.Context, c Config, log *slog.Logger) (*pgstore.Turn, error) {
	if !c.Standby {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	grace := c.StandbyGrace
	if grace <= 0 {
		grace = DefaultStandbyGrace
	}
	if log != nil {
		log.Info("standby: waiting for the owner of the state to be gone (not listening meanwhile)", "store", c.String())
	}
	t, err := pgstore.AwaitTurn(ctx, c.URL, c.Schema, grace, log)
	if err != nil {
		return nil, fmt.Errorf("serverstore: standby: %w", err)
	}
	return t, nil
}

// errWatch is what the watchdog's probe returns to roll back.
var errWatch = errors.New("serverstore: watchdog probe")

// watch checks db every WatchEvery with a transaction that writes nothing
// (as readiness.Store) until db is closed, and calls lost once if it is
// lost for good (see Config.OnLost).
func watch(db *datastore.Store, lost func(error)) {
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	for range t.C {
		err := db.Update(func(*datastore.Tx) error { return errWatch })
		switch {
		case errors.Is(err, errWatch):
		case errors.Is(err, datastore.ErrClosed):
			return
		case errors.Is(err, datastore.ErrLocked), errors.Is(err, datastore.ErrNotDurable):
			lost(err)
			return
		}
	}
}
