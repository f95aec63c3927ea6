package rounds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/prepjob"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

const testToken = "test-token-0123456789abcdef"

// Secure summation at d = 8 (3 features, 2 classes): 8 bits, C = 1, each
// server's σ 2 grid units, at most 8 reports, at least 3.
func secaggParams() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian, D: 8, K: 1, L: 1, Width: 1,
		MinBatch: 3, Quota: 8, Clip: 1, CheckInP: 0.5, Sigma: 2}
}

func testSet(t testing.TB) logreg.Dataset {
	t.Helper()
	x := []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, -1, 0, 1, 0, -1, -1}
	y := []uint8{0, 1, 1, 0, 1, 0}
	ds, err := logreg.NewDataset(logreg.Shape{Features: 3, Classes: 2}, x, y)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// memStore is a Store in memory that can be told to fail a save (a
// failing write or fsync: nothing of it is kept).
type memStore struct {
	mu           sync.Mutex
	st           *checkpoint.State
	collect      *Collect
	pending      *Pending
	failCollect  bool
	failPending  bool
	collectSaves int
	sealSaves    int
	collectBytes int
	pendingSaves int
	stateSaves   int
}

var errInjected = errors.New("injected: the disk refused the write")

func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

func (s *memStore) LoadState() (*checkpoint.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.st), nil
}
func (s *memStore) SaveState(st *checkpoint.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *st
	c.History = append([]checkpoint.RoundRecord(nil), st.History...)
	c.Model = append([]float64(nil), st.Model...)
	s.st = &c
	s.stateSaves++
	return nil
}
func (s *memStore) LoadCollect() (*Collect, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.collect), nil
}
func (s *memStore) SaveCollect(c *Collect) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCollect {
		return errInjected
	}
	s.collect = clone(c)
	s.collectSaves++
	s.collectBytes += len(c.Leader)
	for _, a := range c.Chunks {
		s.collectBytes += len(a.Reply) + len(a.Digest)
	}
	return nil
}
func (s *memStore) SealCollect(round int, seal uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCollect {
		return errInjected
	}
	if c := s.collect; c != nil && c.Round == round && (c.Sealed == 0 || seal < c.Sealed) {
		c = clone(c)
		c.Sealed = seal
		s.collect = c
		s.sealSaves++
	}
	return nil
}
func (s *memStore) RemoveCollect() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collect = nil
	return nil
}
func (s *memStore) LoadPending() (*Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.pending), nil
}
func (s *memStore) SavePending(p *Pending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPending {
		return errInjected
	}
	s.pending = clone(p)
	s.pendingSaves++
	return nil
}
func (s *memStore) RemovePending() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = nil
	return nil
}

// rig is a machine over a real ledger and key, with the relay's helper
// side played by the real helper engine.
type rig struct {
	t      *testing.T
	dir    string
	key    *sealkey.PrivateKey
	helper *envelopetest.HelperKey
	store  Store
	ledger *ledger.Ledger
	m      *Machine
	params wire.Params
	// ledgerInStore opens the ledger in the DBStore's datastore
	// (ledger.OpenStore), as the aggregator does, instead of a file.
	ledgerInStore bool
	// session: the ledger composes with privacy.Session (the aggregator's
	// accounting) instead of counting releases.
	session bool
	// optimizer is the server optimiser (zero value: sgd).
	optimizer Optimizer
	// prepApart is Options.PrepareApart (nil: none).
	prepApart func(context.Context, prepjob.Round, [][]byte, []byte) ([]byte, error)
}

// oneEach charges every release ε = 1 (the tests count releases).
func oneEach(rs []privacy.Release, delta float64) (privacy.Report, error) {
	return privacy.Report{Delta: delta, Rounds: len(rs), Rows: []privacy.AccountRow{
		{Bound: privacy.Bound{Method: "count", Epsilon: float64(len(rs)), Delta: delta, Valid: true}},
		{Bound: privacy.Bound{Method: "none", Epsilon: math.NaN(), Delta: math.NaN(), Reason: "no"}},
	}}, nil
}

func newRig(t *testing.T, store Store) *rig {
	t.Helper()
	return newRigIn(t, t.TempDir(), secaggParams(), func(string) Store { return store })
}

// newRigIn is a rig whose state directory is dir, with the store store(dir).
func newRigIn(t *testing.T, dir string, p wire.Params, store func(dir string) Store) *rig {
	t.Helper()
	key, h := rigKeys(t)
	r := &rig{t: t, dir: dir, key: key, helper: h, store: store(dir), params: p}
	r.open()
	return r
}

