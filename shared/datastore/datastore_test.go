package datastore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

func mustOpen(t *testing.T, dir string, o *Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dump returns the durable state as bucket -> key -> value.
func dump(t *testing.T, s *Store) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	if err := s.View(func(tx *ReadTx) error {
		for b, keys := range s.state {
			out[b] = map[string]string{}
			for _, k := range tx.Keys(b) {
				v, _ := tx.Get(b, k)
				out[b][k] = string(keys[k])
				if string(v) != string(keys[k]) {
					t.Errorf("Get(%s,%s) disagrees with the state", b, k)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// equalState compares two dumps, bucket by bucket.
func equalState(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, maps.Equal)
}

func TestNotALog(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, LogFile), []byte("{\"round\": 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); err == nil {
		t.Fatal("a file that is not a datastore log opened")
	}
}

// writeHistory commits n random transactions and returns the state after
// each (index 0: empty).
func writeHistory(t *testing.T, s *Store, n int, rng *rand.Rand) []map[string]map[string]string {
	t.Helper()
	hist := []map[string]map[string]string{dump(t, s)}
	for i := range n {
		err := s.Update(func(tx *Tx) error {
			for j := range 1 + rng.IntN(4) {
				b := fmt.Sprintf("b%d", rng.IntN(3))
				k := fmt.Sprintf("k%02d", rng.IntN(12))
				switch rng.IntN(10) {
				case 0:
					tx.DeleteBucket(b)
				case 1, 2:
					tx.Delete(b, k)
				default:
					tx.Put(b, k, bytes.Repeat([]byte{byte(i), byte(j)}, rng.IntN(40)))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		hist = append(hist, dump(t, s))
	}
	return hist
}

// TestEveryPrefixRecovers cuts the log after every byte: recovery must
// give exactly the state after the transactions whose frames are whole
// (the acknowledged ones, had the crash come there), and truncate the
// rest. Sample: 40 random transactions, every cut point (deterministic
// seed; cannot fail by chance).
func TestEveryPrefixRecovers(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	hist := writeHistory(t, s, 40, rand.New(rand.NewPCG(1, 2)))
	s.Close()
	full, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	// Frame boundaries.
	var ends []int
	for off := len(header); off < len(full); {
		_, n, err := readFrame(full[off:])
		if err != nil {
			t.Fatal(err)
		}
		off += n
		ends = append(ends, off)
	}
	if len(ends) != 40 {
		t.Fatalf("%d frames for 40 transactions", len(ends))
	}
	cut := t.TempDir()
	step := 1
	if testing.Short() {
		step = 13 // -short (the js/wasm tier): every 13th byte, and every frame end below
	}
	for c := 0; c <= len(full); c++ {
		if c%step != 0 && !slices.Contains(ends, c) && c != len(full) {
			continue
		}
		if err := os.WriteFile(filepath.Join(cut, LogFile), full[:c], 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(cut, nil)
		if err != nil {
			t.Fatalf("cut at %d: %v", c, err)
		}
		whole := 0
		for whole < len(ends) && ends[whole] <= c {
			whole++
		}
		if got := dump(t, r); !equalState(got, hist[whole]) {
			t.Fatalf("cut at byte %d: state %v, want the state after %d transactions %v", c, got, whole, hist[whole])
		}
		// And the store goes on from there.
		if err := r.Update(func(tx *Tx) error { tx.Put("after", "cut", []byte("ok")); return nil }); err != nil {
			t.Fatalf("cut at %d: %v", c, err)
		}
		r.Close()
		r = mustOpen(t, cut, nil)
		if got := dump(t, r); got["after"]["cut"] != "ok" {
			t.Fatalf("cut at %d: a write after recovery was lost", c)
		}
		r.Close()
	}
}

func TestCorruptByteInTheMiddleStopsThere(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	hist := writeHistory(t, s, 10, rand.New(rand.NewPCG(3, 4)))
	s.Close()
	path := filepath.Join(dir, LogFile)
	b, _ := os.ReadFile(path)
	_, n, _ := readFrame(b[len(header):])
	b[len(header)+n+frameHeader] ^= 0x40 // the second frame's payload
	os.WriteFile(path, b, 0o600)
	r := mustOpen(t, dir, nil)
	defer r.Close()
	if got := dump(t, r); !equalState(got, hist[1]) {
		t.Fatalf("state %v, want the first transaction's %v", got, hist[1])
	}
}

// faultFS fails the nth write or fsync of the log (counted from when
// armed).
type faultFS struct {
	OS
	mu               sync.Mutex
	failWrite        int // fail the failWrite-th write (0: never)
	failSync         int
	writes, syncs    int
	failRename       bool
	failSyncDir      bool
	block            chan struct{} // if set, the first Sync waits on it
	blocked          chan struct{} // closed when the first Sync is waiting
	onceBlock        sync.Once
	partialOnFailure bool
}

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	h, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: h, fs: f}, nil
}

func (f *faultFS) Rename(a, b string) error {
	if f.failRename {
		return errors.New("injected rename failure")
	}
	return os.Rename(a, b)
}

func (f *faultFS) SyncDir(d string) error {
	if f.failSyncDir {
		return errors.New("injected directory fsync failure")
	}
	return f.OS.SyncDir(d)
}

func (f *faultFile) Write(b []byte) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	fail := f.fs.failWrite != 0 && f.fs.writes == f.fs.failWrite
	partial := f.fs.partialOnFailure
	f.fs.mu.Unlock()
	if fail {
		if partial && len(b) > 1 {
			n, _ := f.File.Write(b[:len(b)/2])
			return n, errors.New("injected write failure")
		}
		return 0, errors.New("injected write failure")
	}
	return f.File.Write(b)
}

func (f *faultFile) Sync() error {
	if f.fs.block != nil {
		f.fs.onceBlock.Do(func() {
			close(f.fs.blocked)
			<-f.fs.block
		})
	}
	f.fs.mu.Lock()
	f.fs.syncs++
	fail := f.fs.failSync != 0 && f.fs.syncs == f.fs.failSync
	f.fs.mu.Unlock()
	if fail {
		return errors.New("injected fsync failure")
	}
	return f.File.Sync()
}

func TestFailedWriteOrFsyncIsNeverDurable(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*faultFS)
	}{
		{"write fails", func(f *faultFS) { f.failWrite = f.writes + 1 }},
		{"half a write lands", func(f *faultFS) { f.failWrite = f.writes + 1; f.partialOnFailure = true }},
		{"fsync fails", func(f *faultFS) { f.failSync = f.syncs + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{}
			s := mustOpen(t, dir, &Options{FS: ffs})
			put := func(k string) error {
				return s.Update(func(tx *Tx) error { tx.Put("reports", k, []byte("accepted")); return nil })
			}
			if err := put("a"); err != nil {
				t.Fatal(err)
			}
			ffs.mu.Lock()
			tc.set(ffs)
			ffs.mu.Unlock()
			if err := put("b"); !errors.Is(err, ErrNotDurable) {
				t.Fatalf("the failing commit returned %v, want ErrNotDurable", err)
			}
			if got := dump(t, s)["reports"]; len(got) != 1 || got["a"] != "accepted" {
				t.Fatalf("readers see %v after a failed commit; want only a", got)
			}
			if err := put("c"); !errors.Is(err, ErrNotDurable) {
				t.Fatalf("a commit after the failure returned %v, want ErrNotDurable", err)
			}
			if err := s.Update(func(tx *Tx) error { return nil }); !errors.Is(err, ErrNotDurable) {
				t.Fatalf("a read-only update after the failure returned %v", err)
			}
			s.Close()
			r := mustOpen(t, dir, nil)
			defer r.Close()
			got := dump(t, r)["reports"]
			if got["a"] != "accepted" {
				t.Fatalf("the acknowledged record is lost: %v", got)
			}
			if _, ok := got["c"]; ok {
				t.Fatalf("a refused commit is present after restart: %v", got)
			}
		})
	}
}

// TestGroupCommit holds the first fsync until 50 more transactions are
// queued behind it: those 50 must share one fsync (51 commits, 2 log
// fsyncs), and each is acknowledged only after its own group's fsync.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	ffs := &faultFS{}
	s := mustOpen(t, dir, &Options{FS: ffs})
	defer s.Close()
	ffs.block, ffs.blocked = make(chan struct{}), make(chan struct{})
	base := s.Stats().Fsyncs
	var acked atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Update(func(tx *Tx) error { tx.Put("r", "first", []byte("x")); return nil }); err != nil {
			t.Error(err)
		}
		acked.Add(1)
	}()
	<-ffs.blocked
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(func(tx *Tx) error { tx.Put("r", fmt.Sprint(i), []byte("x")); return nil }); err != nil {
				t.Error(err)
			}
			acked.Add(1)
		}()
	}
	// Wait until all 50 are encoded behind the blocked fsync.
	for {
		s.wmu.Lock()
		n := len(s.unsynced)
		s.wmu.Unlock()
		if n == 51 {
			break
		}
		if acked.Load() != 0 {
			t.Fatal("a commit was acknowledged before its fsync")
		}
		runtime.Gosched()
	}
	if acked.Load() != 0 {
		t.Fatal("a commit was acknowledged before its fsync")
	}
	close(ffs.block)
	wg.Wait()
	st := s.Stats()
	if st.Commits != 51 || st.Fsyncs-base != 2 {
		t.Fatalf("51 commits took %d fsyncs (want 2: group commit), stats %+v", st.Fsyncs-base, st)
	}
	if n := len(dump(t, s)["r"]); n != 51 {
		t.Fatalf("%d records durable, want 51", n)
	}
}

