// Package datastore is each Blanket server's one transactional store:
// named buckets of keys to bytes, changed only by transactions that are
// durable, whole, when Update returns nil. The embedded engine is an
// append-only log of CRC-framed transactions (format.go) with group
// commit: Updates that arrive while an fsync is under way are written
// and fsynced together, so n concurrent commits cost one fsync, not n.
// The log is rewritten as a snapshot of the live state (atomically:
// temporary file, fsync, rename, directory fsync) when it has grown to
// twice that state, so its size and the recovery time follow the state,
// not the history. docs/architecture.md ("The datastore") compares this
// engine with SQLite and bbolt, measured.
//
// Durable or failing: a write or fsync that fails makes Update return an
// error wrapping ErrNotDurable, and every later Update too (the bytes on
// disk are no longer known); reads keep serving the last durable state.
// A transaction whose Update failed was never acknowledged; like any
// database after a crash in mid-commit it may or may not be present after
// a restart, so a caller must only act on Updates that returned nil.
//
// Recovery (Open) replays the log and truncates it at the first torn or
// corrupt frame: every acknowledged transaction precedes it.
//
// The log is one engine; New puts a Store on another, a Backend (package
// pgstore: PostgreSQL), with the same contract for its callers.
package datastore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// LogFile is the store's file inside its directory.
const LogFile = "store.log"

// ErrNotDurable is wrapped by every error of an Update whose write or
// fsync failed (or that came after one): nothing it wrote may be counted
// as durable.
var ErrNotDurable = errors.New("datastore: not durable")

// ErrLocked is returned by Open when another process (or another Open in
// this one) holds the store's directory.
var ErrLocked = errors.New("datastore: the store is open in another process")

// LockFile is the file in a store's directory whose lock (flock) keeps a
// second process from opening the store (lockDir).
const LockFile = "store.lock"

// LocationFile, in a state directory whose store is not the embedded
// log but PostgreSQL, records where it is (package serverstore writes
// it): Scan, and serverstore's embedded Open, refuse such a directory.
const LocationFile = "store.location"

// HeaderSize is the size of an empty log (its header alone).
const HeaderSize = len(header)

// ErrClosed is returned by Update and View after Close.
var ErrClosed = errors.New("datastore: closed")

// Options configure Open; the zero value (or nil) is the production
// setting.
type Options struct {
	// Logger receives recovery and compaction events (nil: discarded).
	Logger *slog.Logger
	// FS is the file system (nil: OS).
	FS FileSystem
	// CompactMin is the log size below which it is never compacted
	// (0: 4 MiB).
	CompactMin int64
}

// Stats counts the store's work since Open.
type Stats struct {
	// Commits is the number of Updates that wrote something and succeeded.
	Commits int64
	// Fsyncs counts fsyncs of the log (one per group of commits) and of
	// compactions and directories.
	Fsyncs int64
	// BytesWritten counts bytes written to the log and to compaction
	// snapshots.
	BytesWritten int64
	// Compactions counts log rewrites.
	Compactions int64
	// LogSize is the log file's current length.
	LogSize int64
}

// group is a set of transactions written and fsynced together.
type group struct {
	done chan struct{}
	err  error
}

// pendingTx is a transaction encoded into the log buffer whose group is
// not yet durable.
type pendingTx struct {
	g   *group
	ops []op
	w   writes
}

// Store is one server's datastore: a state directory's log (Open) or a
// Backend such as PostgreSQL (New, package pgstore). Its methods are safe
// for concurrent use.
type Store struct {
	// b is the engine when it is not the embedded log (nil: the log).
	b Backend
	// bclosed is closed for a Backend's View, which does not take wmu
	// (an Update holds it for as long as its function runs).
	bclosed atomic.Bool

	dir, path  string
	lock       io.Closer // the directory's lock (lockDir), released by Close
	fsys       FileSystem
	log        *slog.Logger
	compactMin int64

	// wmu guards the write side: buf (frames encoded, not yet written),
	// cur (the group they belong to), unsynced (their operations, read by
	// later transactions), failed and closed; and it runs one Update
	// function at a time.
	wmu      sync.Mutex
	buf      []byte
	cur      *group
	unsynced []pendingTx
	failed   error
	closed   bool

	// fmu serializes flushes and compaction, and guards f and size.
	fmu  sync.Mutex
	f    File
	size int64

	// smu guards state and live: the durable contents View reads.
	smu   sync.RWMutex
	state map[string]map[string][]byte
	live  int64

	commits, fsyncs, written, compactions atomic.Int64
}

