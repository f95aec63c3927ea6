package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Buckets of a ledger in its server's datastore (OpenStore). A store
// holds at most one ledger and one peer head.
const (
	// BucketRecords holds the records: key RecordKey(i) (i from 1), value
	// the record's line exactly as the file format has it, its '\n' last,
	// so the hash chain (and every head taken of a file) is unchanged.
	BucketRecords = "ledger/records"
	// BucketPeer holds the other server's head (key PeerKey), as the
	// peer file's JSON.
	BucketPeer = "ledger/peer"
	// BucketImported records each former file imported (key: its name;
	// value: JSON with the records and head it held).
	BucketImported = "ledger/imported"
	// PeerKey is the peer head's key in BucketPeer.
	PeerKey = "head"
)

// ImportedSuffix is appended to the name of a former file once imported
// (it is kept, mode 0400, never read again).
const ImportedSuffix = ".imported"

// RecordKey is the key of the i-th record (from 1) in BucketRecords.
func RecordKey(i uint64) string { return fmt.Sprintf("%020d", i) }

// Former names the files of a state directory in the format before the
// datastore, which OpenStore imports once ("": none).
type Former struct {
	// Ledger is the ledger file (the aggregator's ledger.jsonl, the
	// relay's NoiseFile).
	Ledger string
	// Peer is the other server's head (the aggregator's
	// relay-anchor.json, the relay's NoisePeerFile).
	Peer string
}

