// Package relaystore keeps the relay's state in one transactional store
// (shared/datastore: the file store.log in its state directory, or a
// PostgreSQL schema with -store, shared/datastore/serverstore): the
// outbox (what the relay owes the aggregator: batches, aborts, open-round
// markers, secure summation's close and noised aggregate share) and the
// secure-summation helper key. Every write is one datastore Update: when it
// returns nil it is durable (fsynced), and concurrent writes share one
// fsync (group commit). The relay's noise ledger and the aggregator's head
// it holds are in the same store (shared/ledger.OpenNoiseStore on DB, its
// own buckets; their former files are imported by it).
//
// A state directory in the format before the store (one file per outbox
// record, 00000000000000000007.batch, and helper.key) is imported on the
// first Open, in one transaction, after which every imported file is
// renamed NAME.imported (kept, never read again).
package relaystore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
)

// Buckets of the relay's records.
const (
	// BucketOutbox holds the outbox: key outbox.Name(round, kind), value
	// the record's bytes.
	BucketOutbox = "relay/outbox"
	// BucketKeys holds the helper key (key "helper": the 32-byte scalar
	// of helperkey.Key.MarshalBinary).
	BucketKeys = "relay/keys"
)

// HelperKeyName is the helper key's name in BucketKeys (a relay
// prep-worker reads it there: relay/internal/prepjob).
const HelperKeyName = "helper"

// ImportedSuffix is appended to the name of every file imported from a
// state directory in the former format.
const ImportedSuffix = ".imported"

// Store is the relay's state. It implements outbox.Store.
type Store struct {
	db  *datastore.Store
	log *slog.Logger
}

var _ outbox.Store = (*Store)(nil)

// Open opens (creating) the embedded store in dir and imports the files
// of the former format found there (see the package comment). opt may be
// nil; its Logger, if any, also receives the import's events.
func Open(dir string, opt *datastore.Options) (*Store, error) {
	return OpenIn(context.Background(), serverstore.Config{Dir: dir}, opt)
}

// OpenIn opens the store where c says (the embedded store in c.Dir, or
// PostgreSQL: serverstore.Open) and imports the former files of c.Dir.
func OpenIn(ctx context.Context, c serverstore.Config, opt *datastore.Options) (*Store, error) {
	dir := c.Dir
	if dir == "" {
		return nil, errors.New("relaystore: empty state directory")
	}
	db, err := serverstore.Open(ctx, c, opt)
	if err != nil {
		return nil, fmt.Errorf("relaystore: %w", err)
	}
	s := &Store{db: db, log: slog.New(slog.DiscardHandler)}
	if opt != nil && opt.Logger != nil {
		s.log = opt.Logger
	}
	if err := s.importOld(dir, opt); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// DB returns the underlying store (Stats, and records of other kinds).
func (s *Store) DB() *datastore.Store { return s.db }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// importOld imports the former format's files in one transaction, then
// renames each NAME.imported. A crash between the two imports them again
// at the next Open: the same bytes, as nothing else ran in between.
func (s *Store) importOld(dir string, opt *datastore.Options) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("relaystore: %w", err)
	}
	type file struct {
		name string
		data []byte
	}
	var records []file
	var key []byte
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		if _, ok := outbox.ParseName(name); ok {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return fmt.Errorf("relaystore: importing %s: %w", name, err)
			}
			records = append(records, file{name, b})
		}
		if name == helperkey.File {
			// LoadOrCreate loads an existing file with its checks: mode
			// 0600, exactly one key.
			k, _, err := helperkey.LoadOrCreate(filepath.Join(dir, name))
			if err != nil {
				return fmt.Errorf("relaystore: importing the helper key: %w", err)
			}
			if key, err = k.MarshalBinary(); err != nil {
				return fmt.Errorf("relaystore: %w", err)
			}
		}
	}
	if len(records) == 0 && key == nil {
		return nil
	}
	err = s.db.Update(func(tx *datastore.Tx) error {
		if key != nil {
			if old, ok := tx.Get(BucketKeys, HelperKeyName); ok && !bytes.Equal(old, key) {
				return fmt.Errorf("relaystore: %s differs from the helper key already in the store; refusing to replace it", helperkey.File)
			}
			tx.Put(BucketKeys, HelperKeyName, key)
		}
		for _, r := range records {
			tx.Put(BucketOutbox, r.name, r.data)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("relaystore: importing the former state files: %w", err)
	}
	names := make([]string, 0, len(records)+1)
	for _, r := range records {
		names = append(names, r.name)
	}
	if key != nil {
		names = append(names, helperkey.File)
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(dir, n), filepath.Join(dir, n+ImportedSuffix)); err != nil {
			return fmt.Errorf("relaystore: %w", err)
		}
	}
	fsys := datastore.FileSystem(datastore.OS{})
	if opt != nil && opt.FS != nil {
		fsys = opt.FS
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("relaystore: %w", err)
	}
	s.log.Info("imported the relay's former state files into the store", "records", len(records), "helper_key", key != nil)
	return nil
}

