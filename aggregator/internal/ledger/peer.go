package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/blanket-fl/blanket/shared/durable"
)

// Peer is the other server's ledger head as this one last recorded it
// (the relay's noise ledger, for the aggregator; docs/threat-model.md,
// "Ledgers that anchor each other"), kept durably in its own file beside
// the ledger. It never goes back: a head behind the recorded one is
// refused, since the other server's ledger lost records.
type Peer struct {
	path  string
	mu    sync.Mutex
	count uint64
	hash  Hash
}

type peerFile struct {
	Count uint64 `json:"count"`
	Hash  string `json:"hash"`
}

// OpenPeer loads the head recorded at path (none yet: the empty head).
func OpenPeer(path string) (*Peer, error) {
	p := &Peer{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: peer head: %w", err)
	}
	var f peerFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: peer head %s: %w", ErrCorrupt, path, err)
	}
	h, err := ParseHash(f.Hash)
	if err != nil {
		return nil, fmt.Errorf("%w: peer head %s: %w", ErrCorrupt, path, err)
	}
	p.count, p.hash = f.Count, h
	return p, nil
}

// Head returns the recorded head.
func (p *Peer) Head() (count uint64, hash Hash) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, p.hash
}

// Record durably records (count, hash) as the other server's head. Fewer
// records than the recorded head, or as many with another hash, is
// ErrRollback and records nothing.
func (p *Peer) Record(count uint64, hash Hash) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case count < p.count:
		return fmt.Errorf("%w: the relay reports %d records, it reported %d before", ErrRollback, count, p.count)
	case count == p.count && hash == p.hash:
		return nil
	case count == p.count:
		return fmt.Errorf("%w: the relay's record %d changed", ErrRollback, count)
	}
	b, err := json.Marshal(peerFile{Count: count, Hash: hash.String()})
	if err != nil {
		return err
	}
	if err := durable.WriteFile(p.path, b, 0o600); err != nil {
		return fmt.Errorf("ledger: peer head: %w", err)
	}
	p.count, p.hash = count, hash
	return nil
}
