// Package noiseledger is the relay's own privacy ledger for secure
// summation (docs/threat-model.md, "If a server deviates"): one durable,
// hash-chained line per round the relay noised, composed with the same
// accountant as the aggregator's ledger (shared/privacy's Session, its
// Tightest row) on the same releases (roundspec.Spec.Release of the
// round's announced parameters), and a refusal past the relay's own
// target. The relay's noise is what the aggregator's ledger charges for
// (docs/secagg.md, "Accounting"), so the relay, not the aggregator,
// decides whether that noise is released: an aggregator that ignores its
// own ledger gets no noised share past the relay's target.
//
// Each line carries the hash of the ledger before it ("prev"), so a head
// (count, hash of the last line) names the whole file. The package also
// keeps the aggregator's ledger head as the relay last received it
// (Peer, RecordPeer; file peer-anchor beside the ledger), refusing one
// that goes backwards, and a suspension (Suspend) during which every
// charge is refused: the relay suspends itself at start until the
// aggregator confirms the relay's head (relay/internal/server, anchor.go).
package noiseledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/shared/durable"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// File names in the relay's state directory.
const (
	File     = "noise-ledger.jsonl"
	PeerFile = "peer-anchor"
)

// Errors. Test with errors.Is.
var (
	ErrBudget    = errors.New("noiseledger: the round would take the relay's composed epsilon past its target")
	ErrSchedule  = errors.New("noiseledger: the round does not follow the last noised round")
	ErrCorrupt   = errors.New("noiseledger: corrupt ledger file")
	ErrRollback  = errors.New("noiseledger: the ledger is behind or diverges from a recorded head")
	ErrSuspended = errors.New("noiseledger: charges suspended")
	ErrBroken    = errors.New("noiseledger: broken by an earlier write failure")
)

// Options configure a Ledger.
type Options struct {
	// TargetEpsilon and TargetDelta: the composition of every noised
	// round, at TargetDelta, never exceeds TargetEpsilon. They come from
	// the relay's own flags (-target-epsilon, -target-delta), never from
	// the aggregator.
	TargetEpsilon, TargetDelta float64
	Logger                     *slog.Logger
}

type line struct {
	V       int             `json:"v"`
	Time    time.Time       `json:"time"`
	Round   int             `json:"round"`
	Release json.RawMessage `json:"release"`
	Eps     float64         `json:"eps"`
	Method  string          `json:"method"`
	Prev    string          `json:"prev"`
}

// Ledger is the relay's noise ledger. Safe for concurrent use.
type Ledger struct {
	opts    Options
	log     *slog.Logger
	path    string
	dir     string
	mu      sync.Mutex
	f       *os.File
	rels    []privacy.Release
	hashes  [][32]byte
	sess    *privacy.Session
	eps     float64
	method  string
	peer    wire.Head
	suspend error
	broken  error
}

// Open opens (creating) the noise ledger in dir and replays it: every
// line must chain to the one before (else ErrCorrupt); a torn last line
// (no newline: its charge never returned) is discarded.
func Open(dir string, opts Options) (*Ledger, error) {
	if !(opts.TargetEpsilon > 0) || math.IsInf(opts.TargetEpsilon, 0) || !(opts.TargetDelta > 0 && opts.TargetDelta < 1) {
		return nil, fmt.Errorf("noiseledger: target (%v, %v) must be a positive finite epsilon and a delta in (0, 1)", opts.TargetEpsilon, opts.TargetDelta)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := privacy.NewSession(opts.TargetDelta)
	if err != nil {
		return nil, fmt.Errorf("noiseledger: %w", err)
	}
	l := &Ledger{opts: opts, log: log, dir: dir, path: filepath.Join(dir, File), sess: s}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("noiseledger: %w", err)
	}
	l.f = f
	if err := l.replay(); err != nil {
		f.Close()
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, PeerFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("noiseledger: %w", err)
	default:
		a, err := wire.ParseAnchor(b)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, PeerFile, err)
		}
		l.peer = a.Own
	}
	log.Info("noise ledger opened", "rounds", len(l.rels), "eps", l.eps, "target", opts.TargetEpsilon, "peer_count", l.peer.Count)
	return l, nil
}