// OpenStore opens the ledger kept in db (the server's one datastore; the
// caller closes it after the ledger), after importing the former files
// once:
//
//   - former.Ledger, if it exists, is replayed and verified exactly as
//     Open does (its hash chain, CRCs, rounds; a torn trailing fragment
//     is not imported, as Open discards it) and any untrustworthy line is
//     an ErrCorrupt error: OpenStore fails, changing nothing, and the
//     server must not start (a ledger is never reset). Its records (the
//     same line bytes) and former.Peer's head are put in one Update, then
//     each file is made read-only and renamed NAME.imported.
//   - A crash between that Update and the renames imports nothing twice:
//     a store whose records already begin with the file's (the hash of
//     its record n is the file's head after n records; the chain makes
//     that the whole prefix) only renames the file. A store whose records
//     do not continue the file's is refused (an error naming both; both
//     are left as they are). A peer file whose head is behind the one in
//     the store, or equal to it, is not imported again.
//
// The records are then replayed from the store (the same checks as a
// file's, and each value must be exactly one line) and composed as by
// Open. Charges put one record each in one Update (durable or failing:
// see Charge and ChargeWith); Peer and RecordPeer are the store's head.
// opts.PeerFile and opts.WrapFile must be unset (fault injection is the
// datastore's: datastore.Options.FS).
func OpenStore(db *datastore.Store, opts Options, former Former) (*Ledger, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.PeerFile != "" || opts.WrapFile != nil {
		return nil, fmt.Errorf("%w: PeerFile and WrapFile are for a ledger file (Open)", ErrInvalidOptions)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := filepath.Join(db.Dir(), datastore.LogFile) + ":" + BucketRecords
	log = log.With("ledger", name)
	if err := importFormer(db, former, log); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err := db.View(func(tx *datastore.ReadTx) error { return exportRecords(tx, &buf) })
	if err != nil {
		return nil, err
	}
	rep, err := replay(&buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	peer, err := openStorePeer(db)
	if err != nil {
		return nil, err
	}
	l := newLedger(rep, name, opts, log)
	l.db, l.peer = db, peer
	if err := l.compose0(rep.last); err != nil {
		return nil, err
	}
	return l, nil
}

// OpenNoiseStore is OpenNoise in the relay's datastore: the noise ledger
// and the aggregator's head in db, the former NoiseFile and NoisePeerFile
// of dir imported once (OpenStore). Its guarantee is OpenNoise's.
func OpenNoiseStore(db *datastore.Store, dir string, opts Options) (*Ledger, error) {
	opts, err := noiseOptions(opts)
	if err != nil {
		return nil, err
	}
	return OpenStore(db, opts, Former{Ledger: filepath.Join(dir, NoiseFile), Peer: filepath.Join(dir, NoisePeerFile)})
}

// commitStore is commit in the store: the record (unless line is nil)
// and also's writes in one Update. Caller holds l.mu.
func (l *Ledger) commitStore(round int, line []byte, also func(tx *datastore.Tx) error) error {
	n := uint64(len(l.hashes))
	err := l.db.Update(func(tx *datastore.Tx) error {
		if line != nil {
			key := RecordKey(n + 1)
			if _, ok := tx.Get(BucketRecords, key); ok {
				return fmt.Errorf("ledger: record %d is already in the store: another ledger writes to it", n+1)
			}
			tx.Put(BucketRecords, key, line)
		}
		if also != nil {
			return also(tx)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, datastore.ErrNotDurable) {
		l.broken = fmt.Errorf("storing round %d: %w", round, err)
		l.log.Error("ledger: charge not durable; the round is not charged and the ledger is broken until reopened", "round", round, "err", l.broken)
		return fmt.Errorf("%w: %w", ErrBroken, l.broken)
	}
	return fmt.Errorf("ledger: round %d not charged: %w", round, err)
}

// exportRecords writes the records in r in order, checking that the keys
// are RecordKey(1), RecordKey(2), ... and that each value is one line.
func exportRecords(r datastore.Reader, w io.Writer) error {
	for i, k := range r.Keys(BucketRecords) {
		if k != RecordKey(uint64(i+1)) {
			return fmt.Errorf("%w: the store's record keys skip from %d to %q", ErrCorrupt, i, k)
		}
		v, _ := r.Get(BucketRecords, k)
		if len(v) == 0 || v[len(v)-1] != '\n' || bytes.IndexByte(v, '\n') != len(v)-1 {
			return fmt.Errorf("%w: the store's record %d is not one line", ErrCorrupt, i+1)
		}
		if _, err := w.Write(v); err != nil {
			return fmt.Errorf("ledger: exporting: %w", err)
		}
	}
	return nil
}

// WriteTo writes the ledger in the file format (the records' lines in
// order): for a ledger in a store, exactly the bytes of the file it was
// imported from followed by the lines charged since, so an auditor gets a
// file that Open reads with the same head. It implements io.WriterTo.
func (l *Ledger) WriteTo(w io.Writer) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	cw := &countWriter{w: w}
	if l.db == nil {
		f, err := os.Open(l.path)
		if err != nil {
			return 0, fmt.Errorf("ledger: %w", err)
		}
		defer f.Close()
		_, err = io.Copy(cw, f)
		return cw.n, err
	}
	err := l.db.View(func(tx *datastore.ReadTx) error { return exportRecords(tx, cw) })
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ExportDir writes the ledger held in the datastore of dir in the file
// format, and returns the peer head held there, reading the store's log
// read-only (datastore.Scan): it is safe on the directory of a running
// server (it sees the transactions committed when it reads) and changes
// nothing. The export is checked as OpenStore checks the records.
func ExportDir(dir string, w io.Writer) (peer wire.Head, err error) {
	state := map[string]map[string][]byte{BucketRecords: {}, BucketPeer: {}}
	_, err = datastore.Scan(dir, 0, func(ops []datastore.Op) error {
		for _, o := range ops {
			b, ok := state[o.Bucket]
			if !ok {
				continue
			}
			switch o.Kind {
			case "put":
				b[o.Key] = bytes.Clone(o.Value)
			case "delete":
				delete(b, o.Key)
			case "delete-bucket":
				clear(b)
			}
		}
		return nil
	})
	if err != nil {
		return wire.Head{}, err
	}
	peer, err = ExportState(state, w)
	if err != nil {
		return wire.Head{}, fmt.Errorf("%s: %w", dir, err)
	}
	return peer, nil
}

// ExportBuckets are the datastore buckets ExportState reads.
var ExportBuckets = []string{BucketRecords, BucketPeer}

// ExportState is ExportDir on buckets already read (bucket, key, value;
// at least ExportBuckets), as a PostgreSQL store's read-only snapshot
// gives them (pgstore.ReadBuckets): the ledger in the file format on w,
// checked as OpenStore checks the records, and the peer head.
func ExportState(state map[string]map[string][]byte, w io.Writer) (peer wire.Head, err error) {
	var buf bytes.Buffer
	if err := exportRecords(mapReader(state), &buf); err != nil {
		return wire.Head{}, err
	}
	if _, err := replay(bytes.NewReader(buf.Bytes())); err != nil {
		return wire.Head{}, err
	}
	if b, ok := state[BucketPeer][PeerKey]; ok {
		if peer, err = parsePeer(b); err != nil {
			return wire.Head{}, fmt.Errorf("%w: peer head: %w", ErrCorrupt, err)
		}
	}
	_, err = buf.WriteTo(w)
	return peer, err
}

// mapReader is a datastore.Reader over buckets in memory (ExportDir).
type mapReader map[string]map[string][]byte

func (m mapReader) Get(bucket, key string) ([]byte, bool) {
	v, ok := m[bucket][key]
	return v, ok
}

func (m mapReader) Keys(bucket string) []string {
	keys := make([]string, 0, len(m[bucket]))
	for k := range m[bucket] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// importedRecord is BucketImported's value.
type importedRecord struct {
	Records uint64 `json:"records"`
	Head    string `json:"head"`
}

// importFormer imports former's files into db once (see OpenStore).
func importFormer(db *datastore.Store, former Former, log *slog.Logger) error {
	var (
		lines    [][]byte
		last     Hash
		haveFile bool
		peer     wire.Head
		havePeer bool
	)
	if former.Ledger != "" {
		f, err := os.Open(former.Ledger)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("ledger: importing %s: %w", former.Ledger, err)
		default:
			defer f.Close()
			// A server of the former version still running on the file
			// holds its lock.
			if err := lockFile(f); err != nil {
				return fmt.Errorf("ledger: importing %s: %w", former.Ledger, err)
			}
			data, err := io.ReadAll(f)
			if err != nil {
				return fmt.Errorf("ledger: importing %s: %w", former.Ledger, err)
			}
			rep, err := replay(bytes.NewReader(data))
			if err != nil {
				return fmt.Errorf("ledger: refusing to import %s (left as it is; the ledger is never reset): %w", former.Ledger, err)
			}
			if len(rep.tail) > 0 {
				log.Warn("ledger: not importing the torn trailing record of the former file (its charge never completed, so its round was not released)",
					"file", former.Ledger, "offset", rep.goodLen, "bytes", len(rep.tail))
			}
			lines = bytes.SplitAfter(data[:rep.goodLen], []byte("\n"))
			lines = lines[:len(lines)-1] // the empty piece after the last '\n'
			if n := len(rep.hashes); n > 0 {
				last = rep.hashes[n-1]
			}
			haveFile = true
		}
	}
	if former.Peer != "" {
		b, err := os.ReadFile(former.Peer)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("ledger: importing %s: %w", former.Peer, err)
		default:
			if peer, err = parsePeer(b); err != nil {
				return fmt.Errorf("%w: refusing to import the peer head %s: %w", ErrCorrupt, former.Peer, err)
			}
			havePeer = true
		}
	}
	if !haveFile && !havePeer {
		return nil
	}
	var imported, already bool
	err := db.Update(func(tx *datastore.Tx) error {
		if haveFile {
			n := uint64(len(lines))
			keys := tx.Keys(BucketRecords)
			switch m := uint64(len(keys)); {
			case m == 0:
				for i, line := range lines {
					tx.Put(BucketRecords, RecordKey(uint64(i+1)), line)
				}
				b, _ := json.Marshal(importedRecord{Records: n, Head: last.String()})
				tx.Put(BucketImported, filepath.Base(former.Ledger), b)
				imported = n > 0
			case n == 0:
				// An empty former file: nothing to import.
			case m >= n:
				v, _ := tx.Get(BucketRecords, RecordKey(n))
				if Hash(sha256.Sum256(v)) != last {
					return fmt.Errorf("%w: the store's ledger (%d records) does not begin with the %d records of %s: refusing to start (neither is changed)", ErrRollback, m, n, former.Ledger)
				}
				already = true
			default:
				return fmt.Errorf("%w: the store's ledger holds %d records, %s holds %d: refusing to start (neither is changed)", ErrRollback, m, former.Ledger, n)
			}
		}
		if havePeer {
			var cur wire.Head
			if b, ok := tx.Get(BucketPeer, PeerKey); ok {
				h, err := parsePeer(b)
				if err != nil {
					return fmt.Errorf("%w: the store's peer head: %w", ErrCorrupt, err)
				}
				cur = h
				if peer.Count < cur.Count || peer == cur {
					return nil // imported before (and maybe advanced since)
				}
				if peer.Count == cur.Count {
					return fmt.Errorf("%w: %s and the store's peer head differ at record %d", ErrRollback, former.Peer, cur.Count)
				}
			}
			if cur.Count > 0 {
				return fmt.Errorf("%w: %s records %d records, the store's peer head %d", ErrRollback, former.Peer, peer.Count, cur.Count)
			}
			b, err := json.Marshal(peerFile{Count: peer.Count, Hash: Hash(peer.Hash).String()})
			if err != nil {
				return err
			}
			tx.Put(BucketPeer, PeerKey, b)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: importing the former files: %w", err)
	}
	for _, path := range []string{former.Ledger, former.Peer} {
		if path == "" {
			continue
		}
		if err := keepImported(path); err != nil {
			return err
		}
	}
	if err := syncDir(filepath.Dir(firstNonEmpty(former.Ledger, former.Peer))); err != nil {
		return err
	}
	log.Info("ledger: imported the former files into the datastore", "file", former.Ledger, "records", len(lines),
		"head", last.String(), "already_in_store", already, "imported", imported, "peer", former.Peer, "peer_count", peer.Count)
	return nil
}

// keepImported makes path read-only and renames it path+ImportedSuffix
// (a missing path is not an error).
func keepImported(path string) error {
	if err := os.Chmod(path, 0o400); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("ledger: keeping the imported %s: %w", path, err)
	}
	if err := os.Rename(path, path+ImportedSuffix); err != nil {
		return fmt.Errorf("ledger: keeping the imported %s: %w", path, err)
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// noiseOptions are OpenNoise's options (without the peer file).
func noiseOptions(opts Options) (Options, error) {
	if opts.Session == nil && opts.Composer == nil {
		if err := opts.validate(); err != nil && !errors.Is(err, errNoComposer) {
			return opts, err
		}
		s, err := privacy.NewSession(opts.TargetDelta)
		if err != nil {
			return opts, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		opts.Session = s
	}
	opts.RepeatLast = true
	return opts, nil
}
