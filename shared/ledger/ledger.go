package ledger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Errors returned by the ledger. Test with errors.Is.
var (
	// ErrInvalidOptions: Options rejected by Open.
	ErrInvalidOptions = errors.New("ledger: invalid options")
	// ErrInvalidRelease: a release Charge cannot accept (fails
	// privacy.Release.Validate, which also matches
	// privacy.ErrInvalidParameter, or its round does not follow the last
	// charged round).
	ErrInvalidRelease = errors.New("ledger: invalid release")
	// ErrBudgetExhausted: the release would take the composed epsilon past
	// the target. The error is a *BudgetError.
	ErrBudgetExhausted = errors.New("ledger: privacy budget exhausted")
	// ErrCorrupt: a committed line of the file cannot be trusted.
	ErrCorrupt = errors.New("ledger: corrupt ledger file")
	// ErrBroken: this charge's write or fsync failed, or an earlier
	// one did; reopen the ledger.
	ErrBroken = errors.New("ledger: broken by a write or fsync failure, reopen it")
	// ErrClosed: the ledger was closed.
	ErrClosed = errors.New("ledger: closed")
	// ErrLocked: another process holds the ledger file open.
	ErrLocked = errors.New("ledger: file is locked by another process")
	// ErrUnknownRound: SpentBy was given a round the ledger never charged.
	ErrUnknownRound = errors.New("ledger: unknown round")
	// ErrComposer: the Composer or the Session failed, or returned an
	// invalid epsilon (every such charge is refused: nothing that cannot
	// be certified is released). A round that no valid proven method
	// certifies at the target delta is a *BudgetError (NoProvenMethod),
	// not an ErrComposer: it is refused the same way, and the caller stays
	// up as at the end of the budget.
	ErrComposer = errors.New("ledger: composer failed")
	// ErrRollback: the ledger file is shorter than, or diverges from, a
	// head recorded earlier (Verify): records were deleted or rewritten.
	ErrRollback = errors.New("ledger: file is behind or diverges from the recorded head")
	// ErrSuspended: charges are suspended (Suspend), e.g. until the
	// ledger has been checked against the head the relay holds.
	ErrSuspended = errors.New("ledger: charges suspended")
)

// NoProvenMethod is the Method of a *BudgetError whose round no valid,
// proven accounting method certifies at the target delta (its WouldBe is
// +Inf).
const NoProvenMethod = "no proven accounting method within the target delta"

// BudgetError is the error of a refused charge. It matches
// ErrBudgetExhausted under errors.Is.
type BudgetError struct {
	Round   int     // the refused round
	WouldBe float64 // the composed epsilon had it been charged
	Method  string  // the composer's method for WouldBe
	Target  float64 // the target epsilon
	Delta   float64 // the target delta WouldBe was computed at
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("ledger: privacy budget exhausted: round %d would bring epsilon to %g (%s) at delta %g, target %g",
		e.Round, e.WouldBe, e.Method, e.Delta, e.Target)
}

// Unwrap makes errors.Is(err, ErrBudgetExhausted) hold.
func (e *BudgetError) Unwrap() error { return ErrBudgetExhausted }

// Composer returns the epsilon at which the adaptive composition of
// releases (in increasing round order, at least one) is (eps, delta)-DP, and
// the name of the method that gave it. It must be a valid upper bound: the
// ledger's guarantee is only as good as the composer's. The integrator wires
// privacy.Account's tightest valid method into it. It may be called
// concurrently (from CanCharge and SpentBy) and gets its own copy of the
// releases.
type Composer func(releases []privacy.Release, delta float64) (eps float64, method string, err error)

// File is what a charge appends to: the ledger's open file (an *os.File,
// opened for appending), or in a test a wrapper that fails on demand
// (Options.WrapFile). Every record goes through one Write of its whole
// line and then one Sync; Charge succeeds only if both do.
type File interface {
	Write(p []byte) (n int, err error)
	Sync() error
	Close() error
}

