package ledger

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// recordVersion is the version of the line format written by this
// package: 2 adds "prev", the hash chain. Version 1 lines (no "prev") are
// still read, but only before the first version 2 line.
const recordVersion = 2

// Hash is the SHA-256 chain value of a ledger: the hash of the empty
// ledger is all zeros, and each record's hash is SHA-256 of its complete
// line (terminating '\n' included), which commits to the previous hash
// through the line's "prev" field.
type Hash [sha256.Size]byte

// String returns the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses a lowercase or uppercase hex Hash.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("ledger: bad hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// chain returns the hash of a record line following prev.
func chain(line []byte) Hash { return sha256.Sum256(line) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one line of the ledger file.
type record struct {
	V       int             `json:"v"`
	Time    time.Time       `json:"time"`
	Release json.RawMessage `json:"release"`
	CRC     uint32          `json:"crc32c"`
	Eps     float64         `json:"eps"`
	Delta   float64         `json:"delta"`
	Method  string          `json:"method"`
	// Prev is the hash of the ledger before this record (hex; version 2).
	Prev string `json:"prev,omitempty"`
}

// encodeRecord returns the line (with its trailing '\n') that commits rel,
// with the composition (eps, delta, method) it brings the ledger to.
func encodeRecord(rel privacy.Release, now time.Time, eps, delta float64, method string, prev Hash) ([]byte, error) {
	raw, err := json.Marshal(rel)
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding round %d: %w", rel.Round, err)
	}
	line, err := json.Marshal(record{
		V:       recordVersion,
		Time:    now.UTC(),
		Release: raw,
		CRC:     crc32.Checksum(raw, castagnoli),
		Eps:     eps,
		Delta:   delta,
		Method:  method,
		Prev:    prev.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: encoding round %d: %w", rel.Round, err)
	}
	// json.Marshal escapes control characters inside strings, so the line
	// holds no '\n' of its own: the newline appended here is the commit mark.
	return append(line, '\n'), nil
}

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the record")
	}
	return nil
}

// decodeRecord parses one complete line (without its '\n') and checks it
// can be trusted: known version and fields, matching CRC, valid release.
func decodeRecord(line []byte) (record, privacy.Release, error) {
	var rec record
	if len(bytes.TrimSpace(line)) == 0 {
		return rec, privacy.Release{}, errors.New("blank line")
	}
	if err := decodeStrict(line, &rec); err != nil {
		return rec, privacy.Release{}, fmt.Errorf("bad record: %w", err)
	}
	if rec.V != recordVersion && rec.V != 1 {
		return rec, privacy.Release{}, fmt.Errorf("unsupported record version %d (this binary reads 1 and %d)", rec.V, recordVersion)
	}
	if (rec.V == 1) != (rec.Prev == "") {
		return rec, privacy.Release{}, fmt.Errorf("record version %d with prev %q", rec.V, rec.Prev)
	}
	if rec.Release == nil {
		return rec, privacy.Release{}, errors.New("record has no release")
	}
	if got := crc32.Checksum(rec.Release, castagnoli); got != rec.CRC {
		return rec, privacy.Release{}, fmt.Errorf("crc32c mismatch: stored %d, computed %d", rec.CRC, got)
	}
	var rel privacy.Release
	if err := decodeStrict(rec.Release, &rel); err != nil {
		return rec, privacy.Release{}, fmt.Errorf("bad release: %w", err)
	}
	if err := rel.Validate(); err != nil {
		return rec, privacy.Release{}, err
	}
	return rec, rel, nil
}

// replayed is what a ledger file holds.
type replayed struct {
	releases []privacy.Release
	hashes   []Hash // hashes[i] is the chain hash after record i
	last     record // the last committed record (zero if none)
	goodLen  int64  // bytes up to and including the last committed '\n'
	tail     []byte // the torn fragment after goodLen, if any
}

// replay reads a ledger file from its start. Every complete line must be a
// trustworthy record with a strictly larger round than the one before, or
// replay fails with ErrCorrupt naming the line. Bytes after the last '\n' are
// returned as the torn tail, not interpreted.
func replay(r io.Reader) (replayed, error) {
	var out replayed
	br := bufio.NewReader(r)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("ledger: reading line %d: %w", lineNo, err)
		}
		if errors.Is(err, io.EOF) {
			// No terminating '\n': an uncommitted fragment (or nothing).
			if len(line) > 0 {
				out.tail = line
			}
			return out, nil
		}
		rec, rel, derr := decodeRecord(line[:len(line)-1])
		if derr != nil {
			return out, fmt.Errorf("%w: line %d (byte offset %d): %w", ErrCorrupt, lineNo, out.goodLen, derr)
		}
		if n := len(out.releases); n > 0 && rel.Round <= out.releases[n-1].Round {
			return out, fmt.Errorf("%w: line %d (byte offset %d): round %d does not follow round %d", ErrCorrupt, lineNo, out.goodLen, rel.Round, out.releases[n-1].Round)
		}
		var prev Hash
		if n := len(out.hashes); n > 0 {
			prev = out.hashes[n-1]
		}
		if rec.V == 1 && out.last.V > 1 {
			return out, fmt.Errorf("%w: line %d (byte offset %d): version 1 record after a version %d record", ErrCorrupt, lineNo, out.goodLen, out.last.V)
		}
		if rec.V > 1 && rec.Prev != prev.String() {
			return out, fmt.Errorf("%w: line %d (byte offset %d): hash chain broken: prev %s, the records before hash to %s", ErrCorrupt, lineNo, out.goodLen, rec.Prev, prev)
		}
		out.hashes = append(out.hashes, chain(line))
		out.releases = append(out.releases, rel)
		out.last = rec
		out.goodLen += int64(len(line))
	}
}
