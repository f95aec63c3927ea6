package rounds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
)

// Buckets of DBStore in the state directory's datastore.
const (
	// BucketState holds the checkpoint (key "state").
	BucketState = "aggregator/checkpoint"
	// BucketCollect holds the open secure-summation round's chunks: one
	// small record per chunk (key "%020d/chunk/%010d": its digest, its
	// verdicts reply; the last chunk of each checkpoint also the report
	// nonces the checkpoint added) and the leader's running state without
	// its nonces (key "%020d/running", rewritten once per checkpoint of a
	// group of chunks), so that the bytes written per report do not grow
	// with the round's size; and the seal a relay's resume set, if any
	// (key "%020d/seal", Collect.Sealed).
	BucketCollect = "secagg/collect"
	// BucketPending holds the charged round awaiting its aggregate share
	// (key "pending").
	BucketPending = "secagg/pending"
	// BucketMeta records the import of a state directory's former files
	// (key "imported").
	BucketMeta = "aggregator/meta"
)

// OpenDB opens the state directory's datastore (created if missing),
// imports the directory's former files once (ImportFiles) and returns it
// with the DBStore over it. fsys is nil but in tests (a failing write or
// fsync).
func OpenDB(dir string, log *slog.Logger, fsys datastore.FileSystem) (*datastore.Store, *DBStore, error) {
	return OpenDBIn(context.Background(), serverstore.Config{Dir: dir}, log, fsys)
}

// OpenDBIn is OpenDB on the store c says: the embedded store in c.Dir, or
// PostgreSQL (serverstore.Open); the former files are c.Dir's.
func OpenDBIn(ctx context.Context, c serverstore.Config, log *slog.Logger, fsys datastore.FileSystem) (*datastore.Store, *DBStore, error) {
	db, err := serverstore.Open(ctx, c, &datastore.Options{Logger: log, FS: fsys})
	if err != nil {
		return nil, nil, err
	}
	if err := ImportFiles(db, c.Dir); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, NewDBStore(db), nil
}

// DBStore is a Store in one datastore (shared/datastore): each Save is one
// transaction, durable when it returns nil (a failed write or fsync
// returns an error wrapping datastore.ErrNotDurable, and the datastore
// refuses every later write).
type DBStore struct {
	db *datastore.Store
	mu sync.Mutex
	// seen are the nonces already stored for round (the chunks' records
	// hold each once).
	round int
	seen  map[string]struct{}
}

// NewDBStore returns the Store of db.
func NewDBStore(db *datastore.Store) *DBStore { return &DBStore{db: db} }

type chunkRecord struct {
	Digest string `json:"digest"`
	Reply  []byte `json:"reply"`
	Nonces []byte `json:"nonces"` // 16 bytes each, those this chunk added
}

type sealRecord struct {
	Seal uint32 `json:"seal"`
}

type runningRecord struct {
	Next   uint32          `json:"next"`
	Leader json.RawMessage `json:"leader"` // the leader's state without "nonces"
}

func roundKey(r int) string { return fmt.Sprintf("%020d", r) }