// Options configure a Ledger. TargetEpsilon, TargetDelta and a Composer
// or a Session are required.
type Options struct {
	// TargetEpsilon and TargetDelta are the budget: the composition of all
	// charged releases, computed at TargetDelta, never exceeds
	// TargetEpsilon. TargetEpsilon must be positive and finite,
	// TargetDelta in (0, 1).
	TargetEpsilon float64
	TargetDelta   float64
	// Composer composes releases; see Composer. Required unless Session
	// is set; with a Session it is not used.
	Composer Composer
	// Session, if set, is an empty privacy.Session at TargetDelta: the
	// ledger then composes incrementally (each charge composes one more
	// round onto the charged state, constant time in the number of
	// charged rounds), admits rounds by the report's Tightest row
	// (proven, valid, certified), and keeps the full report (Report).
	// Replaying a ledger on Open composes its records in one step
	// (privacy.Session.WithAll).
	Session *privacy.Session
	// Logger receives charges (Info), refusals and recoveries (Warn).
	// nil discards.
	Logger *slog.Logger
	// RepeatLast makes a charge of exactly the last charged release
	// (reflect.DeepEqual) succeed without writing a second record, and
	// CanCharge admit it: the relay's round resumed after a restart
	// releases the one share its first charge paid for (the share is
	// persisted before it leaves, so it never left twice). Off, such a
	// charge is ErrInvalidRelease (its round does not follow the last).
	RepeatLast bool
	// PeerFile, if set, is where the ledger keeps the other server's
	// ledger head (OpenPeer; Peer, RecordPeer). The relay sets it
	// (OpenNoise); the aggregator keeps its Peer apart (OpenPeer).
	PeerFile string
	// WrapFile, if set, wraps the opened file before any record is
	// appended: tests inject write and fsync failures with it. The
	// wrapper's Close must close the file it wraps (that releases the
	// lock). nil in production.
	WrapFile func(File) File
}

func (o Options) validate() error {
	if math.IsNaN(o.TargetEpsilon) || math.IsInf(o.TargetEpsilon, 0) || o.TargetEpsilon <= 0 {
		return fmt.Errorf("%w: target epsilon must be positive and finite, got %v", ErrInvalidOptions, o.TargetEpsilon)
	}
	if !(o.TargetDelta > 0 && o.TargetDelta < 1) {
		return fmt.Errorf("%w: target delta must be in (0, 1), got %v", ErrInvalidOptions, o.TargetDelta)
	}
	if o.Session != nil {
		if o.Session.Rounds() != 0 || o.Session.Delta() != o.TargetDelta {
			return fmt.Errorf("%w: the session must be empty and at the target delta %v (has %d rounds at delta %v)", ErrInvalidOptions, o.TargetDelta, o.Session.Rounds(), o.Session.Delta())
		}
		return nil
	}
	if o.Composer == nil {
		return errNoComposer
	}
	return nil
}

var errNoComposer = fmt.Errorf("%w: a composer or a session is required", ErrInvalidOptions)

// Ledger is an open privacy ledger. Its methods are safe for concurrent use.
type Ledger struct {
	opts Options
	log  *slog.Logger
	path string
	peer *Peer // Options.PeerFile, or the store's (nil: none)

	mu       sync.RWMutex
	f        File             // the file (Open), or nil
	db       *datastore.Store // the store (OpenStore), or nil
	releases []privacy.Release
	hashes   []Hash      // hashes[i]: chain hash after record i
	byRound  map[int]int // round -> index in releases
	eps      float64     // composition of releases (0 when empty)
	method   string
	session  *privacy.Session // composed state (Options.Session set)
	report   privacy.Report   // the session's report after the last charge
	tail     []byte           // torn fragment discarded by Open
	broken   error            // first write/fsync failure
	suspend  error            // Suspend's reason: every charge refused
	closed   bool
}

// Open opens the ledger file at path, creating it (and fsyncing its
// directory) if it does not exist, and replays it: every committed record
// counts, a torn trailing fragment is discarded as described in the package
// documentation (see DiscardedTail), and any untrustworthy committed line
// fails with ErrCorrupt. Opening a ledger whose replayed loss already exceeds
// the target (the target was lowered) succeeds with a warning; it then
// refuses every charge.
func Open(path string, opts Options) (*Ledger, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("ledger", path)

	var peer *Peer
	if opts.PeerFile != "" {
		p, err := OpenPeer(opts.PeerFile)
		if err != nil {
			return nil, err
		}
		peer = p
	}
	f, created, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l, err := load(f, path, opts, log)
	if err != nil {
		f.Close()
		return nil, err
	}
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
		log.Info("ledger created")
	}
	l.peer = peer
	if opts.WrapFile != nil {
		l.f = opts.WrapFile(f)
	}
	return l, nil
}

// File names of the relay's noise ledger in its state directory
// (OpenNoise).
const (
	NoiseFile     = "noise-ledger.jsonl"
	NoisePeerFile = "peer-anchor"
)

