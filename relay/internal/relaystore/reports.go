package relaystore

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/blanket-fl/blanket/relay/internal/acklog"
	"github.com/blanket-fl/blanket/shared/datastore"
)

// BucketReports holds the accepted frames of the open shuffle round
// (acklog): key ROUND/CONN/KEY (20 digits each, then acklog's key), value
// the frame. One small record per frame, never a growing blob: each is
// written once, and concurrent Appends share an fsync (group commit).
const BucketReports = "relay/reports"

var _ acklog.Log = (*Store)(nil)

func roundPrefix(num uint64) string { return fmt.Sprintf("%020d/", num) }

// Append stores one accepted frame durably (acklog.Log).
func (s *Store) Append(num, conn uint64, key string, frame []byte) error {
	k := fmt.Sprintf("%020d/%020d/%s", num, conn, key)
	if err := s.db.Update(func(tx *datastore.Tx) error {
		tx.Put(BucketReports, k, frame)
		return nil
	}); err != nil {
		return fmt.Errorf("relaystore: recording a frame of round %d: %w", num, err)
	}
	return nil
}

// Frames returns round num's records by connection and key (acklog.Log).
func (s *Store) Frames(num uint64) (map[uint64]map[string][]byte, error) {
	out := make(map[uint64]map[string][]byte)
	prefix := roundPrefix(num)
	err := s.db.View(func(tx *datastore.ReadTx) error {
		for _, k := range tx.Keys(BucketReports) {
			rest, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			c, key, ok := strings.Cut(rest, "/")
			conn, err := strconv.ParseUint(c, 10, 64)
			if !ok || err != nil {
				continue
			}
			v, _ := tx.Get(BucketReports, k)
			if out[conn] == nil {
				out[conn] = make(map[string][]byte)
			}
			out[conn][key] = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relaystore: %w", err)
	}
	return out, nil
}

// Rounds returns the rounds that have records, in order (acklog.Log).
func (s *Store) Rounds() ([]uint64, error) {
	var out []uint64
	err := s.db.View(func(tx *datastore.ReadTx) error {
		for _, k := range tx.Keys(BucketReports) { // sorted: by round first
			r, _, ok := strings.Cut(k, "/")
			n, err := strconv.ParseUint(r, 10, 64)
			if ok && err == nil && (len(out) == 0 || out[len(out)-1] != n) {
				out = append(out, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relaystore: %w", err)
	}
	return out, nil
}

// Drop removes round num's records, in one transaction (acklog.Log).
func (s *Store) Drop(num uint64) error {
	prefix := roundPrefix(num)
	if err := s.db.Update(func(tx *datastore.Tx) error {
		for _, k := range tx.Keys(BucketReports) {
			if strings.HasPrefix(k, prefix) {
				tx.Delete(BucketReports, k)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("relaystore: dropping the frames of round %d: %w", num, err)
	}
	return nil
}
