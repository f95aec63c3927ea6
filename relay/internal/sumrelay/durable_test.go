package sumrelay

import (
	"errors"
	"io/fs"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/relaystore"
	"github.com/blanket-fl/blanket/shared/datastore"
)

// syncFailFS fails every fsync of the store's files once armed (a disk
// that stops being durable mid-round).
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

func (f syncFailFS) SyncDir(dir string) error {
	if f.armed.Load() {
		return errors.New("fsync: input/output error")
	}
	return f.OS.SyncDir(dir)
}

// TestFailingFsyncSendsNothing: the relay's state is the datastore
// (relaystore) on a disk whose fsync starts failing once the round's
// reports are in: the close is never posted (nor, of course, an aggregate
// share), nothing is queued for the Sender, nothing is charged; the
// aggregator got the chunks only.
func TestFailingFsyncSendsNothing(t *testing.T) {
	f := newFixture(t)
	armed := new(atomic.Bool)
	st, err := relaystore.Open(t.TempDir(), &datastore.Options{FS: syncFailFS{armed: armed}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(1, outbox.OpenRound, nil); err != nil {
		t.Fatal(err)
	}
	f.agg.store = nil // the leader checks the relay's store itself below
	f.rl = f.newRelayOn(st)
	f.openRound(1, 3)
	armed.Store(true)
	f.rl.Close(t.Context(), f.closed(1, 3))
	for _, p := range f.agg.paths {
		if p != ChunkPath {
			t.Fatalf("posted %v with a failing fsync, want chunks only", f.agg.paths)
		}
	}
	if len(f.queued) != 0 || len(f.charged) != 0 {
		t.Errorf("queued %v, charged %v: want nothing", f.queued, f.charged)
	}
	if l, _ := st.List(); !slices.Equal(l, []outbox.Entry{{Round: 1, Kind: outbox.OpenRound}}) {
		t.Errorf("store after the failure: %v, want the open marker alone (the next start aborts the round)", l)
	}
}