// OpenNoise opens the relay's noise ledger: NoiseFile in dir, with the
// aggregator's ledger head kept in NoisePeerFile beside it, RepeatLast
// set, and (unless opts has a Session or a Composer) an incremental
// privacy.Session at opts.TargetDelta, the accountant the aggregator's
// ledger uses (docs/secagg.md, "Accounting"). The relay charges each
// round's release (roundspec.Spec.Release of its announced parameters)
// before its noised share leaves; with every share charged first, the
// relay's noise over all rounds is (TargetEpsilon, TargetDelta)-DP for
// the replace-one relation whatever the aggregator charges or announces
// (docs/threat-model.md, "If a server deviates").
func OpenNoise(dir string, opts Options) (*Ledger, error) {
	opts, err := noiseOptions(opts)
	if err != nil {
		return nil, err
	}
	if opts.PeerFile == "" {
		opts.PeerFile = filepath.Join(dir, NoisePeerFile)
	}
	return Open(filepath.Join(dir, NoiseFile), opts)
}

// openFile opens path for reading and appending, creating it if needed, and
// locks it.
func openFile(path string) (f *os.File, created bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		created = err == nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ledger: opening %s: %w", path, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = errors.New("not a regular file")
		}
		return nil, false, fmt.Errorf("ledger: opening %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, created, nil
}

