package server

import (
	"bytes"
	"errors"
	"github.com/blanket-fl/blanket/shared/datastore"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/shared/wire"
)

// memAckLog is an acklog.Log in memory that outlives the relay's restarts
// (the harness's store, as a disk would).
type memAckLog struct {
	mu   sync.Mutex
	m    map[uint64]map[uint64]map[string][]byte
	fail bool // Append fails (a write or fsync that did not happen)
}

func (l *memAckLog) Append(num, conn uint64, key string, frame []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return errors.New("fsync: input/output error")
	}
	if l.m == nil {
		l.m = make(map[uint64]map[uint64]map[string][]byte)
	}
	if l.m[num] == nil {
		l.m[num] = make(map[uint64]map[string][]byte)
	}
	if l.m[num][conn] == nil {
		l.m[num][conn] = make(map[string][]byte)
	}
	l.m[num][conn][key] = bytes.Clone(frame)
	return nil
}

func (l *memAckLog) Frames(num uint64) (map[uint64]map[string][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.m[num]), nil
}

func (l *memAckLog) Rounds() ([]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.m)), nil
}

func (l *memAckLog) Drop(num uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, num)
	return nil
}

// TestAcknowledgedReportsSurviveRestart (SS-Double): two volunteers'
// reports are acknowledged, a third volunteer has only checked in, and
// the relay stops with the round open. The restarted relay does not abort
// the round: it closes it with the two acknowledged reports (every one of
// their sealed messages in the batch), the three check-ins and the
// population, and then holds nothing more for it.
func TestAcknowledgedReportsSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		cs := []*tclient{h.mustDial(), h.mustDial(), h.mustDial()}
		synctest.Wait()
		if st := h.announce(1, p, time.Minute); st != 200 {
			t.Fatal(st)
		}
		var sealed [][]byte
		for i, c := range cs {
			c.announcement()
			if i == 2 {
				c.send(checkIn(1))
				if a := c.ack(); a.Status != wire.AckAccepted {
					t.Fatalf("check-in ack %+v", a)
				}
				continue
			}
			c.send(checkIn(1))
			if a := c.ack(); a.Status != wire.AckAccepted {
				t.Fatalf("check-in ack %+v", a)
			}
			for k, f := range h.reportFrames(1, p, []uint32{uint32(i), 2, 4, 6}, 0.5) {
				r, _ := wire.ParseReport(f, p)
				sealed = append(sealed, bytes.Clone(r.Sealed))
				c.send(f)
				if a := c.ack(); a.Status != wire.AckAccepted || int(a.Received) != k+1 {
					t.Fatalf("report frame %d: ack %+v", k, a)
				}
			}
		}
		synctest.Wait()
		if b, a := agg.snapshot(); len(b)+len(a) != 0 {
			t.Fatalf("round closed before the stop: %d batches, %d aborts", len(b), len(a))
		}
		h.stop()
		h.start()
		time.Sleep(time.Second)
		synctest.Wait()
		batches, aborts := agg.snapshot()
		if len(aborts) != 0 || len(batches) != 1 {
			t.Fatalf("after the restart: %d batches, %d aborts; want the round's batch", len(batches), len(aborts))
		}
		b, err := wire.ParseBatch(batches[0], p)
		if err != nil {
			t.Fatal(err)
		}
		if b.Round != 1 || b.Reports != 2 || b.CheckedIn != 3 || b.Population != 3 {
			t.Fatalf("batch round %d: %d reports, %d checked in, population %d; want 1, 2, 3, 3", b.Round, b.Reports, b.CheckedIn, b.Population)
		}
		for i, s := range sealed {
			if !slices.ContainsFunc(b.Messages, func(m wire.BatchMessage) bool { return bytes.Equal(m.Sealed, s) }) {
				t.Errorf("acknowledged message %d missing from the batch", i)
			}
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Errorf("outbox after the batch: %v", l)
		}
		if r, _ := h.store.Rounds(); len(r) != 0 {
			t.Errorf("frame records after the batch: rounds %v", r)
		}
	})
}

// TestFrameNotAckedWhenNotDurable: a frame the relay cannot keep durably
// is never acknowledged: the connection ends without an Ack.
func TestFrameNotAckedWhenNotDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memAckLog{fail: true}
		h := newHarness(t, &fakeAgg{}, "", func(c *Config) { c.Reports = log })
		defer h.close()
		p := testParams()
		c := h.mustDial()
		synctest.Wait()
		if st := h.announce(1, p, time.Minute); st != 200 {
			t.Fatal(st)
		}
		c.announcement()
		c.send(checkIn(1))
		if b := c.next(); b != nil {
			t.Fatalf("got %x after a check-in the relay could not persist, want no ack", b)
		}
	})
}

// syncFailFS fails every fsync of the relay's store once armed.
type syncFailFS struct {
	datastore.OS
	armed *atomic.Bool
}

type syncFailFile struct {
	datastore.File
	armed *atomic.Bool
}

func (f syncFailFS) OpenFile(name string, flag int, perm fs.FileMode) (datastore.File, error) {
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncFailFile{file, f.armed}, nil
}

func (f syncFailFile) Sync() error {
	if f.armed.Load() {
		return errors.New("fsync: input/output error")
	}
	return f.File.Sync()
}

// TestFailingFsyncSendsNothing (SS-Double): the relay's disk stops
// syncing after two reports were acknowledged; at the deadline the batch
// cannot be made durable, and neither can an abort: nothing reaches the
// aggregator. After a restart on a healthy disk the round's acknowledged
// reports are still there, and its batch is sent.
func TestFailingFsyncSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{}
		armed := new(atomic.Bool)
		h := newHarnessFS(t, agg, "", syncFailFS{armed: armed})
		defer h.close()
		p := testParams()
		cs := []*tclient{h.mustDial(), h.mustDial(), h.mustDial()}
		synctest.Wait()
		if st := h.announce(1, p, time.Minute); st != 200 {
			t.Fatal(st)
		}
		for i, c := range cs {
			c.announcement()
			if i == 2 {
				c.send(checkIn(1))
				c.ack()
				continue
			}
			h.participate(c, 1, p, []uint32{uint32(i), 2, 4, 6}, 0.5)
		}
		synctest.Wait()
		armed.Store(true)
		time.Sleep(2 * time.Minute) // past the deadline: the round closes
		synctest.Wait()
		if b, a := agg.snapshot(); len(b)+len(a) != 0 {
			t.Fatalf("with a failing fsync: %d batches, %d aborts sent", len(b), len(a))
		}
		h.stop()
		armed.Store(false)
		h.start()
		time.Sleep(time.Second)
		synctest.Wait()
		batches, aborts := agg.snapshot()
		if len(aborts) != 0 || len(batches) != 1 {
			t.Fatalf("after the restart: %d batches, %d aborts", len(batches), len(aborts))
		}
		if b, err := wire.ParseBatch(batches[0], p); err != nil || b.Reports != 2 || b.CheckedIn != 3 {
			t.Fatalf("batch %+v, %v: want 2 reports, 3 check-ins", b, err)
		}
	})
}
