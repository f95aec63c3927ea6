//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package datastore

import (
	"errors"
	"testing"
)

// TestSecondOpenRefused: while a store is open, a second Open of its
// directory (another process, or this one) is refused with ErrLocked, so
// that two writers never interleave frames in one log; after Close, and
// after a compaction replaced the log, it opens again. Read-only Scan is
// not affected.
func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{CompactMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // compactions: the log is renamed over
		if err := s.Update(func(tx *Tx) error { tx.Put("b", "k", []byte{byte(i)}); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(dir, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if _, err := Scan(dir, 0, func([]Op) error { return nil }); err != nil {
		t.Fatalf("scan while open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s2.Close()
}