// load replays the locked file f and builds the ledger.
func load(f *os.File, path string, opts Options, log *slog.Logger) (*Ledger, error) {
	rep, err := replay(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l := newLedger(rep, path, opts, log)
	l.f = f
	if len(rep.tail) > 0 {
		// Uncommitted: its Charge never returned nil, so under
		// charge-first its round was not released (see the package doc).
		log.Warn("ledger: discarding torn trailing record (its charge never completed, so its round was not released)",
			"offset", rep.goodLen, "bytes", len(rep.tail), "fragment", string(rep.tail[:min(len(rep.tail), 1024)]))
		if err := f.Truncate(rep.goodLen); err != nil {
			return nil, fmt.Errorf("ledger: truncating torn tail of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("ledger: fsync after truncating %s: %w", path, err)
		}
		l.tail = rep.tail
	}
	if err := l.compose0(rep.last); err != nil {
		return nil, err
	}
	return l, nil
}

// newLedger returns the ledger holding the replayed records rep (its
// composition not yet computed: compose0).
func newLedger(rep replayed, path string, opts Options, log *slog.Logger) *Ledger {
	l := &Ledger{
		opts:     opts,
		log:      log,
		path:     path,
		releases: rep.releases,
		hashes:   rep.hashes,
		byRound:  make(map[int]int, len(rep.releases)),
		session:  opts.Session,
	}
	if l.session != nil {
		l.report = l.session.Report()
	}
	for i, r := range rep.releases {
		l.byRound[r.Round] = i
	}
	return l
}

// compose0 composes the replayed releases (Open, OpenStore); last is the
// last record, whose recorded composition is compared for the log.
func (l *Ledger) compose0(last decoded) error {
	opts, log, path := l.opts, l.log, l.path
	if len(l.releases) > 0 {
		var eps float64
		var method string
		if l.session != nil {
			// Replay in one step (privacy.Session.WithAll: rounds with the
			// same contribution composed by squaring).
			s, rp, err := l.session.WithAll(l.releases)
			if err != nil {
				return fmt.Errorf("ledger: replaying %s: %w: %w", path, ErrComposer, err)
			}
			if rp.Tightest < 0 || rp.Tightest >= len(rp.Rows) {
				return fmt.Errorf("ledger: replaying %s: %w: no valid proven accounting method", path, ErrComposer)
			}
			l.session, l.report = s, rp
			eps, method = rp.Rows[rp.Tightest].Epsilon, rp.Rows[rp.Tightest].Method
		} else {
			e, m, err := l.compose(l.releases)
			if err != nil {
				return fmt.Errorf("ledger: replaying %s: %w", path, err)
			}
			eps, method = e, m
		}
		l.eps, l.method = eps, method
		if rec := last; rec.eps != eps || rec.method != method || (rec.delta != 0 && rec.delta != opts.TargetDelta) {
			log.Info("ledger: recomputed composition differs from the recorded one",
				"recorded_eps", rec.eps, "recorded_delta", rec.delta, "recorded_method", rec.method,
				"eps", eps, "delta", opts.TargetDelta, "method", method)
		}
		if eps > opts.TargetEpsilon {
			log.Warn("ledger: replayed privacy loss already exceeds the target; every charge will be refused",
				"eps", eps, "target", opts.TargetEpsilon)
		}
	}
	log.Info("ledger opened", "rounds", len(l.releases), "eps", l.eps, "delta", opts.TargetDelta, "method", l.method)
	return nil
}

// compose calls the composer on a copy of releases and checks its answer.
func (l *Ledger) compose(releases []privacy.Release) (float64, string, error) {
	eps, method, err := l.opts.Composer(cloneAll(releases), l.opts.TargetDelta)
	if err != nil {
		return 0, "", fmt.Errorf("%w: composing %d releases: %w", ErrComposer, len(releases), err)
	}
	if math.IsNaN(eps) || eps < 0 {
		return 0, "", fmt.Errorf("%w: composing %d releases: method %q returned epsilon %v", ErrComposer, len(releases), method, eps)
	}
	return eps, method, nil
}

// next composes rel onto the session (Options.Session set): the epsilon
// of the report's Tightest row (valid, proven, certified: see
// privacy.Report), raised to the epsilon already charged if numerics put
// it below (the charged epsilon never decreases; a larger upper bound is
// still an upper bound). A report without a Tightest row gives +Inf
// (NoProvenMethod), which checkNext refuses as a *BudgetError. Caller
// holds l.mu.
func (l *Ledger) next(rel privacy.Release) (float64, string, *privacy.Session, privacy.Report, error) {
	s, rep, err := l.session.With(rel)
	if err != nil {
		return 0, "", nil, privacy.Report{}, fmt.Errorf("%w: round %d: %w", ErrComposer, rel.Round, err)
	}
	if rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
		// Nothing certifies the composition at the target delta (for
		// example a Gaussian randomizer's local rows, whose delta grows by
		// delta_l every round, once they pass it): the round cannot be
		// released, exactly as a round past the target epsilon. An
		// infinite epsilon makes checkNext refuse it with a *BudgetError,
		// so callers stop announcing rounds instead of failing.
		return math.Inf(1), NoProvenMethod, nil, privacy.Report{}, nil
	}
	row := rep.Rows[rep.Tightest]
	eps := row.Epsilon
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 {
		return 0, "", nil, privacy.Report{}, fmt.Errorf("%w: round %d: method %q returned epsilon %v", ErrComposer, rel.Round, row.Method, eps)
	}
	return max(eps, l.eps), row.Method, s, rep, nil
}

// check validates rel against the current state and returns the composition
// charging it would bring. Caller holds l.mu.
func (l *Ledger) check(rel privacy.Release) (float64, string, error) {
	eps, method, _, _, err := l.checkNext(rel)
	return eps, method, err
}

// checkNext is check, also returning the session and report after rel
// (nil and empty without a session).
func (l *Ledger) checkNext(rel privacy.Release) (float64, string, *privacy.Session, privacy.Report, error) {
	eps, method, s, rep, err := l.checkInner(rel)
	if err == nil && eps > l.opts.TargetEpsilon {
		err = &BudgetError{Round: rel.Round, WouldBe: eps, Method: method, Target: l.opts.TargetEpsilon, Delta: l.opts.TargetDelta}
	}
	return eps, method, s, rep, err
}

func (l *Ledger) checkInner(rel privacy.Release) (float64, string, *privacy.Session, privacy.Report, error) {
	if l.closed {
		return 0, "", nil, privacy.Report{}, ErrClosed
	}
	if l.broken != nil {
		return 0, "", nil, privacy.Report{}, fmt.Errorf("%w: %w", ErrBroken, l.broken)
	}
	if l.suspend != nil {
		return 0, "", nil, privacy.Report{}, fmt.Errorf("%w: %w", ErrSuspended, l.suspend)
	}
	if err := rel.Validate(); err != nil {
		return 0, "", nil, privacy.Report{}, fmt.Errorf("%w: %w", ErrInvalidRelease, err)
	}
	if n := len(l.releases); n > 0 && rel.Round <= l.releases[n-1].Round {
		return 0, "", nil, privacy.Report{}, fmt.Errorf("%w: round %d does not follow the last charged round %d", ErrInvalidRelease, rel.Round, l.releases[n-1].Round)
	}
	if l.session != nil {
		return l.next(rel)
	}
	all := append(l.releases[:len(l.releases):len(l.releases)], rel)
	eps, method, err := l.compose(all)
	return eps, method, nil, privacy.Report{}, err
}

// repeat reports whether rel is exactly the last charged release and
// Options.RepeatLast admits it. Caller holds l.mu.
func (l *Ledger) repeat(rel privacy.Release) bool {
	n := len(l.releases)
	return l.opts.RepeatLast && n > 0 && reflect.DeepEqual(l.releases[n-1], rel)
}

// Charge records rel as released, if the budget allows it. It validates rel
// (privacy.Release.Validate, and its round must be larger than every round
// charged before), composes it with every charged release at the target
// delta, and refuses with a *BudgetError (ErrBudgetExhausted) if the result
// exceeds the target epsilon. On any refusal or error nothing is written and
// the round must not be released. Otherwise it appends one line and fsyncs
// it (commit) before returning nil; only then may the round's result be
// released. If the write or the fsync fails, Charge returns an error
// (ErrBroken), the ledger's state is what it was before the call (the
// round is not charged, Spent and Head are unchanged) and every later
// charge fails with ErrBroken until the ledger is reopened. With
// Options.RepeatLast, exactly the last charged release again returns nil
// and writes nothing.
//
// Guarantee: if every release is charged before it is published, the
// composition of everything published is at most (TargetEpsilon,
// TargetDelta) by the Composer's (or the Session's Tightest row's) bound.
func (l *Ledger) Charge(rel privacy.Release) error { return l.ChargeWith(rel, nil) }

// Store returns the datastore holding the ledger's records (OpenStore),
// nil for a file ledger: ChargeWith's writes go to it.
func (l *Ledger) Store() *datastore.Store { return l.db }

// ChargeWith is Charge, with also's writes in the same datastore
// transaction as the record (a ledger opened by OpenStore): the record
// and every Put or Delete of also are durable together when ChargeWith
// returns nil, and none of them is if it returns an error (a failed write
// or fsync, wrapping datastore.ErrNotDurable and ErrBroken, breaks the
// ledger as in Charge; also's own error aborts the transaction, charges
// nothing and is returned, the ledger not broken). A caller thus makes a
// state that must exist exactly when the round is charged (the
// aggregator's prepared secure-summation round) one write with the
// charge. also runs with the ledger locked, inside the store's Update:
// it must not call the ledger, and should only read and write the
// transaction. With Options.RepeatLast, a repeat of the last release
// writes no record and commits also's writes alone. also nil is Charge;
// a file ledger (Open) refuses a non-nil also (ErrInvalidOptions).
//
// Guarantee: as Charge.
func (l *Ledger) ChargeWith(rel privacy.Release, also func(tx *datastore.Tx) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if also != nil && l.db == nil {
		return fmt.Errorf("%w: ChargeWith needs a ledger in a datastore (OpenStore)", ErrInvalidOptions)
	}
	if !l.closed && l.repeat(rel) {
		if also == nil {
			return nil
		}
		if l.broken != nil {
			return fmt.Errorf("%w: %w", ErrBroken, l.broken)
		}
		return l.commit(rel.Round, nil, also)
	}
	eps, method, sess, rep, err := l.checkNext(rel)
	if err != nil {
		if errors.Is(err, ErrBudgetExhausted) {
			l.log.Warn("ledger: charge refused", "round", rel.Round, "would_be_eps", eps, "method", method,
				"spent_eps", l.eps, "target", l.opts.TargetEpsilon)
		}
		return err
	}
	line, err := encodeRecord(rel, time.Now(), eps, l.opts.TargetDelta, method, l.head())
	if err != nil {
		return err
	}
	if err := l.commit(rel.Round, line, also); err != nil {
		return err
	}
	l.byRound[rel.Round] = len(l.releases)
	l.releases = append(l.releases, clone(rel))
	l.hashes = append(l.hashes, chain(line))
	l.eps, l.method = eps, method
	if sess != nil {
		l.session, l.report = sess, rep
	}
	l.log.Info("ledger: charged", "round", rel.Round, "protocol", rel.Protocol, "eps", eps,
		"delta", l.opts.TargetDelta, "method", method, "remaining", l.opts.TargetEpsilon-eps)
	return nil
}

// commit is the one write path of the ledger. In a store (OpenStore) it
// puts line as the next record, with also's writes, in one Update, and
// returns nil only when it is durable; a failed write or fsync breaks the
// ledger (also's own error does not: nothing was written). line nil
// commits also alone (a repeated release). In a file it appends line
// (one complete record, its '\n' last) with a single Write, then Syncs,
// and returns nil only after both succeeded. A short write counts as a
// failed one. On failure the ledger is broken (every later charge fails
// with ErrBroken): the file may now hold a fragment of line, or the whole
// of it unsynced, which a reopen discards (a torn tail) or counts (an
// over-count, never an under-count); appending after it could chain onto
// a record the ledger's state does not hold. Caller holds l.mu and
// updates the state only after commit returned nil.
func (l *Ledger) commit(round int, line []byte, also func(tx *datastore.Tx) error) error {
	if l.db != nil {
		return l.commitStore(round, line, also)
	}
	n, err := l.f.Write(line)
	if err == nil && n != len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		l.broken = fmt.Errorf("writing round %d: %w", round, err)
	} else if err = l.f.Sync(); err != nil {
		l.broken = fmt.Errorf("fsync of round %d: %w", round, err)
	}
	if err != nil {
		l.log.Error("ledger: charge not durable; the round is not charged and the ledger is broken until reopened", "round", round, "err", l.broken)
		return fmt.Errorf("%w: %w", ErrBroken, l.broken)
	}
	return nil
}