// LoadState reads the checkpoint (nil if none).
func (d *DBStore) LoadState() (*checkpoint.State, error) {
	var st checkpoint.State
	var ok bool
	err := d.db.View(func(tx *datastore.ReadTx) (err error) {
		ok, err = datastore.GetJSON(tx, BucketState, "state", &st)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	// As checkpoint.Load checks its file.
	if st.Version != checkpoint.Version || st.Round < 0 || (st.Open != nil && st.Open.Round <= st.Round) {
		return nil, fmt.Errorf("rounds: stored checkpoint: version %d (want %d), last round %d, open %v", st.Version, checkpoint.Version, st.Round, st.Open)
	}
	for _, v := range st.Model {
		if !finite(v) {
			return nil, errors.New("rounds: stored checkpoint: non-finite model parameter")
		}
	}
	if err := st.CheckMomentum(); err != nil {
		return nil, fmt.Errorf("rounds: stored checkpoint: %w", err)
	}
	return &st, nil
}

// SaveState writes the checkpoint.
func (d *DBStore) SaveState(st *checkpoint.State) error {
	return d.db.Update(func(tx *datastore.Tx) error {
		if err := roundsOfState(tx, st); err != nil {
			return err
		}
		return datastore.PutJSON(tx, BucketState, "state", st)
	})
}

// splitNonces takes the "nonces" field (16 bytes each) out of the leader's
// state (analysis.SecAggLeader.MarshalState) and returns the rest.
func splitNonces(state []byte) (rest []byte, nonces []byte, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(state, &m); err != nil {
		return nil, nil, fmt.Errorf("rounds: leader state: %w", err)
	}
	if raw, ok := m["nonces"]; ok {
		if err := json.Unmarshal(raw, &nonces); err != nil || len(nonces)%16 != 0 {
			return nil, nil, errors.New("rounds: leader state: bad nonces")
		}
		delete(m, "nonces")
	}
	rest, err = json.Marshal(m)
	return rest, nonces, err
}

// mergeNonces puts nonces back into the leader's state.
func mergeNonces(rest []byte, nonces []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rest, &m); err != nil {
		return nil, fmt.Errorf("rounds: leader state: %w", err)
	}
	b, err := json.Marshal(nonces)
	if err != nil {
		return nil, err
	}
	m["nonces"] = b
	return json.Marshal(m)
}

// SaveCollect writes the checkpoint c of round c.Round in one
// transaction: a record for each chunk it covers (c.Chunks: digest and
// reply; the last one also carries the nonces not stored before) and the
// leader's running state without nonces, rewritten once per checkpoint
// (not per chunk: it is the one large value, d field elements).
func (d *DBStore) SaveCollect(c *Collect) error {
	rest, nonces, err := splitNonces(c.Leader)
	if err != nil {
		return err
	}
	chunks := c.answers()
	if len(chunks) == 0 && c.Next > 1 {
		return fmt.Errorf("rounds: round %d: a checkpoint of chunks up to %d without their answers", c.Round, c.Next-1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.round != c.Round || d.seen == nil {
		d.round, d.seen = c.Round, map[string]struct{}{}
	}
	var added []byte
	for i := 0; i < len(nonces); i += 16 {
		if _, ok := d.seen[string(nonces[i:i+16])]; !ok {
			added = append(added, nonces[i:i+16]...)
		}
	}
	rk := roundKey(c.Round)
	err = d.db.Update(func(tx *datastore.Tx) error {
		for _, k := range tx.Keys(BucketCollect) {
			if len(k) < len(rk) || k[:len(rk)] != rk { // another round's
				tx.Delete(BucketCollect, k)
			}
		}
		for i, ch := range chunks {
			rec := chunkRecord{Digest: ch.Digest, Reply: ch.Reply}
			if i == len(chunks)-1 {
				rec.Nonces = added
			}
			if err := datastore.PutJSON(tx, BucketCollect, fmt.Sprintf("%s/chunk/%010d", rk, ch.Seq), rec); err != nil {
				return err
			}
		}
		if err := setRound(tx, c.Round, StateCollecting, ""); err != nil {
			return err
		}
		if c.Sealed > 0 {
			if err := putSeal(tx, rk, c.Sealed); err != nil {
				return err
			}
		}
		return datastore.PutJSON(tx, BucketCollect, rk+"/running", runningRecord{Next: c.Next, Leader: rest})
	})
	if err != nil {
		return err
	}
	for i := 0; i < len(added); i += 16 {
		d.seen[string(added[i:i+16])] = struct{}{}
	}
	return nil
}

// putSeal records the seal of the round whose key is rk, unless one as
// low is recorded.
func putSeal(tx *datastore.Tx, rk string, seal uint32) error {
	var old sealRecord
	ok, err := datastore.GetJSON(tx, BucketCollect, rk+"/seal", &old)
	if err != nil || (ok && old.Seal > 0 && old.Seal <= seal) {
		return err
	}
	return datastore.PutJSON(tx, BucketCollect, rk+"/seal", sealRecord{Seal: seal})
}

// SealCollect records the seal of round in one transaction, if round's
// running state is stored (else its first checkpoint, SaveCollect, will
// carry it).
func (d *DBStore) SealCollect(round int, seal uint32) error {
	rk := roundKey(round)
	return d.db.Update(func(tx *datastore.Tx) error {
		if _, ok := tx.Get(BucketCollect, rk+"/running"); !ok {
			return nil
		}
		return putSeal(tx, rk, seal)
	})
}

// LoadCollect rebuilds the open round's streaming state from its records
// (nil if none), with the answer of every chunk of the round in Chunks
// (those imported from the former file without one excepted).
func (d *DBStore) LoadCollect() (*Collect, error) {
	var c *Collect
	var all []byte
	err := d.db.View(func(tx *datastore.ReadTx) error {
		var run runningRecord
		var round int
		for _, k := range tx.Keys(BucketCollect) {
			if n, _ := fmt.Sscanf(k, "%020d/running", &round); n == 1 && k == roundKey(round)+"/running" {
				if _, err := datastore.GetJSON(tx, BucketCollect, k, &run); err != nil {
					return err
				}
				c = &Collect{Round: round, Next: run.Next}
			}
		}
		if c == nil {
			return nil
		}
		rk := roundKey(c.Round)
		var seal sealRecord
		if _, err := datastore.GetJSON(tx, BucketCollect, rk+"/seal", &seal); err != nil {
			return err
		}
		c.Sealed = seal.Seal
		for seq := uint32(1); seq < c.Next; seq++ {
			var ch chunkRecord
			ok, err := datastore.GetJSON(tx, BucketCollect, fmt.Sprintf("%s/chunk/%010d", rk, seq), &ch)
			if err != nil || !ok {
				return fmt.Errorf("rounds: round %d: chunk %d's record missing (%v)", c.Round, seq, err)
			}
			all = append(all, ch.Nonces...)
			if ch.Digest != "" {
				c.Chunks = append(c.Chunks, ChunkAnswer{Seq: seq, Digest: ch.Digest, Reply: ch.Reply})
			}
		}
		var err error
		c.Leader, err = mergeNonces(run.Leader, all)
		return err
	})
	if err != nil || c == nil {
		return nil, err
	}
	d.mu.Lock()
	d.round, d.seen = c.Round, make(map[string]struct{}, len(all)/16)
	for i := 0; i < len(all); i += 16 {
		d.seen[string(all[i:i+16])] = struct{}{}
	}
	d.mu.Unlock()
	return c, nil
}

// RemoveCollect deletes the chunks' records.
func (d *DBStore) RemoveCollect() error {
	d.mu.Lock()
	d.seen = nil
	d.mu.Unlock()
	return d.db.Update(func(tx *datastore.Tx) error { tx.DeleteBucket(BucketCollect); return nil })
}

// LoadPending reads the charged round awaiting its aggregate (nil if none).
func (d *DBStore) LoadPending() (*Pending, error) {
	var p Pending
	var ok bool
	err := d.db.View(func(tx *datastore.ReadTx) (err error) {
		ok, err = datastore.GetJSON(tx, BucketPending, "pending", &p)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return &p, nil
}

// SavePending writes the prepared round.
func (d *DBStore) SavePending(p *Pending) error {
	return d.db.Update(func(tx *datastore.Tx) error {
		if err := setRound(tx, p.Round, StateClosed, ""); err != nil {
			return err
		}
		return datastore.PutJSON(tx, BucketPending, "pending", p)
	})
}

// DB returns the datastore d writes to.
func (d *DBStore) DB() *datastore.Store { return d.db }

// ChargeTx returns SavePending(p) and SaveState(st) as writes of one
// transaction, for the ledger's ChargeWith: the prepared round, the
// checkpoint (with its Charging marker) and the charge's record are then
// durable together or not at all. st is encoded now: later changes to it
// are not written.
func (d *DBStore) ChargeTx(p *Pending, st *checkpoint.State) (func(*datastore.Tx) error, error) {
	snap, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("rounds: the checkpoint: %w", err)
	}
	var cp checkpoint.State
	if err := json.Unmarshal(snap, &cp); err != nil {
		return nil, fmt.Errorf("rounds: the checkpoint: %w", err)
	}
	return func(tx *datastore.Tx) error {
		if err := setRound(tx, p.Round, StateClosed, ""); err != nil {
			return err
		}
		if err := datastore.PutJSON(tx, BucketPending, "pending", p); err != nil {
			return err
		}
		if err := roundsOfState(tx, &cp); err != nil {
			return err
		}
		return datastore.PutJSON(tx, BucketState, "state", &cp)
	}, nil
}

// RemovePending deletes the prepared round.
func (d *DBStore) RemovePending() error {
	return d.db.Update(func(tx *datastore.Tx) error { tx.Delete(BucketPending, "pending"); return nil })
}

// ImportFiles imports the state directory's former files (FileStore's:
// CheckpointFile, CollectFile, PendingFile) into db once, in one
// transaction with a marker, then renames each to NAME.imported (kept,
// mode 0400). A directory already imported is not imported again (a crash
// between the import and the renames leaves the files; they are renamed
// at the next start).
func ImportFiles(db *datastore.Store, dir string) error {
	old := FileStore{Dir: dir}
	st, err := old.LoadState()
	if err != nil {
		return err
	}
	c, cerr := old.LoadCollect()
	p, perr := old.LoadPending()
	err = db.Update(func(tx *datastore.Tx) error {
		if _, done := tx.Get(BucketMeta, "imported"); done {
			return nil
		}
		if st != nil {
			if err := roundsOfState(tx, st); err != nil {
				return err
			}
			if err := datastore.PutJSON(tx, BucketState, "state", st); err != nil {
				return err
			}
		}
		if c != nil && cerr == nil && c.Next > 1 {
			rest, nonces, err := splitNonces(c.Leader)
			if err != nil {
				return err
			}
			rk := roundKey(c.Round)
			// The former file kept the last checkpoint's answers only: the
			// earlier chunks' records carry nothing but their place; the
			// nonces go with the last chunk's.
			known := make(map[uint32]ChunkAnswer)
			for _, a := range c.answers() {
				known[a.Seq] = a
			}
			for seq := uint32(1); seq < c.Next; seq++ {
				a := known[seq]
				rec := chunkRecord{Digest: a.Digest, Reply: a.Reply}
				if seq == c.Next-1 {
					rec.Nonces = nonces
				}
				if err := datastore.PutJSON(tx, BucketCollect, fmt.Sprintf("%s/chunk/%010d", rk, seq), rec); err != nil {
					return err
				}
			}
			if c.Sealed > 0 {
				if err := putSeal(tx, rk, c.Sealed); err != nil {
					return err
				}
			}
			if err := datastore.PutJSON(tx, BucketCollect, rk+"/running", runningRecord{Next: c.Next, Leader: rest}); err != nil {
				return err
			}
		}
		if p != nil && perr == nil {
			if err := datastore.PutJSON(tx, BucketPending, "pending", p); err != nil {
				return err
			}
		}
		tx.Put(BucketMeta, "imported", []byte(`{"files":["`+CheckpointFile+`","`+CollectFile+`","`+PendingFile+`"]}`))
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: importing the state files: %w", err)
	}
	for _, name := range []string{CheckpointFile, CollectFile, PendingFile} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if err := os.Chmod(path, 0o400); err != nil {
			return err
		}
		if err := os.Rename(path, path+".imported"); err != nil {
			return fmt.Errorf("rounds: keeping the imported %s: %w", name, err)
		}
	}
	return nil
}