// Open opens the store in dir, creating dir (mode 0700) and the log if
// needed, and recovers it: the log is replayed and truncated after its
// last intact frame.
func Open(dir string, opt *Options) (*Store, error) {
	var o Options
	if opt != nil {
		o = *opt
	}
	if o.FS == nil {
		o.FS = OS{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CompactMin <= 0 {
		o.CompactMin = 4 << 20
	}
	if dir == "" {
		return nil, errors.New("datastore: empty directory")
	}
	s := &Store{dir: dir, path: filepath.Join(dir, LogFile), fsys: o.FS, log: o.Logger, compactMin: o.CompactMin,
		cur: &group{done: make(chan struct{})}, state: map[string]map[string][]byte{}}
	if err := o.FS.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("datastore: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	// A compaction interrupted before its rename left a temporary file.
	if err := o.FS.Remove(s.path + ".compact"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("datastore: removing an interrupted compaction: %w", err)
	}
	f, err := o.FS.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("datastore: %w", err)
	}
	if err := s.recover(f); err != nil {
		f.Close()
		return nil, err
	}
	s.f = f
	ok = true
	return s, nil
}

// recover replays f into s.state and leaves f positioned at its end,
// truncated after the last intact frame.
func (s *Store) recover(f File) error {
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("datastore: reading %s: %w", s.path, err)
	}
	if len(b) < len(header) || [8]byte(b[:8]) != header {
		if len(b) >= len(header) || string(b) != string(header[:len(b)]) {
			return fmt.Errorf("datastore: %s is not a datastore log", s.path)
		}
		// Empty, or torn while its header was written: start it.
		if err := s.rewriteAt(f, 0, header[:]); err != nil {
			return err
		}
		if err := s.fsys.SyncDir(s.dir); err != nil {
			return fmt.Errorf("datastore: %w", err)
		}
		s.size = int64(len(header))
		return nil
	}
	off := len(header)
	frames := 0
	for off < len(b) {
		ops, n, err := readFrame(b[off:])
		if errors.Is(err, errTorn) {
			break
		}
		if err != nil {
			return fmt.Errorf("datastore: %s frame %d at byte %d: %w", s.path, frames, off, err)
		}
		s.apply(ops)
		off += n
		frames++
	}
	if off < len(b) {
		s.log.Warn("datastore: dropping a torn last transaction (never acknowledged)", "path", s.path,
			"kept_bytes", off, "dropped_bytes", len(b)-off, "transactions", frames)
		if err := f.Truncate(int64(off)); err != nil {
			return fmt.Errorf("datastore: truncating a torn tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("datastore: truncating a torn tail: %w", err)
		}
	}
	if _, err := f.Seek(int64(off), io.SeekStart); err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	s.size = int64(off)
	return nil
}

func (s *Store) rewriteAt(f File, off int64, b []byte) error {
	if err := f.Truncate(off); err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("datastore: %w", err)
	}
	return nil
}

// apply changes the durable state; the caller holds smu (or owns s).
func (s *Store) apply(ops []op) {
	for _, o := range ops {
		bk := s.state[o.bucket]
		switch o.kind {
		case opPut:
			if bk == nil {
				bk = map[string][]byte{}
				s.state[o.bucket] = bk
			}
			if old, ok := bk[o.key]; ok {
				s.live -= entrySize(o.bucket, o.key, old)
			}
			bk[o.key] = o.value
			s.live += entrySize(o.bucket, o.key, o.value)
		case opDelete:
			if old, ok := bk[o.key]; ok {
				s.live -= entrySize(o.bucket, o.key, old)
				delete(bk, o.key)
			}
			if len(bk) == 0 {
				delete(s.state, o.bucket)
			}
		case opDeleteBucket:
			for k, v := range bk {
				s.live -= entrySize(o.bucket, k, v)
			}
			delete(s.state, o.bucket)
		}
	}
}

// entrySize is about what one key takes in a snapshot.
func entrySize(bucket, key string, v []byte) int64 {
	return int64(len(bucket) + len(key) + len(v) + 8)
}

// View runs fn on the durable state. fn must not keep tx or modify the
// slices it returns.
func (s *Store) View(fn func(tx *ReadTx) error) error {
	if s.b != nil {
		return s.viewBackend(fn)
	}
	s.smu.RLock()
	defer s.smu.RUnlock()
	if s.state == nil {
		return ErrClosed
	}
	return fn(&ReadTx{s: s})
}

// Update runs fn in a read-write transaction and, if fn returns nil,
// makes its writes durable: when Update returns nil they survive a crash,
// all together. If fn returns an error nothing is written and Update
// returns it. An Update that writes nothing still waits until every
// transaction it could have read is durable.
func (s *Store) Update(fn func(tx *Tx) error) error {
	if s.b != nil {
		return s.updateBackend(fn)
	}
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return ErrClosed
	}
	if s.failed != nil {
		err := s.failed
		s.wmu.Unlock()
		return err
	}
	tx := &Tx{s: s, w: writes{}}
	// fn reads s.state: writers hold wmu, and smu's writer (flush) takes
	// wmu first, so the state cannot change under fn.
	if err := fn(tx); err != nil {
		s.wmu.Unlock()
		return err
	}
	g := s.cur
	if len(tx.ops) == 0 {
		if len(s.unsynced) == 0 {
			s.wmu.Unlock()
			return nil
		}
	} else {
		buf, err := appendFrame(s.buf, tx.ops)
		if err != nil {
			s.wmu.Unlock()
			return err
		}
		s.buf = buf
		s.unsynced = append(s.unsynced, pendingTx{g: g, ops: tx.ops, w: tx.w})
	}
	s.wmu.Unlock()
	s.flush(g)
	<-g.done
	if g.err == nil && len(tx.ops) > 0 {
		s.commits.Add(1)
	}
	return g.err
}

