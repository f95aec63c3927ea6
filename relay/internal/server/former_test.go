package server

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/relaystore"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
)

// toFormerFormat rewrites a stopped relay's state directory in the format
// before the store: one file per outbox record (outbox.Outbox) and
// helper.key (0600), no store.log.
func toFormerFormat(t *testing.T, dir string) {
	t.Helper()
	st, err := relaystore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	recs := make(map[outbox.Entry][]byte)
	for _, e := range ents {
		if recs[e], err = st.Get(e.Round, e.Kind); err != nil {
			t.Fatal(err)
		}
	}
	k, _, err := st.HelperKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := k.MarshalBinary()
	st.Close()
	if err := os.Remove(filepath.Join(dir, datastore.LogFile)); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for e, b := range recs {
		if err := ob.Put(e.Round, e.Kind, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, helperkey.File), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// imported checks that the former file name was imported and kept.
func imported(t *testing.T, dir, name string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s still there (%v)", name, err)
	}
	if _, err := os.Stat(filepath.Join(dir, name+relaystore.ImportedSuffix)); err != nil {
		t.Errorf("%s not kept: %v", name+relaystore.ImportedSuffix, err)
	}
}

// TestFormerStateResumesSecAggClose: a relay of the former format stopped
// while its secure-summation close was at the aggregator (the files
// 00000000000000000001.secagg-close and helper.key); the relay on the
// store imports them on its first start and resumes the round: the
// identical close, one noised share, the round's sum at the aggregator,
// with the same helper key.
func TestFormerStateResumesSecAggClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, hold: make(chan struct{}), holdPath: secAggClosePath}
		h := newHarness(t, agg, "")
		defer h.close()
		pub := h.helperPub()
		h.sendHonestSecAggRound(p) // the close is persisted; the aggregator holds it
		h.stop()
		toFormerFormat(t, h.dir)
		close(agg.hold)
		h.start()
		synctest.Wait()
		imported(t, h.dir, outbox.Name(1, outbox.SecAggClose))
		imported(t, h.dir, helperkey.File)
		if h.helperPub() != pub {
			t.Error("the imported helper key is not the relay's")
		}
		agg.mu.Lock()
		closes, na, res, errs := agg.attempts[secAggClosePath], len(agg.aggs), agg.result, agg.errs
		agg.mu.Unlock()
		if len(errs) != 0 || na != 1 || res == nil || res.Count != 3 || len(closes) < 2 {
			t.Fatalf("after the import: %d closes, %d shares, result %v, errors %v", len(closes), na, res, errs)
		}
		for i := range closes {
			if !bytes.Equal(closes[i], closes[0]) {
				t.Fatalf("close %d differs from the first", i)
			}
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after the resumed round: %v", l)
		}
	})
}

// TestFormerStateResendsBatch: a relay of the former format stopped with
// a persisted batch the aggregator never answered; the relay on the store
// imports it and sends the identical bytes (no second padding).
func TestFormerStateResendsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{failFirst: 1 << 30}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		p.Quota = 2
		cs := []*tclient{h.mustDial(), h.mustDial()}
		synctest.Wait()
		h.announce(1, p, time.Minute)
		for i, c := range cs {
			c.announcement()
			h.participate(c, 1, p, []uint32{uint32(i), 2, 4, 6}, 0.5)
		}
		synctest.Wait()
		h.stop()
		first, _ := agg.snapshot()
		if len(first) == 0 {
			t.Fatal("no attempt before the stop")
		}
		toFormerFormat(t, h.dir)
		agg.mu.Lock()
		agg.failFirst = 0
		agg.mu.Unlock()
		h.start()
		time.Sleep(time.Second)
		synctest.Wait()
		imported(t, h.dir, outbox.Name(1, outbox.Batch))
		batches, aborts := agg.snapshot()
		if len(aborts) != 0 || !bytes.Equal(batches[len(batches)-1], first[0]) {
			t.Fatalf("after the import: %d aborts, last batch identical %v", len(aborts), bytes.Equal(batches[len(batches)-1], first[0]))
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox not empty: %v", l)
		}
	})
}
