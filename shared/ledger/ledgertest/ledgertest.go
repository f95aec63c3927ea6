// Package ledgertest injects I/O failures into a ledger's append path
// (shared/ledger Options.WrapFile), for tests of the ledger and of the
// servers that charge it: a charge whose write or fsync fails must
// return an error and release nothing.
package ledgertest

import (
	"errors"
	"fmt"
	"sync"

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