// CanCharge reports, without writing, the composed epsilon charging rel
// would bring and the error Charge would return (nil if it would succeed,
// barring I/O failure). It is advisory: another goroutine may charge in
// between, and Charge checks again.
func (l *Ledger) CanCharge(rel privacy.Release) (eps float64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.closed && l.repeat(rel) {
		return l.eps, nil
	}
	eps, _, err = l.check(rel)
	return eps, err
}

// Spent returns the composition of every charged release: the ledger is
// (eps, delta)-DP by the composer's method. With nothing charged it returns
// (0, 0, "").
func (l *Ledger) Spent() (eps, delta float64, method string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.releases) == 0 {
		return 0, 0, ""
	}
	return l.eps, l.opts.TargetDelta, l.method
}

// Remaining returns TargetEpsilon minus the spent epsilon, or 0 if the spent
// epsilon exceeds the target. It is not additive: whether the next release
// fits depends on the composer (use CanCharge).
func (l *Ledger) Remaining() float64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return max(0, l.opts.TargetEpsilon-l.eps)
}

// Report returns every accounting method's rows for the charged releases
// (the session's report; privacy.Report.Tightest is the row the charges
// were admitted by), and false when the ledger composes through a
// Composer instead of a Session.
func (l *Ledger) Report() (privacy.Report, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.session == nil {
		return privacy.Report{}, false
	}
	r := l.report
	r.Rows = slices.Clone(r.Rows)
	return r, true
}