func (l *Ledger) replay() error {
	data, err := io.ReadAll(l.f)
	if err != nil {
		return fmt.Errorf("noiseledger: %w", err)
	}
	good := 0
	var prev [32]byte
	for rest := data; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.log.Warn("noise ledger: discarding a torn last line (its charge never returned)", "bytes", len(rest))
			if err := l.f.Truncate(int64(good)); err != nil {
				return fmt.Errorf("noiseledger: %w", err)
			}
			break
		}
		raw := rest[:i+1]
		rest = rest[i+1:]
		var ln line
		var rel privacy.Release
		if err := json.Unmarshal(raw, &ln); err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrCorrupt, len(l.rels)+1, err)
		}
		if err := json.Unmarshal(ln.Release, &rel); err != nil || rel.Round != ln.Round {
			return fmt.Errorf("%w: line %d: release", ErrCorrupt, len(l.rels)+1)
		}
		if ln.Prev != hex.EncodeToString(prev[:]) {
			return fmt.Errorf("%w: line %d does not chain to the line before", ErrCorrupt, len(l.rels)+1)
		}
		prev = sha256.Sum256(raw)
		l.rels = append(l.rels, rel)
		l.hashes = append(l.hashes, prev)
		good += len(raw)
	}
	if len(l.rels) > 0 {
		s, rep, err := l.sess.WithAll(l.rels)
		if err != nil || rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
			return fmt.Errorf("%w: replay does not compose: %v", ErrCorrupt, err)
		}
		l.sess, l.eps, l.method = s, rep.Rows[rep.Tightest].Epsilon, rep.Rows[rep.Tightest].Method
	}
	return nil
}

// next returns the session and epsilon after rel, or the refusal. Caller
// holds mu.
func (l *Ledger) next(rel privacy.Release) (*privacy.Session, float64, string, error) {
	if l.broken != nil {
		return nil, 0, "", fmt.Errorf("%w: %w", ErrBroken, l.broken)
	}
	if l.suspend != nil {
		return nil, 0, "", fmt.Errorf("%w: %w", ErrSuspended, l.suspend)
	}
	if n := len(l.rels); n > 0 && rel.Round <= l.rels[n-1].Round {
		return nil, 0, "", fmt.Errorf("%w: round %d, last noised %d", ErrSchedule, rel.Round, l.rels[n-1].Round)
	}
	s, rep, err := l.sess.With(rel)
	if err != nil {
		return nil, 0, "", fmt.Errorf("noiseledger: round %d: %w", rel.Round, err)
	}
	if rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
		return nil, math.Inf(1), "", fmt.Errorf("%w: round %d: no proven method certifies it", ErrBudget, rel.Round)
	}
	row := rep.Rows[rep.Tightest]
	eps := max(row.Epsilon, l.eps)
	if !(eps <= l.opts.TargetEpsilon) {
		return nil, eps, row.Method, fmt.Errorf("%w: round %d would bring epsilon to %g, target %g", ErrBudget, rel.Round, eps, l.opts.TargetEpsilon)
	}
	return s, eps, row.Method, nil
}

// CanCharge reports the error Charge would return for rel (nil: it fits),
// without writing: the relay asks it before it prepares a round.
func (l *Ledger) CanCharge(rel privacy.Release) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.charged(rel) {
		return nil
	}
	_, _, _, err := l.next(rel)
	return err
}

// charged reports whether rel is exactly the last noised release (a
// resumed round after a restart). Caller holds mu.
func (l *Ledger) charged(rel privacy.Release) bool {
	n := len(l.rels)
	return n > 0 && reflect.DeepEqual(l.rels[n-1], rel)
}

