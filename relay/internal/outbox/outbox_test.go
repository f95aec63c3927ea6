package outbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPutGetListRemove(t *testing.T) {
	dir := t.TempDir()
	// A temporary file left by a crash mid-write is removed on Open.
	stale := filepath.Join(dir, "00000000000000000007.batch.123.tmp")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale temporary file survived Open: %v", err)
	}
	if err := o.Put(7, Batch, []byte("batch-7")); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(3, OpenRound, nil); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(7, Batch, []byte("batch-7b")); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(1, "bogus", nil); err == nil {
		t.Fatal("unknown kind accepted")
	}
	os.WriteFile(filepath.Join(dir, "README"), nil, 0o600)
	got, err := o.Get(7, Batch)
	if err != nil || !bytes.Equal(got, []byte("batch-7b")) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	l, err := o.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{3, OpenRound}, {7, Batch}}
	if !slices.Equal(l, want) {
		t.Fatalf("List = %v, want %v", l, want)
	}
	if !o.Has(3, OpenRound) || o.Has(3, Batch) {
		t.Fatal("Has wrong")
	}
	if err := o.Remove(3, OpenRound); err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(3, OpenRound); err != nil {
		t.Fatalf("removing a missing entry: %v", err)
	}
	if _, err := o.Get(3, OpenRound); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get after Remove: %v", err)
	}
	// A fresh Outbox on the same directory sees the same state (restart).
	o2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, _ = o2.List()
	if !slices.Equal(l, []Entry{{7, Batch}}) {
		t.Fatalf("after reopen List = %v", l)
	}
	if _, err := Open(""); err == nil {
		t.Fatal("empty dir accepted")
	}
}

// TestClassify pins the status-to-outcome table every relay request uses.
func TestClassify(t *testing.T) {
	want := map[int]Outcome{200: Accepted, 208: Duplicate, 409: Obsolete, 400: Invalid, 413: Invalid, 422: Invalid,
		201: Retry, 204: Retry, 401: Retry, 404: Retry, 500: Retry, 502: Retry, 503: Retry, 0: Retry}
	for status, o := range want {
		if got := Classify(status); got != o {
			t.Errorf("Classify(%d) = %v, want %v", status, got, o)
		}
	}
}
