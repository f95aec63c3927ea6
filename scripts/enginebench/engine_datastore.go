package main

import (
	"github.com/blanket-fl/blanket/shared/datastore"
)

// ---- the lead's shared/datastore (append-only log, group commit, compaction) ----

type dsEng struct{ s *datastore.Store }

func init() {
	engines["datastore"] = func(dir string) (Engine, error) {
		s, err := datastore.Open(dir, nil)
		return &dsEng{s}, err
	}
}

func (e *dsEng) Commit(recs [][2][]byte, agg []byte) error {
	return e.s.Update(func(tx *datastore.Tx) error {
		for _, r := range recs {
			tx.Put(string(bNonce), string(r[0]), r[1])
		}
		if agg != nil {
			tx.Put(string(bAgg), string(kAgg), agg)
		}
		return nil
	})
}

func (e *dsEng) CloseRound(key, val []byte, nonces [][]byte) error {
	return e.s.Update(func(tx *datastore.Tx) error {
		tx.Put(string(bRound), string(key), val)
		for _, k := range nonces {
			tx.Delete(string(bNonce), string(k))
		}
		return nil
	})
}

func (e *dsEng) ReadState() (a, n int, err error) {
	err = e.s.View(func(tx *datastore.ReadTx) error {
		v, _ := tx.Get(string(bAgg), string(kAgg))
		a = len(v)
		n = len(tx.Keys(string(bNonce)))
		return nil
	})
	return
}

func (e *dsEng) Stats() map[string]any {
	st := e.s.Stats()
	return map[string]any{"commits": st.Commits, "fsyncs": st.Fsyncs, "bytes_written": st.BytesWritten,
		"compactions": st.Compactions, "log_size": st.LogSize}
}

func (e *dsEng) Close() error { return e.s.Close() }