// flush writes and fsyncs the current group unless another flush already
// did g. One flush runs at a time; the transactions that arrive during it
// form the next group.
func (s *Store) flush(g *group) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	select {
	case <-g.done:
		return
	default:
	}
	s.wmu.Lock()
	cur, buf, n := s.cur, s.buf, len(s.unsynced)
	s.cur, s.buf = &group{done: make(chan struct{})}, nil
	failed := s.failed
	s.wmu.Unlock()

	err := failed
	if err == nil && len(buf) > 0 {
		err = s.write(buf)
	}
	s.wmu.Lock()
	if err != nil {
		if s.failed == nil {
			s.failed = fmt.Errorf("%w: %w", ErrNotDurable, err)
			s.log.Error("datastore: a write failed; the store refuses every later write", "path", s.path, "err", err)
		}
		cur.err = s.failed
		s.unsynced = nil
	} else {
		s.smu.Lock()
		for _, p := range s.unsynced[:n] {
			s.apply(p.ops)
		}
		s.smu.Unlock()
		s.unsynced = append([]pendingTx(nil), s.unsynced[n:]...)
	}
	s.wmu.Unlock()
	close(cur.done)
	if err == nil {
		s.maybeCompact()
	}
}

// write appends buf to the log and fsyncs it; the caller holds fmu.
func (s *Store) write(buf []byte) error {
	n, err := s.f.Write(buf)
	s.written.Add(int64(n))
	s.size += int64(n)
	if err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	s.fsyncs.Add(1)
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.path, err)
	}
	return nil
}

// maybeCompact rewrites the log as a snapshot of the state once it is
// larger than CompactMin and twice the state; the caller holds fmu. A
// failure before the rename leaves the old log, whole and current; a
// failure after it fails the store.
func (s *Store) maybeCompact() {
	s.smu.RLock()
	live := s.live
	s.smu.RUnlock()
	if s.size < s.compactMin || s.size < 2*live+int64(len(header)) {
		return
	}
	tmp := s.path + ".compact"
	s.smu.RLock()
	snap, err := s.snapshot()
	s.smu.RUnlock()
	if err != nil {
		s.log.Error("datastore: compaction skipped", "err", err)
		return
	}
	f, err := s.fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.Write(snap)
		s.written.Add(int64(len(snap)))
		if err == nil {
			s.fsyncs.Add(1)
			err = f.Sync()
		}
		if err != nil {
			f.Close()
		}
	}
	if err == nil {
		err = s.fsys.Rename(tmp, s.path)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		s.fsys.Remove(tmp)
		s.log.Error("datastore: compaction failed; the log stays as it was", "err", err)
		return
	}
	// The new log is in place: appends go to it from now on.
	s.f.Close()
	s.f, s.size = f, int64(len(snap))
	s.compactions.Add(1)
	s.fsyncs.Add(1)
	if err := s.fsys.SyncDir(s.dir); err != nil {
		s.wmu.Lock()
		if s.failed == nil {
			s.failed = fmt.Errorf("%w: compaction: %w", ErrNotDurable, err)
		}
		s.wmu.Unlock()
		s.log.Error("datastore: the compacted log's rename is not durable; the store refuses every later write", "err", err)
	}
}

// snapshot encodes the state as a new log: the header and one frame per
// bucket (chunked so no frame nears maxFrame). The caller holds smu.
func (s *Store) snapshot() ([]byte, error) {
	out := append([]byte(nil), header[:]...)
	for b, keys := range s.state {
		var ops []op
		size := 0
		for k, v := range keys {
			ops = append(ops, op{kind: opPut, bucket: b, key: k, value: v})
			size += len(b) + len(k) + len(v) + 16
			if size > 64<<20 {
				var err error
				if out, err = appendFrame(out, ops); err != nil {
					return nil, err
				}
				ops, size = ops[:0], 0
			}
		}
		if len(ops) > 0 {
			var err error
			if out, err = appendFrame(out, ops); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	if s.b != nil {
		st := s.b.Stats()
		st.Commits = s.commits.Load()
		return st
	}
	s.fmu.Lock()
	size := s.size
	s.fmu.Unlock()
	return Stats{Commits: s.commits.Load(), Fsyncs: s.fsyncs.Load(), BytesWritten: s.written.Load(),
		Compactions: s.compactions.Load(), LogSize: size}
}

// Dir returns the store's directory ("" for a Backend's store).
func (s *Store) Dir() string { return s.dir }

// Close waits for the commits under way and closes the log; later calls
// fail with ErrClosed.
func (s *Store) Close() error {
	if s.b != nil {
		return s.closeBackend()
	}
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return nil
	}
	s.closed = true
	g := s.cur
	pending := len(s.unsynced) > 0
	s.wmu.Unlock()
	if pending {
		s.flush(g)
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	s.smu.Lock()
	s.state = nil
	s.smu.Unlock()
	err := s.f.Close()
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}