// head returns the chain hash after the last record. Caller holds l.mu.
func (l *Ledger) head() Hash {
	if len(l.hashes) == 0 {
		return Hash{}
	}
	return l.hashes[len(l.hashes)-1]
}

// Head returns the number of committed records and the hash chain value
// after the last one (all zeros when empty). Each record commits to the
// previous hash, so the head identifies the whole file content up to
// that record. Store it with any state that depends on the charged rounds
// (the aggregator's checkpoint), send it to the other server (/v1/anchor)
// and pass it to Verify on restart.
func (l *Ledger) Head() wire.Head {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return wire.Head{Count: uint64(len(l.hashes)), Hash: l.head()}
}

// Verify checks that the ledger still holds the records a head recorded
// earlier: it has at least h.Count records and the chain hash after its
// first h.Count records is h.Hash. A ledger that lost records (a deleted
// last line, an emptied or deleted file) or whose records were rewritten
// fails with ErrRollback: replaying it would under-count the privacy
// loss, so the caller must refuse to start (or to charge). A ledger
// longer than the head (charged after the head was stored, e.g. a crash
// between charge and checkpoint) passes if its prefix matches.
func (l *Ledger) Verify(h wire.Head) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if h.Count > uint64(len(l.hashes)) {
		return fmt.Errorf("%w: the head records %d records, the file holds %d", ErrRollback, h.Count, len(l.hashes))
	}
	var got Hash
	if h.Count > 0 {
		got = l.hashes[h.Count-1]
	}
	if got != h.Hash {
		return fmt.Errorf("%w: record %d hashes to %s, the head says %s", ErrRollback, h.Count, got, Hash(h.Hash))
	}
	return nil
}

