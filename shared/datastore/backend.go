package datastore

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
)

// Backend is an engine a Store runs on instead of its embedded log:
// package pgstore's PostgreSQL. New wraps one in a Store, so that callers
// keep using *Store, *Tx and *ReadTx whichever engine holds the data; the
// Store keeps the contract that does not depend on the engine (one Update
// function at a time, a transaction reads its own writes, an error that
// wraps ErrNotDurable fails every later Update, ErrClosed after Close).
type Backend interface {
	// View runs fn on one consistent snapshot of the committed state.
	View(fn func(Source) error) error
	// Update runs fn in a read-write transaction: Source reads the
	// committed state and nothing commits under it until it ends. If fn
	// returns an error, Update rolls back and returns that error
	// unchanged. Otherwise Update commits the operations fn returned (in
	// order, all or none) and returns nil only once they are durable. A
	// commit whose outcome is unknown (the connection lost after the
	// commit was sent) returns an error wrapping ErrNotDurable; a commit
	// the engine refused, or one never sent, returns another error.
	Update(fn func(Source) ([]Op, error)) error
	// Stats reports Fsyncs and BytesWritten (the Store counts Commits).
	Stats() Stats
	// Close releases the engine; the Store calls it once, with no
	// Update under way.
	Close() error
}

// Source reads a Backend's state inside one of its transactions. Keys
// returns the keys sorted bytewise, as Go sorts strings. Its errors fail
// the transaction: the Tx or ReadTx methods that met one return nothing,
// and Update or View returns the error.
type Source interface {
	Get(bucket, key string) (value []byte, ok bool, err error)
	Keys(bucket string) ([]string, error)
}

// New returns a Store on b. Options.Logger receives its failures; FS and
// CompactMin concern the log only.
func New(b Backend, opt *Options) *Store {
	s := &Store{b: b, log: slog.New(slog.DiscardHandler)}
	if opt != nil && opt.Logger != nil {
		s.log = opt.Logger
	}
	return s
}

func (s *Store) updateBackend(fn func(tx *Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		return s.failed
	}
	var fnErr error
	wrote := false
	err := s.b.Update(func(src Source) ([]Op, error) {
		tx := &Tx{s: s, w: writes{}, src: src}
		if fnErr = fn(tx); fnErr != nil {
			return nil, fnErr
		}
		if tx.err != nil {
			return nil, fmt.Errorf("datastore: a read in the transaction failed: %w", tx.err)
		}
		ops := tx.w.effective()
		wrote = len(ops) > 0
		return ops, nil
	})
	if err != nil {
		if fnErr == nil && errors.Is(err, ErrNotDurable) {
			s.failed = err
			s.log.Error("datastore: a commit's outcome is unknown; the store refuses every later write", "err", err)
		}
		return err
	}
	if wrote {
		s.commits.Add(1)
	}
	return nil
}

func (s *Store) viewBackend(fn func(tx *ReadTx) error) error {
	if s.bclosed.Load() {
		return ErrClosed
	}
	return s.b.View(func(src Source) error {
		tx := &ReadTx{s: s, src: src}
		if err := fn(tx); err != nil {
			return err
		}
		if tx.err != nil {
			return fmt.Errorf("datastore: a read in the view failed: %w", tx.err)
		}
		return nil
	})
}

func (s *Store) closeBackend() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.bclosed.Store(true)
	return s.b.Close()
}

// effective returns the operations that take the state to what the
// transaction's writes say, fewest first: per bucket (sorted), the
// bucket's deletion if DeleteBucket was called, then each key's last
// write (sorted; a Delete after DeleteBucket is left out). Applied in
// order they give the same state as the transaction's calls in order.
func (w writes) effective() []Op {
	var ops []Op
	for _, b := range slices.Sorted(maps.Keys(w)) {
		o := w[b]
		if o.cleared {
			ops = append(ops, Op{Kind: "delete-bucket", Bucket: b})
		}
		for _, k := range slices.Sorted(maps.Keys(o.keys)) {
			switch v := o.keys[k]; {
			case v != nil:
				ops = append(ops, Op{Kind: "put", Bucket: b, Key: k, Value: v})
			case !o.cleared:
				ops = append(ops, Op{Kind: "delete", Bucket: b, Key: k})
			}
		}
	}
	return ops
}
