package rounds

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/durable"
)

// Store is where the machine's state is durable: the checkpoint, the open
// secure-summation round's streaming state and the charged round awaiting
// its aggregate share. A Save returns nil only once what it saved is
// durable; the machine answers nothing that depends on it before (the
// order is in the package documentation). Load* return nil, nil when
// there is nothing; Remove* of nothing is no error.
type Store interface {
	LoadState() (*checkpoint.State, error)
	SaveState(st *checkpoint.State) error
	LoadCollect() (*Collect, error)
	SaveCollect(c *Collect) error
	// SealCollect records that no chunk of round from seq seal on is
	// folded (Collect.Sealed; a relay's resume, SecAggResumeIntake): if
	// the stored collect is another round's, or none (the round's first
	// checkpoint is not written yet), it may record nothing, for that
	// checkpoint carries the seal.
	SealCollect(round int, seal uint32) error
	RemoveCollect() error
	LoadPending() (*Pending, error)
	SavePending(p *Pending) error
	RemovePending() error
}

// Collect is the open secure-summation round's streaming state, saved at
// each checkpoint of its chunks (SecAggChunkIntake: once per group of
// chunks, before any of them is answered): the next chunk expected, the
// digest and answer of each chunk the checkpoint covers (the chunks folded
// since the previous one; an identical re-send of any of them gets its
// answer again) and the leader's running state
// (analysis.SecAggLeader.MarshalState: its aggregate, nonces and counts).
// LoadCollect returns in Chunks at least the last checkpoint's chunks
// (DBStore: every chunk of the round), and in Sealed the lowest seal
// recorded (SaveCollect's or SealCollect's).
type Collect struct {
	Round int    `json:"round"`
	Next  uint32 `json:"next"`
	// Sealed, if not 0, is the seq from which no chunk of the round is
	// folded (SecAggResumeIntake).
	Sealed uint32        `json:"sealed,omitempty"`
	Chunks []ChunkAnswer `json:"chunks,omitempty"`
	Leader []byte        `json:"leader"`
	// LastDig and LastReply are the former file's (one chunk per save):
	// read, never written.
	LastDig   string `json:"last_digest,omitempty"`
	LastReply []byte `json:"last_reply,omitempty"`
}

// ChunkAnswer is one chunk's digest (of its frame) and the SecAggPrep
// frame it was answered with.
type ChunkAnswer struct {
	Seq    uint32 `json:"seq"`
	Digest string `json:"digest"`
	Reply  []byte `json:"reply"`
}

// answers returns c's chunk answers, the former file's last one included.
func (c *Collect) answers() []ChunkAnswer {
	out := c.Chunks
	if c.LastDig != "" && c.Next > 1 && !slices.ContainsFunc(out, func(a ChunkAnswer) bool { return a.Digest == c.LastDig }) {
		out = append(slices.Clip(out), ChunkAnswer{Seq: c.Next - 1, Digest: c.LastDig, Reply: c.LastReply})
	}
	return out
}

// Pending is a prepared secure-summation round, saved before its charge:
// the leader's accepted aggregate, the SecAggCharged reply and the
// round's record, so that a restart between the charge and the relay's
// aggregate share resumes the round (docs/secagg.md, "Crash safety").
type Pending struct {
	Round     int                    `json:"round"`
	Digest    string                 `json:"digest"`
	Reply     []byte                 `json:"reply"`
	Rec       checkpoint.RoundRecord `json:"record"`
	Aggregate []byte                 `json:"aggregate"` // secagg.Aggregate.MarshalBinary
}

// File names of FileStore inside its directory.
const (
	CheckpointFile = "state.json"
	// CollectFile is Collect, rewritten whole (durable.WriteFile) at each
	// checkpoint of the chunks, before they are answered.
	CollectFile = "secagg-collect.json"
	// PendingFile is Pending.
	PendingFile = "secagg-pending.json"
)

// FileStore is a Store of one file per kind of record in Dir, each written
// atomically and durably (durable.WriteFile: temporary file, fsync,
// rename, directory fsync).
type FileStore struct{ Dir string }

// LoadState reads the checkpoint (checkpoint.Load).
func (f FileStore) LoadState() (*checkpoint.State, error) {
	return checkpoint.Load(filepath.Join(f.Dir, CheckpointFile))
}

// SaveState writes the checkpoint (checkpoint.State.Save).
func (f FileStore) SaveState(st *checkpoint.State) error {
	return st.Save(filepath.Join(f.Dir, CheckpointFile))
}

// LoadCollect reads CollectFile.
func (f FileStore) LoadCollect() (*Collect, error) {
	return loadJSON[Collect](filepath.Join(f.Dir, CollectFile))
}

// SaveCollect writes CollectFile.
func (f FileStore) SaveCollect(c *Collect) error {
	return saveJSON(filepath.Join(f.Dir, CollectFile), c)
}

// SealCollect rewrites CollectFile with the seal, if it is round's and
// has none as low.
func (f FileStore) SealCollect(round int, seal uint32) error {
	c, err := f.LoadCollect()
	if err != nil || c == nil || c.Round != round || (c.Sealed > 0 && c.Sealed <= seal) {
		return err
	}
	c.Sealed = seal
	return f.SaveCollect(c)
}

// RemoveCollect deletes CollectFile.
func (f FileStore) RemoveCollect() error { return remove(filepath.Join(f.Dir, CollectFile)) }

// LoadPending reads PendingFile.
func (f FileStore) LoadPending() (*Pending, error) {
	return loadJSON[Pending](filepath.Join(f.Dir, PendingFile))
}

// SavePending writes PendingFile.
func (f FileStore) SavePending(p *Pending) error {
	return saveJSON(filepath.Join(f.Dir, PendingFile), p)
}

// RemovePending deletes PendingFile.
func (f FileStore) RemovePending() error { return remove(filepath.Join(f.Dir, PendingFile)) }

func loadJSON[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func saveJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return durable.WriteFile(path, b, 0o600)
}

func remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
