package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/durable"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Peer is the other server's ledger head as this one last recorded it
// (the relay's noise ledger, for the aggregator; the aggregator's privacy
// ledger, for the relay; docs/threat-model.md, "Ledgers that anchor each
// other"), kept durably in the server's datastore (OpenStore: BucketPeer,
// one Update per change) or in its own file beside a ledger file
// (OpenPeer, Options.PeerFile). It never goes
// back: a head behind the recorded one is refused, since the other
// server's ledger lost records.
//
// The value (and the file) is JSON, {"count":N,"hash":"<hex>"}; the file is replaced whole
// (shared/durable) on every change. OpenPeer also reads the relay's
// former format, a wire.Anchor frame whose Own is the head.
type Peer struct {
	path string
	db   *datastore.Store // the store (BucketPeer), or nil: path
	mu   sync.Mutex
	head wire.Head
}

// openStorePeer loads the head kept in db (none yet: the empty head).
func openStorePeer(db *datastore.Store) (*Peer, error) {
	p := &Peer{db: db}
	err := db.View(func(tx *datastore.ReadTx) error {
		b, ok := tx.Get(BucketPeer, PeerKey)
		if !ok {
			return nil
		}
		h, err := parsePeer(b)
		if err != nil {
			return fmt.Errorf("%w: the store's peer head: %w", ErrCorrupt, err)
		}
		p.head = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
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
	if p.head, err = parsePeer(b); err != nil {
		return nil, fmt.Errorf("%w: peer head %s: %w", ErrCorrupt, path, err)
	}
	return p, nil
}

// parsePeer decodes a peer-head file of either format.
func parsePeer(b []byte) (wire.Head, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		a, err := wire.ParseAnchor(b) // the relay's noise ledger before the merge
		if err != nil {
			return wire.Head{}, err
		}
		return a.Own, nil
	}
	var f peerFile
	if err := decodeStrict(b, &f); err != nil {
		return wire.Head{}, err
	}
	h, err := ParseHash(f.Hash)
	if err != nil {
		return wire.Head{}, err
	}
	if f.Count == 0 && h != (Hash{}) {
		return wire.Head{}, errors.New("an empty ledger's head has the zero hash")
	}
	return wire.Head{Count: f.Count, Hash: h}, nil
}

// Head returns the recorded head.
func (p *Peer) Head() wire.Head {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.head
}

// Record durably records h as the other server's head. Fewer records
// than the recorded head, or as many with another hash, is ErrRollback
// and records nothing.
func (p *Peer) Record(h wire.Head) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case h.Count < p.head.Count:
		return fmt.Errorf("%w: the other server reports %d records, it reported %d before", ErrRollback, h.Count, p.head.Count)
	case h == p.head:
		return nil
	case h.Count == p.head.Count:
		return fmt.Errorf("%w: the other server's record %d changed", ErrRollback, h.Count)
	}
	b, err := json.Marshal(peerFile{Count: h.Count, Hash: Hash(h.Hash).String()})
	if err != nil {
		return fmt.Errorf("ledger: peer head: %w", err)
	}
	if p.db != nil {
		err = p.db.Update(func(tx *datastore.Tx) error { tx.Put(BucketPeer, PeerKey, b); return nil })
	} else {
		err = durable.WriteFile(p.path, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("ledger: peer head: %w", err)
	}
	p.head = h
	return nil
}
