// Package outbox persists the frames the relay owes the aggregator (padded
// batches, aborts) and the markers of open rounds, so that a retry or a
// restarted relay resends the identical bytes instead of padding a round
// twice.
//
// Every write is crash-safe: the bytes go to a temporary file in the same
// directory, which is fsynced, renamed over the final name and followed by
// an fsync of the directory. A reader therefore sees either no file or the
// complete one.
package outbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Kind names what a stored file holds.
type Kind string

const (
	// Batch is a marshaled wire.Batch frame, owed to POST /v1/batch.
	Batch Kind = "batch"
	// Abort is a marshaled wire.Abort frame, owed to POST /v1/abort.
	Abort Kind = "abort"
	// OpenRound marks a round the relay opened and has not finished; after a
	// restart it becomes an Abort (reason: relay restart).
	OpenRound Kind = "open"
	// SecAggClose is a secure-summation round the relay finished
	// forwarding: its SecAggClose frame and the helper's running aggregate
	// (JSON), persisted before the close is sent, so that a restart can
	// still release the round the aggregator charges. Not delivered by
	// the Sender (relay/internal/server/secagg.go resumes it).
	SecAggClose Kind = "secagg-close"
	// SecAggAggregate is the helper's noised SecAggAggregate frame,
	// persisted before its first send: a restart resends the identical
	// bytes (never a second noise). Not delivered by the Sender.
	SecAggAggregate Kind = "secagg-aggregate"
)

func (k Kind) valid() bool {
	return k == Batch || k == Abort || k == OpenRound || k == SecAggClose || k == SecAggAggregate
}

// Name is the name of (round, kind)'s record: the 20-digit round, a dot,
// the kind (a file of Outbox, a key of another Store); names sort by round,
// then kind.
func Name(round uint64, kind Kind) string { return fmt.Sprintf("%020d.%s", round, kind) }

// ParseName returns the entry a Name names (false: none).
func ParseName(name string) (Entry, bool) {
	num, kind, ok := strings.Cut(name, ".")
	if !ok || !Kind(kind).valid() || len(num) != 20 {
		return Entry{}, false
	}
	r, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return Entry{}, false
	}
	return Entry{Round: r, Kind: Kind(kind)}, true
}

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool { return k.valid() }

// Entry identifies one stored file.
type Entry struct {
	Round uint64
	Kind  Kind
}

// Outbox is a directory of stored frames. Its methods are safe for
// concurrent use on distinct entries; writes to the same entry race only
// in which complete version wins.
type Outbox struct {
	dir string
}

const tmpSuffix = ".tmp"

// Open creates dir (mode 0700) if needed and removes temporary files left
// by an interrupted write.
func Open(dir string) (*Outbox, error) {
	if dir == "" {
		return nil, errors.New("outbox: empty state directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("outbox: removing stale temporary file: %w", err)
			}
		}
	}
	return &Outbox{dir: dir}, nil
}

// Dir returns the directory.
func (o *Outbox) Dir() string { return o.dir }

func (o *Outbox) name(round uint64, kind Kind) string {
	return filepath.Join(o.dir, Name(round, kind))
}

// Put stores data as (round, kind) durably: when Put returns nil the bytes
// survive a crash.
func (o *Outbox) Put(round uint64, kind Kind, data []byte) error {
	if !kind.valid() {
		return fmt.Errorf("outbox: unknown kind %q", kind)
	}
	f, err := os.CreateTemp(o.dir, fmt.Sprintf("%020d.%s.*%s", round, kind, tmpSuffix))
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("outbox: writing round %d %s: %w", round, kind, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("outbox: writing round %d %s: %w", round, kind, err)
	}
	if err := os.Rename(tmp, o.name(round, kind)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("outbox: %w", err)
	}
	return o.syncDir()
}

func (o *Outbox) syncDir() error {
	d, err := os.Open(o.dir)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("outbox: syncing directory: %w", err)
	}
	return nil
}

// Get returns the stored bytes; the error wraps fs.ErrNotExist when there
// are none.
func (o *Outbox) Get(round uint64, kind Kind) ([]byte, error) {
	b, err := os.ReadFile(o.name(round, kind))
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return b, nil
}

// Has reports whether (round, kind) is stored.
func (o *Outbox) Has(round uint64, kind Kind) bool {
	_, err := os.Stat(o.name(round, kind))
	return err == nil
}

// Remove deletes (round, kind); removing a missing entry is not an error.
func (o *Outbox) Remove(round uint64, kind Kind) error {
	if err := os.Remove(o.name(round, kind)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("outbox: %w", err)
	}
	return o.syncDir()
}

// List returns the stored entries ordered by round, then kind. Files that
// do not follow the naming scheme are ignored.
func (o *Outbox) List() ([]Entry, error) {
	ents, err := os.ReadDir(o.dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var out []Entry
	for _, e := range ents {
		if en, ok := ParseName(e.Name()); ok {
			out = append(out, en)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Round != b.Round {
			if a.Round < b.Round {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return out, nil
}
