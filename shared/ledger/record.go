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
// package: 2 adds "prev", the hash chain, to the aggregator's version 1.
// Both version 1 formats (the aggregator's, unchained, and the relay's
// noise ledger's, chained) are still read, but only before the first
// version 2 line (lineFormat).
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

// record is one line of the ledger file as this package writes it
// (version 2).
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

// anyRecord is every field a line of any format this package reads may
// carry; which are present tells the format (lineFormat).
type anyRecord struct {
	V       int             `json:"v"`
	Time    time.Time       `json:"time"`
	Round   *int            `json:"round"`
	Release json.RawMessage `json:"release"`
	CRC     *uint32         `json:"crc32c"`
	Eps     float64         `json:"eps"`
	Delta   *float64        `json:"delta"`
	Method  string          `json:"method"`
	Prev    *string         `json:"prev"`
}

// lineFormat is the format of a line, in the order formats may follow
// each other in one file (a line never has an earlier format than the
// line before it).
type lineFormat int

const (
	// formatV1: the aggregator's lines before the hash chain ("v":1,
	// crc32c and delta, no prev). Not chained: read only as a prefix.
	formatV1 lineFormat = iota
	// formatNoiseV1: the relay's noise-ledger lines before the two
	// ledgers were merged ("v":1 with round and prev, no crc32c, no
	// delta). Chained exactly as version 2.
	formatNoiseV1
	// formatV2: what this package writes.
	formatV2
)

func (f lineFormat) String() string {
	switch f {
	case formatV1:
		return "version 1"
	case formatNoiseV1:
		return "noise-ledger version 1"
	}
	return fmt.Sprintf("version %d", recordVersion)
}

// format classifies a decoded line by its version and the fields present.
func (r *anyRecord) format() (lineFormat, error) {
	switch {
	case r.V == recordVersion && r.Round == nil && r.CRC != nil && r.Delta != nil && r.Prev != nil:
		return formatV2, nil
	case r.V == 1 && r.Round == nil && r.CRC != nil && r.Delta != nil && r.Prev == nil:
		return formatV1, nil
	case r.V == 1 && r.Round != nil && r.CRC == nil && r.Delta == nil && r.Prev != nil:
		return formatNoiseV1, nil
	case r.V != 1 && r.V != recordVersion:
		return 0, fmt.Errorf("unsupported record version %d (this binary reads 1 and %d)", r.V, recordVersion)
	}
	return 0, fmt.Errorf("record version %d with fields of no known format (round %v, crc32c %v, delta %v, prev %v)",
		r.V, r.Round != nil, r.CRC != nil, r.Delta != nil, r.Prev != nil)
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

// decoded is a trusted line: its format, release and what it recorded.
type decoded struct {
	format lineFormat
	rel    privacy.Release
	prev   string // the chain hash it names (chained formats)
	eps    float64
	delta  float64 // 0 where the format does not record it
	method string
}

// decodeRecord parses one complete line (without its '\n') and checks it
// can be trusted: a known format with no unknown field, a matching CRC
// where the format has one, a valid release (and, in the noise-ledger
// format, one whose round is the line's).
func decodeRecord(line []byte) (decoded, error) {
	var rec anyRecord
	if len(bytes.TrimSpace(line)) == 0 {
		return decoded{}, errors.New("blank line")
	}
	if err := decodeStrict(line, &rec); err != nil {
		return decoded{}, fmt.Errorf("bad record: %w", err)
	}
	f, err := rec.format()
	if err != nil {
		return decoded{}, err
	}
	if rec.Release == nil {
		return decoded{}, errors.New("record has no release")
	}
	if rec.CRC != nil {
		if got := crc32.Checksum(rec.Release, castagnoli); got != *rec.CRC {
			return decoded{}, fmt.Errorf("crc32c mismatch: stored %d, computed %d", *rec.CRC, got)
		}
	}
	var rel privacy.Release
	if err := decodeStrict(rec.Release, &rel); err != nil {
		return decoded{}, fmt.Errorf("bad release: %w", err)
	}
	if err := rel.Validate(); err != nil {
		return decoded{}, err
	}
	if rec.Round != nil && *rec.Round != rel.Round {
		return decoded{}, fmt.Errorf("line names round %d, its release round %d", *rec.Round, rel.Round)
	}
	d := decoded{format: f, rel: rel, eps: rec.Eps, method: rec.Method}
	if rec.Prev != nil {
		d.prev = *rec.Prev
	}
	if rec.Delta != nil {
		d.delta = *rec.Delta
	}
	return d, nil
}

// replayed is what a ledger file holds.
type replayed struct {
	releases []privacy.Release
	hashes   []Hash  // hashes[i] is the chain hash after record i
	last     decoded // the last committed record (zero if none)
	goodLen  int64   // bytes up to and including the last committed '\n'
	tail     []byte  // the torn fragment after goodLen, if any
}

// replay reads a ledger file from its start. Every complete line must be a
// trustworthy record with a strictly larger round than the one before, a
// format no earlier than the line before's, and (chained formats) the
// hash of the lines before it, or replay fails with ErrCorrupt naming the
// line. Bytes after the last '\n' are returned as the torn tail, not
// interpreted.
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
		corrupt := func(format string, args ...any) error {
			return fmt.Errorf("%w: line %d (byte offset %d): %s", ErrCorrupt, lineNo, out.goodLen, fmt.Sprintf(format, args...))
		}
		d, derr := decodeRecord(line[:len(line)-1])
		if derr != nil {
			return out, fmt.Errorf("%w: line %d (byte offset %d): %w", ErrCorrupt, lineNo, out.goodLen, derr)
		}
		if n := len(out.releases); n > 0 && d.rel.Round <= out.releases[n-1].Round {
			return out, corrupt("round %d does not follow round %d", d.rel.Round, out.releases[n-1].Round)
		}
		var prev Hash
		if n := len(out.hashes); n > 0 {
			prev = out.hashes[n-1]
			if d.format < out.last.format {
				return out, corrupt("%s record after a %s record", d.format, out.last.format)
			}
		}
		if d.format != formatV1 && d.prev != prev.String() {
			return out, corrupt("hash chain broken: prev %s, the records before hash to %s", d.prev, prev)
		}
		out.hashes = append(out.hashes, chain(line))
		out.releases = append(out.releases, d.rel)
		out.last = d
		out.goodLen += int64(len(line))
	}
}
