package datastore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The log file (LogFile) is a header followed by frames:
//
//	header: "BLKDS" 0x00 0x00 0x01                  (8 bytes)
//	frame:  length uint32 BE | crc uint32 BE | payload (length bytes)
//
// crc is CRC-32C (Castagnoli) of payload. A payload is one transaction:
// a sequence of operations
//
//	0x01 put          uvarint len | bucket | uvarint len | key | uvarint len | value
//	0x02 delete       uvarint len | bucket | uvarint len | key
//	0x03 deleteBucket uvarint len | bucket
//
// applied in order, all or none. Recovery reads frames from the start and
// stops at the first one that is short, too long or fails its CRC (a torn
// tail): the file is truncated there. Every acknowledged transaction was
// fsynced before its Update returned and frames are only appended, so all
// of them precede the first bad byte.
var header = [8]byte{'B', 'L', 'K', 'D', 'S', 0, 0, 1}

const (
	opPut          = 0x01
	opDelete       = 0x02
	opDeleteBucket = 0x03

	frameHeader = 8
	// maxFrame bounds one transaction's encoded size (a corrupt length
	// never makes recovery allocate more).
	maxFrame = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// op is one operation of a transaction.
type op struct {
	kind   byte
	bucket string
	key    string
	value  []byte
}

// appendFrame appends the frame of ops to dst.
func appendFrame(dst []byte, ops []op) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	for _, o := range ops {
		dst = append(dst, o.kind)
		dst = binary.AppendUvarint(dst, uint64(len(o.bucket)))
		dst = append(dst, o.bucket...)
		if o.kind == opDeleteBucket {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(o.key)))
		dst = append(dst, o.key...)
		if o.kind == opPut {
			dst = binary.AppendUvarint(dst, uint64(len(o.value)))
			dst = append(dst, o.value...)
		}
	}
	n := len(dst) - start - frameHeader
	if n > maxFrame {
		return dst[:start], fmt.Errorf("datastore: a transaction of %d bytes exceeds %d", n, maxFrame)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+frameHeader:], castagnoli))
	return dst, nil
}

var errTorn = errors.New("torn or corrupt frame")

// readFrame decodes the frame at the start of b: its operations and its
// total length. errTorn means b does not start with a whole, intact frame.
func readFrame(b []byte) ([]op, int, error) {
	if len(b) < frameHeader {
		return nil, 0, errTorn
	}
	n := binary.BigEndian.Uint32(b)
	if n > maxFrame || uint64(len(b)-frameHeader) < uint64(n) {
		return nil, 0, errTorn
	}
	payload := b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return nil, 0, errTorn
	}
	ops, err := decodeOps(payload)
	if err != nil {
		return nil, 0, err
	}
	return ops, frameHeader + int(n), nil
}

// decodeOps parses a transaction's payload. A payload whose CRC holds but
// does not parse was not written by this package: an error, not a torn
// tail.
func decodeOps(p []byte) ([]op, error) {
	var ops []op
	str := func() (string, error) {
		l, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < l {
			return "", errors.New("datastore: malformed transaction")
		}
		s := string(p[k : k+int(l)])
		p = p[k+int(l):]
		return s, nil
	}
	for len(p) > 0 {
		o := op{kind: p[0]}
		p = p[1:]
		var err error
		if o.bucket, err = str(); err != nil {
			return nil, err
		}
		switch o.kind {
		case opDeleteBucket:
		case opDelete, opPut:
			if o.key, err = str(); err != nil {
				return nil, err
			}
			if o.kind == opPut {
				var v string
				if v, err = str(); err != nil {
					return nil, err
				}
				o.value = []byte(v)
			}
		default:
			return nil, fmt.Errorf("datastore: unknown operation 0x%02x", o.kind)
		}
		ops = append(ops, o)
	}
	return ops, nil
}

// Op is one operation of a committed transaction, as Scan reports it.
type Op struct {
	// Kind is "put", "delete" or "delete-bucket".
	Kind   string
	Bucket string
	Key    string
	Value  []byte
}

// Scan reads the log in dir read-only, from byte offset from (0 or the
// offset a previous Scan of the same file returned), calls fn with each
// whole transaction in order, and returns the offset after the last one.
// It never changes the file: a torn tail is left for Open to truncate, and
// a transaction still being written is reported by a later Scan. For
// inspection and for tests that watch a running server's progress; a
// file replaced by a compaction (os.SameFile reports it) is rescanned
// from 0.
func Scan(dir string, from int64, fn func(ops []Op) error) (int64, error) {
	f, err := os.Open(filepath.Join(dir, LogFile))
	if err != nil {
		if loc, lerr := os.ReadFile(filepath.Join(dir, LocationFile)); lerr == nil {
			return from, fmt.Errorf("datastore: %s's store is not an embedded log but %q (%s): Scan reads the embedded log only", dir, strings.TrimSpace(string(loc)), LocationFile)
		}
		return from, fmt.Errorf("datastore: %w", err)
	}
	defer f.Close()
	var h [8]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || h != header {
		return from, nil
	}
	from = max(from, int64(len(header)))
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return from, fmt.Errorf("datastore: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return from, fmt.Errorf("datastore: %w", err)
	}
	off := 0
	for off < len(b) {
		ops, n, err := readFrame(b[off:])
		if err != nil {
			break
		}
		out := make([]Op, len(ops))
		for i, o := range ops {
			out[i] = Op{Kind: map[byte]string{opPut: "put", opDelete: "delete", opDeleteBucket: "delete-bucket"}[o.kind],
				Bucket: o.bucket, Key: o.key, Value: o.value}
		}
		if err := fn(out); err != nil {
			return from + int64(off), err
		}
		off += n
	}
	return from + int64(off), nil
}