// rigKeys returns a fresh aggregator key and the fixed helper key of a rig.
func rigKeys(t *testing.T) (*sealkey.PrivateKey, *envelopetest.HelperKey) {
	t.Helper()
	key, err := sealkey.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	h, err := envelopetest.UnmarshalHelperKey(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return key, h
}

// newStoreLedgerRig is a rig on a DBStore of dir's datastore (on fsys),
// with the ledger in the same datastore, as the aggregator runs it.
func newStoreLedgerRig(t *testing.T, dir string, fsys datastore.FileSystem) (*rig, *datastore.Store) {
	t.Helper()
	key, h := rigKeys(t)
	db := openDB(t, dir, fsys)
	r := &rig{t: t, dir: dir, key: key, helper: h, store: NewDBStore(db), params: secaggParams(), ledgerInStore: true}
	r.open()
	return r, db
}

// open (re)starts the machine from the store and the ledger file, as a
// restarted aggregator does.
func (r *rig) open() {
	t := r.t
	t.Helper()
	if r.ledger != nil {
		r.ledger.Close()
	}
	acct := accounting.New(oneEach)
	if r.session {
		acct = accounting.New(nil)
	}
	lo, err := acct.LedgerOptions(100, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	var l *ledger.Ledger
	if d, ok := r.store.(*DBStore); ok && r.ledgerInStore {
		l, err = ledger.OpenStore(d.DB(), lo, ledger.Former{})
	} else {
		l, err = ledger.Open(filepath.Join(r.dir, "ledger.jsonl"), lo)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.ledger = l
	rc, err := NewRoundConfig(r.params, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.store.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st = &checkpoint.State{Version: checkpoint.Version, Model: make([]float64, r.params.D)}
	}
	if err := st.VerifyLedger(l); err != nil {
		t.Fatal(err)
	}
	m, err := Open(Options{Key: r.key, Ledger: l, Acct: acct, Store: r.store, Round: rc, Test: testSet(t), Token: testToken,
		Workers: 2, BatchGrace: 10 * time.Second, ExpectedN: 4, TargetEpsilon: 100, TargetDelta: 1e-5,
		Noise: noise.NewSeeded(99), Optimizer: r.optimizer, PrepareApart: r.prepApart}, *st)
	if err != nil {
		t.Fatal(err)
	}
	// A group is checkpointed as soon as no other chunk is on its way
	// (TestGroupLinger tests the wait for the relay's next chunk).
	m.flow.linger = -1
	r.m = m
}

// announce opens the next round and marks it announced.
func (r *rig) announce() int {
	r.t.Helper()
	o, err := r.m.NextRound(time.Now())
	if err != nil || o == nil {
		r.t.Fatalf("next round: %v %v", o, err)
	}
	r.m.MarkAnnounced(o.Round)
	return o.Round
}

func (r *rig) spec(round int) *secagg.Round {
	r.t.Helper()
	sr, err := r.m.Current().Proto.Spec.SecAggRound(uint64(round))
	if err != nil {
		r.t.Fatal(err)
	}
	return sr
}

// report is one volunteer's update and its sealed shares.
type report struct {
	x              []float64
	leader, helper []byte
}

func (r *rig) reports(round, n int) []report {
	r.t.Helper()
	sr := r.spec(round)
	var out []report
	for i := range n {
		src := noise.NewSeeded(uint64(i + 1))
		x := make([]float64, r.params.D)
		for j := range x {
			x[j] = 0.6 * (noise.Uniform(src) - 0.5)
		}
		l, h, err := sr.Shard(x, noise.NewSeeded(uint64(100+i)))
		if err != nil {
			r.t.Fatal(err)
		}
		sl, err := envelope.SealShare(r.key.Public().HPKE, uint64(round), envelope.ShareLeader, [32]byte{}, l)
		if err != nil {
			r.t.Fatal(err)
		}
		sh, err := envelope.SealShare(r.helper.Public(), uint64(round), envelope.ShareHelper, [32]byte{}, h)
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, report{x: x, leader: sl, helper: sh})
	}
	return out
}

// helperSide is the relay's helper for one round.
type helperSide struct {
	r      *rig
	round  uint64
	sr     *secagg.Round
	eng    secagg.Engine
	agg    *secagg.Aggregate
	preps  []secagg.Prep
	chunks int
	n      int
	cl, ag []byte // the close and aggregate frames, once built
}

func (r *rig) helperSide(round int) *helperSide {
	r.t.Helper()
	sr := r.spec(round)
	vk, err := secagg.DeriveVerifyKey([]byte(testToken), uint64(round))
	if err != nil {
		r.t.Fatal(err)
	}
	eng, err := secagg.NewEngine(sr, false, vk)
	if err != nil {
		r.t.Fatal(err)
	}
	return &helperSide{r: r, round: uint64(round), sr: sr, eng: eng, agg: eng.NewAggregate()}
}

// chunk is the next chunk frame of reps (not yet sent).
func (h *helperSide) chunk(reps []report) []byte {
	t := h.r.t
	t.Helper()
	var ls [][]byte
	var es []secagg.Entry
	for _, v := range reps {
		pt, err := h.r.helper.OpenHelperShare(h.round, v.helper, h.sr.HelperShareSize())
		if err != nil {
			t.Fatal(err)
		}
		p := h.eng.PrepInit(pt)
		h.preps = append(h.preps, p)
		ls, es = append(ls, v.leader), append(es, p.Entry)
	}
	prep, err := h.sr.MarshalPrep(es)
	if err != nil {
		t.Fatal(err)
	}
	h.chunks++
	h.n += len(reps)
	f, err := (&wire.SecAggChunk{Round: h.round, Seq: uint32(h.chunks), Leader: ls, Prep: prep}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// verdicts folds an accepted chunk's answer into the helper's aggregate.
func (h *helperSide) verdicts(frame []byte) {
	t := h.r.t
	t.Helper()
	p, err := wire.ParseSecAggPrep(frame)
	if err != nil || p.Status != wire.BatchStatusOK {
		t.Fatalf("chunk answer %+v %v", p, err)
	}
	ms, err := h.sr.ParseVerdicts(p.Msg)
	if err != nil {
		t.Fatal(err)
	}
	done := len(h.preps) - len(ms)
	for i, m := range ms {
		out, err := h.eng.Next(h.preps[done+i], m)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			h.agg.Fold(out)
		}
	}
}

// close is the round's close frame (built once: re-sends are identical).
func (h *helperSide) close() []byte {
	h.r.t.Helper()
	if h.cl != nil {
		return h.cl
	}
	f, err := (&wire.SecAggClose{Round: h.round, Chunks: uint32(h.chunks), Reports: uint32(h.n), Accepted: uint32(h.agg.Count()),
		CheckedIn: uint32(h.n) + 1, Population: uint32(h.n) + 3}).MarshalBinary()
	if err != nil {
		h.r.t.Fatal(err)
	}
	h.cl = f
	return f
}

// aggregate is the helper's noised aggregate share frame (built once).
func (h *helperSide) aggregate() []byte {
	t := h.r.t
	t.Helper()
	if h.ag != nil {
		return h.ag
	}
	own, err := h.agg.Share()
	if err != nil {
		t.Fatal(err)
	}
	if err := own.AddNoise(noise.NewSeeded(h.round + 1000)); err != nil {
		t.Fatal(err)
	}
	share, err := own.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f, err := (&wire.SecAggAggregate{Round: h.round, Share: share}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h.ag = f
	return f
}

// streamed sends reps in chunks of per, requiring each accepted.
func (r *rig) streamed(round int, reps []report, per int) *helperSide {
	r.t.Helper()
	h := r.helperSide(round)
	for lo := 0; lo < len(reps); lo += per {
		ans, err := r.m.SecAggChunkIntake(h.chunk(reps[lo:min(lo+per, len(reps))]))
		if err != nil || ans.Outcome != "accepted" {
			r.t.Fatalf("chunk %d: %+v %v", h.chunks, ans.Answer, err)
		}
		h.verdicts(ans.Frame)
	}
	return h
}

// charged streams n reports in chunks of 2 and closes the round,
// requiring the close charged (status ok, n accepted).
func (r *rig) charged(round, n int) (*helperSide, []byte) {
	r.t.Helper()
	h := r.streamed(round, r.reports(round, n), 2)
	ans, err := r.m.SecAggCloseIntake(h.close())
	if err != nil || ans.Outcome != "accepted" {
		r.t.Fatalf("close: %+v %v", ans.Answer, err)
	}
	ch, err := wire.ParseSecAggCharged(ans.Frame)
	if err != nil || ch.Status != wire.BatchStatusOK || int(ch.Accepted) != n {
		r.t.Fatalf("close answer %+v %v", ch, err)
	}
	return h, ans.Frame
}

func (r *rig) state() (st checkpoint.State) {
	r.m.View(func(s *checkpoint.State, _ Control) {
		st = *s
		st.History = append([]checkpoint.RoundRecord(nil), s.History...)
		st.Model = append([]float64(nil), s.Model...)
		st.Momentum = append([]float64(nil), s.Momentum...)
	})
	return st
}

func (r *rig) lastRecord() checkpoint.RoundRecord {
	r.t.Helper()
	h := r.state().History
	if len(h) == 0 {
		r.t.Fatal("no round finished")
	}
	return h[len(h)-1]
}

// jsonSize is the size of c as FileStore wrote it.
func jsonSize(c *Collect) (int64, error) {
	b, err := json.Marshal(c)
	return int64(len(b)), err
}