// Anchor returns the other server's head as this ledger keeps it (the
// store's, OpenStore; Options.PeerFile's; nil without one): the
// aggregator records the relay's head through it (anchor.go).
func (l *Ledger) Anchor() *Peer { return l.peer }

// Peer returns the other server's ledger head as last recorded in the
// store (OpenStore) or Options.PeerFile (the zero head without one).
func (l *Ledger) Peer() wire.Head {
	if l.peer == nil {
		return wire.Head{}
	}
	return l.peer.Head()
}

// RecordPeer durably records h as the other server's ledger head
// (Peer.Record): a head behind the recorded one is ErrRollback and not
// recorded. A ledger file without Options.PeerFile has no peer: it fails.
func (l *Ledger) RecordPeer(h wire.Head) error {
	if l.peer == nil {
		return fmt.Errorf("%w: no peer file", ErrInvalidOptions)
	}
	return l.peer.Record(h)
}

// Suspend makes Charge and CanCharge refuse every release with
// ErrSuspended (wrapping why) until Resume: the aggregator suspends its
// ledger at start until it has verified it against the head the relay
// holds (docs/threat-model.md, "Ledgers that anchor each other").
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

// Suspended returns the suspension's reason (nil: charges allowed).
func (l *Ledger) Suspended() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.suspend
}

// Target returns the budget the ledger enforces.
func (l *Ledger) Target() (eps, delta float64) { return l.opts.TargetEpsilon, l.opts.TargetDelta }

// Releases returns a copy of every charged release in round order.
func (l *Ledger) Releases() []privacy.Release {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return cloneAll(l.releases)
}

// LastRound returns the last charged round, 0 if none: the next round to
// charge must be larger.
func (l *Ledger) LastRound() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.releases) == 0 {
		return 0
	}
	return l.releases[len(l.releases)-1].Round
}

// DiscardedTail returns a copy of the torn trailing fragment Open discarded
// (nil if the file ended cleanly). See the package documentation.
func (l *Ledger) DiscardedTail() []byte {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.tail)
}

// SpentBy returns the composed epsilon, at the target delta, of a volunteer
// that took part in exactly the given rounds (any order; each at most once):
// the composition of those rounds' releases only. A round the ledger never
// charged is an ErrUnknownRound error. No rounds means (0, "", nil).
func (l *Ledger) SpentBy(rounds []int) (eps float64, method string, err error) {
	if len(rounds) == 0 {
		return 0, "", nil
	}
	sorted := slices.Clone(rounds)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return 0, "", fmt.Errorf("ledger: round %d listed twice", sorted[i])
		}
	}
	l.mu.RLock()
	sel := make([]privacy.Release, 0, len(sorted))
	for _, r := range sorted {
		i, ok := l.byRound[r]
		if !ok {
			l.mu.RUnlock()
			return 0, "", fmt.Errorf("%w: %d", ErrUnknownRound, r)
		}
		// Charged releases are never mutated (Charge stores a clone), so
		// sel may be read after unlocking; compose clones it again before
		// the composer sees it.
		sel = append(sel, l.releases[i])
	}
	sess := l.session
	l.mu.RUnlock()
	if sess != nil {
		// A fresh session over the selected rounds only (in round
		// order), one composition per round.
		s := l.opts.Session
		var rep privacy.Report
		var err error
		for _, r := range sel {
			if s, rep, err = s.With(r); err != nil {
				return 0, "", fmt.Errorf("%w: %w", ErrComposer, err)
			}
		}
		if rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
			return 0, "", fmt.Errorf("%w: no valid proven accounting method for rounds %v", ErrComposer, sorted)
		}
		return rep.Rows[rep.Tightest].Epsilon, rep.Rows[rep.Tightest].Method, nil
	}
	return l.compose(sel)
}

// Close closes the file (a ledger in a store leaves the store open: its
// opener closes it). Later Charge calls fail with ErrClosed; the read
// methods keep answering from memory. Closing twice is a no-op.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.f == nil {
		return nil
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("ledger: closing %s: %w", l.path, err)
	}
	return nil
}

func clone(r privacy.Release) privacy.Release {
	r.PersonalEps = slices.Clone(r.PersonalEps)
	return r
}

func cloneAll(rs []privacy.Release) []privacy.Release {
	out := make([]privacy.Release, len(rs))
	for i, r := range rs {
		out[i] = clone(r)
	}
	return out
}