func TestCompactionBoundsTheLog(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, &Options{CompactMin: 64 << 10})
	agg := bytes.Repeat([]byte{7}, 20_000)
	for i := range 200 {
		if err := s.Update(func(tx *Tx) error {
			agg[i%len(agg)]++
			tx.Put("aggregate", "round-1", agg) // rewritten whole: the history must not pile up
			tx.Put("reports", fmt.Sprintf("%06d", i), []byte("verdict"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Compactions == 0 || st.LogSize > 2*(64<<10)+40_000 {
		t.Fatalf("log not compacted: %+v", st)
	}
	want := dump(t, s)
	s.Close()
	r := mustOpen(t, dir, nil)
	defer r.Close()
	if got := dump(t, r); !equalState(got, want) {
		t.Fatal("state differs after compaction and reopen")
	}
	if len(want["reports"]) != 200 || want["aggregate"]["round-1"] != string(agg) {
		t.Fatal("compaction lost data")
	}
}

func TestCompactionFailures(t *testing.T) {
	t.Run("rename fails: the old log stays and the store goes on", func(t *testing.T) {
		dir := t.TempDir()
		ffs := &faultFS{failRename: true}
		s := mustOpen(t, dir, &Options{FS: ffs, CompactMin: 4 << 10})
		for i := range 50 {
			if err := s.Update(func(tx *Tx) error { tx.Put("a", "x", bytes.Repeat([]byte{byte(i)}, 1000)); return nil }); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
		if s.Stats().Compactions != 0 {
			t.Fatal("compaction counted though its rename failed")
		}
		if _, err := os.Stat(filepath.Join(dir, LogFile+".compact")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("temporary compaction file left: %v", err)
		}
		s.Close()
		r := mustOpen(t, dir, nil)
		defer r.Close()
		if got := dump(t, r)["a"]["x"]; got != string(bytes.Repeat([]byte{49}, 1000)) {
			t.Fatal("last value lost")
		}
	})
	t.Run("directory fsync after the rename fails: the store refuses writes", func(t *testing.T) {
		dir := t.TempDir()
		s := mustOpen(t, dir, &Options{CompactMin: 4 << 10})
		ffs := &faultFS{failSyncDir: true}
		s.fsys = ffs
		var err error
		for i := 0; i < 50 && err == nil; i++ {
			err = s.Update(func(tx *Tx) error { tx.Put("a", "x", bytes.Repeat([]byte{byte(i)}, 1000)); return nil })
		}
		if !errors.Is(err, ErrNotDurable) {
			t.Fatalf("writes went on after an undurable compaction: %v", err)
		}
		s.Close()
	})
}

// TestBytesPerReportIndependentOfN is the cost rule on the
// engine alone: one small record per report, committed in chunks of 8,
// costs the same bytes per report at n = 1,000 as at n = 10,000 (and
// well under 2 KB); group commit is exercised with 4 chunks in flight.
func TestBytesPerReportIndependentOfN(t *testing.T) {
	per := map[int]float64{}
	for _, n := range []int{1_000, 10_000} {
		s := mustOpen(t, t.TempDir(), nil)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for c := 0; c < n/8; c++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := s.Update(func(tx *Tx) error {
					for i := range 8 {
						var nonce [32]byte
						nonce[0], nonce[1], nonce[2] = byte(c), byte(c>>8), byte(i)
						tx.Put("nonces", string(nonce[:]), make([]byte, 48))
					}
					tx.Put("chunks", fmt.Sprintf("%010d", c), make([]byte, 40))
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		st := s.Stats()
		per[n] = float64(st.BytesWritten) / float64(n)
		t.Logf("n=%d: %.0f bytes and %.3f fsyncs per report, %d commits, %d compactions", n, per[n],
			float64(st.Fsyncs)/float64(n), st.Commits, st.Compactions)
		if st.Commits != int64(n/8) {
			t.Fatalf("%d commits, want %d", st.Commits, n/8)
		}
		s.Close()
	}
	if per[10_000] > 2048 || per[10_000] > 1.25*per[1_000] {
		t.Fatalf("bytes per report grow with n or exceed 2 KB: %v", per)
	}
}

func TestScanFollowsCommits(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, nil)
	defer s.Close()
	var seen []string
	collect := func(ops []Op) error {
		for _, o := range ops {
			seen = append(seen, o.Kind+" "+o.Bucket+"/"+o.Key+"="+string(o.Value))
		}
		return nil
	}
	off, err := Scan(dir, 0, collect)
	if err != nil || len(seen) != 0 {
		t.Fatalf("empty log: %v %v", seen, err)
	}
	s.Update(func(tx *Tx) error { tx.Put("a", "1", []byte("x")); tx.Delete("a", "0"); return nil })
	if off, err = Scan(dir, off, collect); err != nil {
		t.Fatal(err)
	}
	s.Update(func(tx *Tx) error { tx.DeleteBucket("a"); return nil })
	if _, err = Scan(dir, off, collect); err != nil {
		t.Fatal(err)
	}
	want := []string{"put a/1=x", "delete a/0=", "delete-bucket a/="}
	if !slices.Equal(seen, want) {
		t.Fatalf("scanned %v, want %v", seen, want)
	}
}