// Charge records that the relay noises the round of rel, if its target
// allows: rel must follow the last noised round and the composition of
// every noised release with rel, at TargetDelta by the Session's Tightest
// (valid, proven) row, must be at most TargetEpsilon; the line is fsynced
// before Charge returns nil, and only then may the noised share leave.
// Charging exactly the last charged release again returns nil without a
// second line (a round resumed after a restart releases one share: the
// first never left, as the share is persisted before it is sent).
//
// Guarantee: if every noised share is charged first, the relay's noise
// over all rounds is (TargetEpsilon, TargetDelta)-DP for the replace-one
// relation the aggregator's ledger uses (docs/secagg.md, "Accounting";
// privacy.Account), whatever the aggregator charges or announces.
func (l *Ledger) Charge(rel privacy.Release) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.charged(rel) {
		return nil
	}
	s, eps, method, err := l.next(rel)
	if err != nil {
		l.log.Warn("noise ledger: refused", "round", rel.Round, "err", err)
		return err
	}
	raw, err := json.Marshal(rel)
	if err != nil {
		return fmt.Errorf("noiseledger: %w", err)
	}
	var prev [32]byte
	if n := len(l.hashes); n > 0 {
		prev = l.hashes[n-1]
	}
	b, err := json.Marshal(line{V: 1, Time: time.Now().UTC(), Round: rel.Round, Release: raw, Eps: eps, Method: method, Prev: hex.EncodeToString(prev[:])})
	if err != nil {
		return fmt.Errorf("noiseledger: %w", err)
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err == nil {
		err = l.f.Sync()
	} else {
		l.broken = err
	}
	if err != nil {
		l.broken = err
		return fmt.Errorf("%w: %w", ErrBroken, err)
	}
	l.rels = append(l.rels, rel)
	l.hashes = append(l.hashes, sha256.Sum256(b))
	l.sess, l.eps, l.method = s, eps, method
	l.log.Info("noise ledger: charged", "round", rel.Round, "eps", eps, "method", method, "target", l.opts.TargetEpsilon)
	return nil
}

// Head returns the ledger's head: its line count and the hash of its last
// line (zero when empty).
func (l *Ledger) Head() wire.Head {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head()
}

func (l *Ledger) head() wire.Head {
	if len(l.hashes) == 0 {
		return wire.Head{}
	}
	return wire.Head{Count: uint64(len(l.hashes)), Hash: l.hashes[len(l.hashes)-1]}
}

// Verify checks that the ledger holds the head h recorded earlier (by the
// aggregator): at least h.Count lines, the h.Count-th hashing to h.Hash.
// A shorter or rewritten ledger is ErrRollback.
func (l *Ledger) Verify(h wire.Head) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.Count > uint64(len(l.hashes)) {
		return fmt.Errorf("%w: the aggregator holds %d lines, the file has %d", ErrRollback, h.Count, len(l.hashes))
	}
	var got [32]byte
	if h.Count > 0 {
		got = l.hashes[h.Count-1]
	}
	if got != h.Hash {
		return fmt.Errorf("%w: line %d differs from the head the aggregator holds", ErrRollback, h.Count)
	}
	return nil
}

// Spent returns the composed epsilon of every noised round (0 if none).
func (l *Ledger) Spent() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.eps
}

// Target returns the relay's budget.
func (l *Ledger) Target() (eps, delta float64) { return l.opts.TargetEpsilon, l.opts.TargetDelta }

// Peer returns the aggregator's ledger head as last recorded.
func (l *Ledger) Peer() wire.Head {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peer
}

// RecordPeer durably records h as the aggregator's ledger head. A head
// behind the recorded one (fewer records, or as many with another hash)
// is refused with ErrRollback and not recorded: the aggregator's ledger
// lost records since it last reported.
func (l *Ledger) RecordPeer(h wire.Head) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case h.Count < l.peer.Count:
		return fmt.Errorf("%w: the aggregator reports %d records, it reported %d before", ErrRollback, h.Count, l.peer.Count)
	case h == l.peer:
		return nil
	case h.Count == l.peer.Count:
		return fmt.Errorf("%w: the aggregator's record %d changed", ErrRollback, h.Count)
	}
	b, err := (&wire.Anchor{Own: h}).MarshalBinary()
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(l.dir, PeerFile), b, 0o600); err != nil {
		return fmt.Errorf("noiseledger: %w", err)
	}
	l.peer = h
	return nil
}

// Suspend refuses every charge, with why, until Resume.
func (l *Ledger) Suspend(why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.suspend = why
}

// Resume ends a suspension.
func (l *Ledger) Resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.suspend = nil
}

// Suspended returns the suspension's reason, nil if none.
func (l *Ledger) Suspended() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.suspend
}

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }
