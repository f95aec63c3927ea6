// Package ledgertest injects I/O failures into a ledger's append path
// (shared/ledger Options.WrapFile for a ledger file, StoreFS for a ledger
// in a datastore), for tests of the ledger and of the
// servers that charge it: a charge whose write or fsync fails must
// return an error and release nothing.
package ledgertest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
)

// ErrInjected is the error of every injected failure.
var ErrInjected = errors.New("ledgertest: injected I/O failure")

// Op is the call that fails.
type Op int

const (
	// Write fails the write, writing nothing.
	Write Op = iota
	// TornWrite writes the first half of the line, then fails (a crash
	// or a full disk mid-write: the file ends in a fragment).
	TornWrite
	// Sync lets the write through and fails the fsync that follows (the
	// line is in the file, but not known to be durable).
	Sync
)

func (o Op) String() string {
	switch o {
	case Write:
		return "write"
	case TornWrite:
		return "torn write"
	case Sync:
		return "fsync"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// FailAt returns an Options.WrapFile under which the n-th call (from 1,
// counted from Open) of op's kind (Write for Write and TornWrite, Sync
// for Sync) on the ledger's file fails with ErrInjected; every other call
// goes to the file.
func FailAt(op Op, n int) func(ledger.File) ledger.File {
	return func(f ledger.File) ledger.File { return &file{File: f, op: op, n: n} }
}

type file struct {
	ledger.File
	op Op
	n  int

	mu            sync.Mutex
	writes, syncs int
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	f.writes++
	fail := f.op != Sync && f.writes == f.n
	f.mu.Unlock()
	if !fail {
		return f.File.Write(p)
	}
	if f.op == TornWrite {
		k, err := f.File.Write(p[:len(p)/2])
		if err != nil {
			return k, err
		}
		return k, fmt.Errorf("%w (%s after %d of %d bytes)", ErrInjected, f.op, k, len(p))
	}
	return 0, fmt.Errorf("%w (%s)", ErrInjected, f.op)
}

func (f *file) Sync() error {
	f.mu.Lock()
	f.syncs++
	fail := f.op == Sync && f.syncs == f.n
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("%w (%s)", ErrInjected, f.op)
	}
	return f.File.Sync()
}

// StoreFS is a datastore.FileSystem (datastore.Options.FS) that fails
// one write or fsync of the store's log once armed (Arm): a ledger in a
// datastore (ledger.OpenStore) is failed through its store. Every other
// call goes to the operating system. It is safe for concurrent use.
type StoreFS struct {
	datastore.OS
	mu     sync.Mutex
	armed  bool
	op     Op
	marker []byte
	synced bool // a write with the marker went through: fail the next Sync
}

// Arm makes the next write of the log whose bytes contain marker (nil:
// any) fail with ErrInjected (op Write or TornWrite), or the fsync after
// it (op Sync), once. ledger.BucketRecords as the marker fails a charge's
// transaction (the bucket's name is in each of its frames) whatever the
// other transactions written before it.
func (s *StoreFS) Arm(op Op, marker []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.op, s.marker, s.synced = true, op, marker, false
}

// OpenFile implements datastore.FileSystem.
func (s *StoreFS) OpenFile(name string, flag int, perm fs.FileMode) (datastore.File, error) {
	f, err := s.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &storeFile{File: f, fs: s}, nil
}

type storeFile struct {
	datastore.File
	fs *StoreFS
}

func (f *storeFile) Write(p []byte) (int, error) {
	s := f.fs
	s.mu.Lock()
	hit := s.armed && !s.synced && (s.marker == nil || bytes.Contains(p, s.marker))
	op := s.op
	if hit && op == Sync {
		s.synced, hit = true, false
	} else if hit {
		s.armed = false
	}
	s.mu.Unlock()
	if !hit {
		return f.File.Write(p)
	}
	if op == TornWrite {
		k, err := f.File.Write(p[:len(p)/2])
		if err != nil {
			return k, err
		}
		return k, fmt.Errorf("%w (%s after %d of %d bytes)", ErrInjected, op, k, len(p))
	}
	return 0, fmt.Errorf("%w (%s)", ErrInjected, op)
}

func (f *storeFile) Sync() error {
	s := f.fs
	s.mu.Lock()
	fail := s.armed && s.synced
	if fail {
		s.armed = false
	}
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("%w (%s)", ErrInjected, Sync)
	}
	return f.File.Sync()
}
