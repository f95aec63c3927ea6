// Package minilog is a deliberately minimal append-only log of CRC-framed
// transactions with group commit, written for this measurement only (the
// fallback "own ~100 lines" candidate). No compaction.
//
// Frame: u32 payload length | u32 CRC-32C(payload) | payload.
// Payload: repeated op: u8 kind(1 put, 2 delete) | u16 len(bucket) | u16 len(key)
// | u32 len(value) | bucket | key | value.
package minilog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type Store struct {
	f       *os.File
	mu      sync.Mutex // guards state and pending
	state   map[string]map[string][]byte
	pending [][]byte
	waiters []chan error
	leader  bool
	Fsyncs  int64
	Commits int64
}

type Tx struct {
	buf []byte
	s   *Store
	ops []op
}
type op struct {
	kind byte
	b, k string
	v    []byte
}

func (t *Tx) Put(b, k string, v []byte) {
	t.ops = append(t.ops, op{1, b, k, append([]byte(nil), v...)})
}
func (t *Tx) Delete(b, k string) { t.ops = append(t.ops, op{2, b, k, nil}) }

func Open(dir string) (*Store, error) {
	f, err := os.OpenFile(filepath.Join(dir, "store.log"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	s := &Store{f: f, state: map[string]map[string][]byte{}}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	off := 0
	for off+8 <= len(data) {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if off+8+n > len(data) || crc32.Checksum(data[off+8:off+8+n], castagnoli) != binary.LittleEndian.Uint32(data[off+4:]) {
			break // torn tail: drop it
		}
		if err := s.apply(data[off+8 : off+8+n]); err != nil {
			return nil, err
		}
		off += 8 + n
	}
	if err := f.Truncate(int64(off)); err != nil {
		return nil, fmt.Errorf("truncate torn tail: %w", err)
	}
	if _, err := f.Seek(int64(off), io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek: %w", err)
	}
	return s, nil
}

func (s *Store) apply(p []byte) error {
	for len(p) > 0 {
		if len(p) < 9 {
			return errors.New("short op")
		}
		kind, bl, kl, vl := p[0], int(binary.LittleEndian.Uint16(p[1:])), int(binary.LittleEndian.Uint16(p[3:])), int(binary.LittleEndian.Uint32(p[5:]))
		p = p[9:]
		b, k, v := string(p[:bl]), string(p[bl:bl+kl]), p[bl+kl:bl+kl+vl]
		p = p[bl+kl+vl:]
		m := s.state[b]
		if m == nil {
			m = map[string][]byte{}
			s.state[b] = m
		}
		if kind == 1 {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
	return nil
}

// Get returns the current value (not to be modified).
func (s *Store) Get(b, k string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.state[b][k]
	return v, ok
}

// Count returns the number of keys in bucket b.
func (s *Store) Count(b string) int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.state[b]) }

// Update runs fn, frames its ops and returns once they are fsynced.
// Concurrent Updates share one write+fdatasync (group commit): the first
// waiter becomes leader and flushes everything queued meanwhile.
func (s *Store) Update(fn func(*Tx) error) error {
	tx := &Tx{s: s}
	if err := fn(tx); err != nil {
		return err
	}
	var p []byte
	for _, o := range tx.ops {
		p = append(p, o.kind)
		p = binary.LittleEndian.AppendUint16(p, uint16(len(o.b)))
		p = binary.LittleEndian.AppendUint16(p, uint16(len(o.k)))
		p = binary.LittleEndian.AppendUint32(p, uint32(len(o.v)))
		p = append(append(append(p, o.b...), o.k...), o.v...)
	}
	frame := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	frame = binary.LittleEndian.AppendUint32(frame, crc32.Checksum(p, castagnoli))
	frame = append(frame, p...)
	done := make(chan error, 1)
	s.mu.Lock()
	if err := s.apply(p); err != nil { // visible before durable (bench simplification)
		s.mu.Unlock()
		return err
	}
	s.pending = append(s.pending, frame)
	s.waiters = append(s.waiters, done)
	if s.leader {
		s.mu.Unlock()
		return <-done
	}
	s.leader = true
	for len(s.pending) > 0 {
		batch, ws := s.pending, s.waiters
		s.pending, s.waiters = nil, nil
		s.mu.Unlock()
		var buf []byte
		for _, fr := range batch {
			buf = append(buf, fr...)
		}
		_, err := s.f.Write(buf)
		if err == nil {
			err = s.f.Sync() // fsync(2) on Linux
		}
		s.mu.Lock()
		s.Fsyncs++
		s.Commits += int64(len(ws))
		for _, w := range ws {
			w <- err
		}
	}
	s.leader = false
	s.mu.Unlock()
	return <-done
}

func (s *Store) Close() error { return s.f.Close() }
