package prepjob

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// openJobs opens schema's queue for the test.
func openJobs(t *testing.T, ctx context.Context, dsn, schema string) *pgstore.Jobs {
	t.Helper()
	j, err := pgstore.OpenJobs(ctx, dsn, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// batch is a round's sealed helper shares: report 1's is sealed for
// another round (it does not open); report 2's has a byte flipped before
// it was sealed (it opens, and the leader rejects the report).
type batch struct {
	r      Round
	sr     *secagg.Round
	key    *helperkey.Key
	sealed [][]byte
	plain  [][]byte // the opened shares (nil: does not open)
}

func newBatch(t *testing.T, n int) *batch {
	t.Helper()
	p := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 20000, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 16}
	spec, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	const num = 5
	sr, err := spec.SecAggRound(num)
	if err != nil {
		t.Fatal(err)
	}
	key, err := helperkey.Unmarshal(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	b := &batch{r: Round{Round: num, Params: p, VerifyKey: bytes.Repeat([]byte{4}, secagg.VerifyKeySize)}, sr: sr, key: key}
	for i := range n {
		_, h, err := sr.Shard([]float64{0.1, 0.2, 0, 0, -0.3, 0, 0, 0}, noise.NewSeeded(uint64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		seal := uint64(num)
		switch i {
		case 1:
			seal = num + 1
		case 2:
			h[len(h)-1] ^= 1
		}
		s, err := envelope.SealShare(key.Public(), seal, envelope.ShareHelper, [32]byte{}, h)
		if err != nil {
			t.Fatal(err)
		}
		b.sealed = append(b.sealed, s)
		if i == 1 {
			b.plain = append(b.plain, nil)
		} else {
			b.plain = append(b.plain, h)
		}
	}
	return b
}

// TestExecuteMatchesPrepInit: a job's result gives, report by report,
// what the helper's own PrepInit gives: the same 'P' entry (encoded as
// the aggregator receives it), nil for the share that does not open, a
// rejection for the altered one; and a preparation that a leader's
// verdict finishes into the same output share (the folded aggregates
// equal byte for byte).
func TestExecuteMatchesPrepInit(t *testing.T) {
	b := newBatch(t, 6)
	p := NewPreparer(b.key)
	job, err := Encode(Fingerprint(b.key), b.r, b.sealed)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Execute(job, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseResult(b.sr, res, len(b.sealed))
	if err != nil {
		t.Fatal(err)
	}
	he, _ := secagg.NewEngine(b.sr, false, b.r.VerifyKey)
	apart, here := he.NewAggregate(), he.NewAggregate()
	var gotP, wantP []secagg.Entry
	for i, pt := range b.plain {
		if pt == nil {
			if got[i] != nil {
				t.Fatalf("report %d: a share that does not open was prepared", i)
			}
			continue
		}
		if got[i] == nil {
			t.Fatalf("report %d: not prepared", i)
		}
		want := he.PrepInit(pt)
		if got[i].Reason != want.Reason || (want.Err == nil) != (got[i].Err == nil) {
			t.Fatalf("report %d: reason %v (err %v), want %v (err %v)", i, got[i].Reason, got[i].Err, want.Reason, want.Err)
		}
		gotP, wantP = append(gotP, got[i].Entry), append(wantP, want.Entry)
		// The leader's verdict for this report: its prep message is what
		// the helper's state must match (Next checks the seeds).
		m := leaderVerdict(t, b, i, want.Entry)
		oa, err := he.Next(*got[i], m)
		if err != nil {
			t.Fatalf("report %d prepared apart: %v", i, err)
		}
		oh, err := he.Next(want, m)
		if err != nil {
			t.Fatal(err)
		}
		if (oa == nil) != (oh == nil) {
			t.Fatalf("report %d: finished apart %v, here %v", i, oa != nil, oh != nil)
		}
		if oa != nil && (apart.Fold(oa) != nil || here.Fold(oh) != nil) {
			t.Fatal("fold")
		}
	}
	pa, err1 := b.sr.MarshalPrep(gotP)
	ph, err2 := b.sr.MarshalPrep(wantP)
	if err1 != nil || err2 != nil || !bytes.Equal(pa, ph) {
		t.Fatalf("the 'P' message differs (%v, %v)", err1, err2)
	}
	ba, _ := apart.MarshalBinary()
	bh, _ := here.MarshalBinary()
	if apart.Count() != 4 || !bytes.Equal(ba, bh) {
		t.Fatalf("aggregates differ: %d folded apart, want 4 and the same bytes", apart.Count())
	}
}

// leaderVerdict shards report i again (the same seed) and has a leader
// decide it against the helper's entry (report 2's altered helper share
// is rejected there).
func leaderVerdict(t *testing.T, b *batch, i int, help secagg.Entry) secagg.Entry {
	t.Helper()
	l, _, err := b.sr.Shard([]float64{0.1, 0.2, 0, 0, -0.3, 0, 0, 0}, noise.NewSeeded(uint64(i+1)))
	if err != nil {
		t.Fatal(err)
	}
	le, _ := secagg.NewEngine(b.sr, true, b.r.VerifyKey)
	m, _ := le.Decide(le.PrepInit(l), help)
	if (m.Reason == secagg.Accepted) != (i != 2) {
		t.Fatalf("report %d: the leader's verdict %v", i, m.Reason)
	}
	return m
}

// TestJobsRefused: a job for another helper key, of another format, or
// truncated fails (the owner then prepares the batch itself); a result of
// another count, or with trailing bytes, does not parse.
func TestJobsRefused(t *testing.T) {
	b := newBatch(t, 3)
	p := NewPreparer(b.key)
	other, _ := helperkey.Unmarshal(bytes.Repeat([]byte{8}, 32))
	job, _ := Encode(Fingerprint(other), b.r, b.sealed)
	if _, err := p.Execute(job, 1); err == nil || !strings.Contains(err.Error(), "this replica holds") {
		t.Errorf("a job for another key: %v", err)
	}
	job, _ = Encode(Fingerprint(b.key), b.r, b.sealed)
	for cut := range len(job) {
		if _, err := p.Execute(job[:cut], 1); err == nil {
			t.Fatalf("a job cut at %d of %d bytes executed", cut, len(job))
		}
	}
	hl := binary.BigEndian.Uint32(job)
	v2 := bytes.Replace(job[:4+hl], []byte(`"v":1`), []byte(`"v":2`), 1)
	if _, err := p.Execute(append(v2, job[4+hl:]...), 1); err == nil || !strings.Contains(err.Error(), "format 2") {
		t.Errorf("a job of format 2: %v", err)
	}
	res, err := p.Execute(job, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseResult(b.sr, res, 2); err == nil {
		t.Error("a result of 3 reports parsed for a job of 2")
	}
	if _, err := ParseResult(b.sr, append(res, 0), 3); err == nil {
		t.Error("a result with a trailing byte parsed")
	}
}

// TestOffloadPostgres: through a real queue, a replica holding the helper
// key prepares the owner's batch (the owner leaves it to the replicas for
// an hour) and the result is the one Execute gives here; a replica with
// another key (a schema made afresh since it started) fails the job at
// once and the owner's Prepare returns that error, not after the lease's
// bound.
func TestOffloadPostgres(t *testing.T) {
	c := pgtest.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	b := newBatch(t, 4)
	for _, tc := range []struct {
		name    string
		replica *helperkey.Key
	}{{"the same key", b.key}, {"another key", func() *helperkey.Key { k, _ := helperkey.Unmarshal(bytes.Repeat([]byte{8}, 32)); return k }()}} {
		t.Run(tc.name, func(t *testing.T) {
			schema := c.Schema(t)
			open := func() *pgstore.Jobs { return openJobs(t, ctx, c.DSN, schema) }
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			replica := NewWorker(open(), NewPreparer(tc.replica), 2, time.Minute, quiet)
			go replica.Run(rctx)
			prep := NewPreparer(b.key)
			owner := &Offload{JobOffload: pgstore.JobOffload{W: NewWorker(open(), prep, 0, time.Minute, quiet), HelpAfter: time.Hour}, Prep: prep}
			start := time.Now()
			got, err := owner.Prepare(ctx, b.r, b.sr, b.sealed)
			if d := time.Since(start); d > 30*time.Second { // the bound is 2 minutes and 30 s
				t.Fatalf("the answer came after %v", d)
			}
			// The replica counts a job once its result is stored, which
			// the owner may read first.
			counted := func(n func() int64) int64 {
				for end := time.Now().Add(10 * time.Second); n() == 0 && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				return n()
			}
			if tc.replica != b.key {
				if err == nil || !strings.Contains(err.Error(), "this replica holds") || counted(replica.Failed) != 1 {
					t.Fatalf("a job the replica could not prepare: %v (failed %d)", err, replica.Failed())
				}
				return
			}
			if err != nil || counted(replica.Done) != 1 {
				t.Fatalf("prepared apart: %v (the replica completed %d jobs)", err, replica.Done())
			}
			job, _ := Encode(Fingerprint(b.key), b.r, b.sealed)
			res, err := prep.Execute(job, 1)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := ParseResult(b.sr, res, len(b.sealed))
			for i := range want {
				if (want[i] == nil) != (got[i] == nil) || (want[i] != nil && (want[i].Reason != got[i].Reason || !bytes.Equal(want[i].Payload, got[i].Payload))) {
					t.Fatalf("report %d differs from the one prepared here", i)
				}
			}
		})
	}
}

// TestDeadReplicasLeaseTakenOverPostgres: a replica leases the owner's
// batch and dies holding it (it never completes it); once its lease
// (300 ms) expires, exactly one other lease takes the job over (the owner,
// which leaves its jobs to the replicas for 2 s first), and the owner gets
// the batch prepared exactly as here. The dead replica's late result, if it came, is refused.
func TestDeadReplicasLeaseTakenOverPostgres(t *testing.T) {
	c := pgtest.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := c.Schema(t)
	open := func() *pgstore.Jobs { return openJobs(t, ctx, c.DSN, schema) }
	const lease = 300 * time.Millisecond
	b := newBatch(t, 4)
	prep := NewPreparer(b.key)
	owner := &Offload{JobOffload: pgstore.JobOffload{W: NewWorker(open(), prep, 1, lease, slog.New(slog.DiscardHandler)), HelpAfter: 2 * time.Second}, Prep: prep}
	dead := open()
	died := make(chan *pgstore.Lease, 1)
	go func() {
		l, err := dead.Next(ctx, Kind, lease)
		if err == nil {
			died <- l // and never completes it
		}
	}()
	got := make(chan []*secagg.Prep, 1)
	errc := make(chan error, 1)
	go func() {
		p, err := owner.Prepare(ctx, b.r, b.sr, b.sealed)
		errc <- err
		got <- p
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	preps := <-got
	var l *pgstore.Lease
	select {
	case l = <-died:
	default:
		t.Fatal("the dead replica never leased the batch (the owner leased it first, after 2 s)")
	}
	if n := owner.W.TakenOver(); n != 1 {
		t.Errorf("the job was taken over %d times, want once", n)
	}
	if err := dead.Complete(ctx, l, []byte{0}); !errors.Is(err, pgstore.ErrLeaseLost) {
		t.Errorf("the dead replica's late result: %v, want ErrLeaseLost", err)
	}
	job, _ := Encode(Fingerprint(b.key), b.r, b.sealed)
	res, err := prep.Execute(job, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ParseResult(b.sr, res, len(b.sealed))
	for i := range want {
		if (want[i] == nil) != (preps[i] == nil) || (want[i] != nil && !bytes.Equal(want[i].Payload, preps[i].Payload)) {
			t.Fatalf("report %d differs from the one prepared here", i)
		}
	}
}