// HelperKey returns the relay's helper key, generating and storing a new
// one (durably, before it is returned) if the store has none.
func (s *Store) HelperKey() (key *helperkey.Key, created bool, err error) {
	var raw []byte
	err = s.db.View(func(tx *datastore.ReadTx) error {
		if b, ok := tx.Get(BucketKeys, HelperKeyName); ok {
			raw = bytes.Clone(b)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("relaystore: %w", err)
	}
	if raw != nil {
		k, err := helperkey.Unmarshal(raw)
		if err != nil {
			return nil, false, fmt.Errorf("relaystore: the stored helper key: %w", err)
		}
		return k, false, nil
	}
	k, err := helperkey.Generate()
	if err == nil {
		raw, err = k.MarshalBinary()
	}
	if err != nil {
		return nil, false, fmt.Errorf("relaystore: generating the helper key: %w", err)
	}
	var stored []byte
	err = s.db.Update(func(tx *datastore.Tx) error {
		if b, ok := tx.Get(BucketKeys, HelperKeyName); ok { // another caller stored one first
			stored = bytes.Clone(b)
			return nil
		}
		tx.Put(BucketKeys, HelperKeyName, raw)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("relaystore: storing the helper key: %w", err)
	}
	if stored != nil {
		k, err := helperkey.Unmarshal(stored)
		return k, false, err
	}
	return k, true, nil
}

// Put stores data as (round, kind): durable when it returns nil.
func (s *Store) Put(round uint64, kind outbox.Kind, data []byte) error {
	if !kind.Valid() {
		return fmt.Errorf("relaystore: unknown kind %q", kind)
	}
	if err := s.db.Update(func(tx *datastore.Tx) error {
		tx.Put(BucketOutbox, outbox.Name(round, kind), data)
		return nil
	}); err != nil {
		return fmt.Errorf("relaystore: writing round %d %s: %w", round, kind, err)
	}
	return nil
}

// Get returns the stored bytes; the error wraps fs.ErrNotExist when there
// are none.
func (s *Store) Get(round uint64, kind outbox.Kind) ([]byte, error) {
	var out []byte
	found := false
	err := s.db.View(func(tx *datastore.ReadTx) error {
		b, ok := tx.Get(BucketOutbox, outbox.Name(round, kind))
		out, found = bytes.Clone(b), ok
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relaystore: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("relaystore: round %d %s: %w", round, kind, fs.ErrNotExist)
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// Has reports whether (round, kind) is stored.
func (s *Store) Has(round uint64, kind outbox.Kind) bool {
	_, err := s.Get(round, kind)
	return err == nil
}

// Remove deletes (round, kind), durably; a missing record is not an error.
func (s *Store) Remove(round uint64, kind outbox.Kind) error {
	name := outbox.Name(round, kind)
	if err := s.db.Update(func(tx *datastore.Tx) error {
		if _, ok := tx.Get(BucketOutbox, name); ok {
			tx.Delete(BucketOutbox, name)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("relaystore: removing round %d %s: %w", round, kind, err)
	}
	return nil
}

// List returns the stored entries ordered by round, then kind.
func (s *Store) List() ([]outbox.Entry, error) {
	var out []outbox.Entry
	err := s.db.View(func(tx *datastore.ReadTx) error {
		for _, k := range tx.Keys(BucketOutbox) {
			if e, ok := outbox.ParseName(k); ok {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relaystore: %w", err)
	}
	return out, nil
}
