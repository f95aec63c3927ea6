package localrun

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestLaunchQuotesOutputOnFailure: a server that exits during start is
// reported with the last lines of its output, even when the caller
// discards the output (make run without -v).
func TestLaunchQuotesOutputOnFailure(t *testing.T) {
	c := &Cluster{}
	script := `for i in $(seq 1 400); do echo "noise line $i" >&2; done; echo "aggregator serve: expected n must be >= 1, got 0" >&2; exit 2`
	_, err := c.launch(context.Background(), "/bin/sh", []string{"-c", script}, "http://127.0.0.1:1/healthz")
	if err == nil {
		t.Fatal("a server that exits during start was not reported")
	}
	msg := err.Error()
	if !strings.Contains(msg, "expected n must be >= 1, got 0") || !strings.Contains(msg, "exit status 2") {
		t.Errorf("error does not quote the cause: %v", err)
	}
	if strings.Contains(msg, "noise line 1\n") || len(msg) > 5<<10 {
		t.Errorf("error quotes more than the tail (%d bytes)", len(msg))
	}
}

func TestTailWriter(t *testing.T) {
	w := NewTail(16)
	if w.String() != "(no output)" {
		t.Errorf("empty: %q", w.String())
	}
	w.Write([]byte("first line\nsecond line\nthird\n"))
	if got := w.String(); got != "third" {
		t.Errorf("tail %q, want the last whole line", got)
	}
}

// TestFreeAddrOnHost: the servers bind the host they are given (a
// classroom's network address; here 127.0.0.2, which the test owns).
func TestFreeAddrOnHost(t *testing.T) {
	a, err := freeAddr("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, "127.0.0.2:") {
		t.Errorf("address %s, want one on 127.0.0.2", a)
	}
}

// TestClassTask: a new class learns the task chosen for it on the
// operator page (the old class's datastore's next-task bucket, definition
// and files byte for byte, written into the new class's datastore as its
// class task), else keeps the previous class's own (class-task), else has
// none (the aggregator's -task); the old class's directory is not
// changed.
func TestClassTask(t *testing.T) {
	root := t.TempDir()
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	store := func(dir string, tasks map[string]map[string][]byte) {
		t.Helper()
		db, err := datastore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(func(tx *datastore.Tx) error {
			for bucket, files := range tasks {
				for k, v := range files {
					tx.Put(bucket, k, v)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	bc := "../../../tasks/breast-cancer"
	chosen := map[string][]byte{task.FileName: read(filepath.Join(bc, task.FileName))}
	if tk, err := task.Parse(chosen[task.FileName]); err != nil {
		t.Fatal(err)
	} else {
		for _, f := range []string{tk.Holdout, tk.Simulation} {
			chosen[f] = read(filepath.Join(bc, f))
		}
	}
	own := map[string][]byte{task.FileName: read("../../../tasks/class-survey/task.json")}
	a, b, c, d := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c"), filepath.Join(root, "d")
	os.MkdirAll(a, 0o700)
	if err := classTask(a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b); !os.IsNotExist(err) {
		t.Fatalf("no task chosen, yet the new class has a datastore: %v", err)
	}
	store(b, map[string]map[string][]byte{task.ClassBucket: own, task.NextClassBucket: chosen})
	before := read(filepath.Join(b, datastore.LogFile))
	if err := classTask(b, c); err != nil {
		t.Fatal(err)
	}
	same := func(dir string, want map[string][]byte) {
		t.Helper()
		st, err := ReadTask(dir, task.ClassBucket)
		if err != nil || st == nil {
			t.Fatalf("%s: class task %v, %v", dir, st, err)
		}
		got := maps.Clone(st.Files)
		got[task.FileName] = st.Def
		if !maps.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("%s: the class task's keys %v differ from those carried", dir, slices.Sorted(maps.Keys(got)))
		}
		if _, err := st.Open(); err != nil {
			t.Errorf("%s: the carried task does not load: %v", dir, err)
		}
	}
	same(c, chosen)
	if st, err := ReadTask(c, task.NextClassBucket); err != nil || st != nil {
		t.Errorf("the new class has a next task: %+v %v", st, err)
	}
	if !bytes.Equal(read(filepath.Join(b, datastore.LogFile)), before) {
		t.Error("the old class's datastore changed")
	}
	// The old class's directory: its store's log and lock file, nothing
	// more (the lock file is the store's own, made by the first Open).
	if ents, _ := os.ReadDir(b); len(ents) != 2 || ents[0].Name() != datastore.LockFile || ents[1].Name() != datastore.LogFile {
		t.Errorf("the old class's directory gained files: %v", ents)
	}
	if err := classTask(c, d); err != nil {
		t.Fatal(err)
	}
	same(d, chosen)
}

// TestRelayAgreed: the relay is started with the aggregator's privacy
// target and minimum batch unless its own arguments set them (the relay
// refuses a secure-summation announcement with another target, and its
// own minimum batch is a floor no announcement lowers).
func TestRelayAgreed(t *testing.T) {
	got := relayAgreed([]string{"-protocol", "secagg", "-epsilon", "50", "-delta=1e-06", "-min-batch", "10"}, []string{"-wasm", "x", "-target-epsilon", "8"})
	want := []string{"-wasm", "x", "-target-epsilon", "8", "-target-delta", "1e-06", "-min-batch", "10"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := relayAgreed([]string{"-protocol", "secagg"}, nil); len(got) != 0 {
		t.Errorf("nothing to agree on: %q", got)
	}
}

// TestCarryRelayKeys: a new class's relay starts from a datastore holding
// its helper key and nothing else of the old class (the outbox's rounds
// belong to the old class).
func TestCarryRelayKeys(t *testing.T) {
	state, arch := t.TempDir(), t.TempDir()
	db, err := datastore.Open(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *datastore.Tx) error {
		tx.Put(relayKeysBucket, "helper", []byte("k3y"))
		tx.Put("relay/outbox", "00000000000000000005.open", []byte("x"))
		return nil
	})
	db.Close()
	if err := os.Rename(filepath.Join(state, datastore.LogFile), filepath.Join(arch, datastore.LogFile)); err != nil {
		t.Fatal(err)
	}
	if err := carryRelayKeys(arch, state); err != nil {
		t.Fatal(err)
	}
	db, err = datastore.Open(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *datastore.ReadTx) error {
		if v, ok := tx.Get(relayKeysBucket, "helper"); !ok || string(v) != "k3y" {
			t.Errorf("helper key not carried: %q %v", v, ok)
		}
		if ks := tx.Keys("relay/outbox"); len(ks) != 0 {
			t.Errorf("the old class's outbox came along: %v", ks)
		}
		return nil
	})
}
