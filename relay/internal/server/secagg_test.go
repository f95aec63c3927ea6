package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/blanket-fl/blanket/relay/internal/relaystore"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
	"github.com/blanket-fl/blanket/shared/datastore"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The aggregator's secure-summation paths (relay/internal/sumrelay).
const (
	secAggChunkPath     = sumrelay.ChunkPath
	secAggClosePath     = sumrelay.ClosePath
	secAggAggregatePath = sumrelay.AggregatePath
)

// secAggTestParams is a small secure-summation (PINE) round: d = 8, clip
// 1 (32,768 fixed-point units), sigma 20,000 units per server (so that a
// few rounds' epsilon stays within the relay ledger's test targets).
func secAggTestParams() wire.Params {
	return wire.Params{
		Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 20000, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 16,
	}
}

// leaderAgg is the aggregator's side of streaming secure summation as
// docs/secagg.md describes it, with the real Prio3 leader engine: every
// chunk's leader shares are opened (a share that does not open is passed
// on as it is and rejected by PrepInit), decided with the relay's 'P'
// entries and folded; the close is answered with the charged count (or
// invalid below MinBatch, or refused when told to); the relay's noised
// aggregate share is unsharded with its own.
type leaderAgg struct {
	t      *testing.T
	key    *envelopetest.Key
	p      wire.Params
	refuse bool          // answer every close with status refused
	hold   chan struct{} // if set, a request to holdPath waits for it before being read
	// holdPath is the path hold applies to (default: the chunk path).
	holdPath string
	// failChunk and failAgg: answer the first ones 503 (no definitive
	// answer); down: answer every chunk and close 503.
	failChunk, failAgg int
	down               bool
	// lie: answer the close with this accepted count instead of the
	// leader's (a deviating aggregator); 0: the leader's.
	lie uint32
	// keep: a deviating leader that marks every report of the round after
	// the first keep as failing its proof (the n − 1 attack with keep 1);
	// 0: honest verdicts.
	keep int
	// invalidSeq: answer the chunk with this Seq with status invalid (the
	// aggregator found it invalid: the round ends); 0: none.
	invalidSeq uint32
	// lose: fold the chunk with this Seq, then never answer it (the relay
	// lost before the answer came back); 0: none.
	lose     uint32
	attempts map[string][][]byte // every request body by path

	mu       sync.Mutex
	turn     *sync.Cond // on mu: a chunk ahead of next waits for its predecessors
	next     uint32
	chunks   []*wire.SecAggChunk
	closes   []*wire.SecAggClose
	aggs     [][]byte
	aborts   []*wire.Abort
	round    uint64
	eng      secagg.Engine
	sr       *secagg.Round
	agg      *secagg.Aggregate
	reports  int
	nonces   map[[16]byte]bool     // accepted this round
	rejected map[int]secagg.Reason // by index in the round
	result   *secagg.Result
	errs     []error
	replies  map[uint32][]byte // the open round's chunks' answers, by seq (POST /v1/secagg/resume)
	sealed   uint32            // the first seq a resume found unfolded (0: none)
}

func (a *leaderAgg) fail(err error) {
	a.errs = append(a.errs, err)
}

func (a *leaderAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	hp := a.holdPath
	if hp == "" {
		hp = secAggChunkPath
	}
	if a.hold != nil && r.URL.Path == hp {
		select {
		case <-a.hold:
		case <-r.Context().Done():
			return
		}
	}
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.attempts == nil {
		a.attempts = make(map[string][][]byte)
	}
	a.attempts[r.URL.Path] = append(a.attempts[r.URL.Path], bytes.Clone(body))
	switch {
	case (r.URL.Path == secAggChunkPath || r.URL.Path == secAggClosePath) && a.down:
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	case r.URL.Path == secAggChunkPath && a.failChunk > 0:
		a.failChunk--
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	case r.URL.Path == secAggAggregatePath && a.failAgg > 0:
		a.failAgg--
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	spec, err := roundspec.New(a.p)
	if err != nil {
		a.fail(err)
		http.Error(w, "bad params", http.StatusInternalServerError)
		return
	}
	answer := func(code int, outcome string, b []byte) {
		w.Header().Set(OutcomeHeader, outcome)
		w.WriteHeader(code)
		w.Write(b)
	}
	switch r.URL.Path {
	case secAggChunkPath:
		lead, _, _ := spec.SharesSizes()
		c, err := wire.ParseSecAggChunk(body, lead, int(a.p.Quota))
		if err != nil {
			a.fail(err)
			answer(http.StatusBadRequest, "invalid", nil)
			return
		}
		// The relay posts a few chunks at once: take them in seq order, as
		// the aggregator does.
		if a.turn == nil {
			a.turn = sync.NewCond(&a.mu)
		}
		for c.Seq > 1 && (c.Round != a.round || c.Seq > a.next) {
			a.turn.Wait()
		}
		a.next = c.Seq + 1
		a.turn.Broadcast()
		a.chunks = append(a.chunks, c)
		if a.invalidSeq != 0 && c.Seq == a.invalidSeq {
			reply, _ := (&wire.SecAggPrep{Round: c.Round, Status: wire.BatchStatusInvalid}).MarshalBinary()
			answer(http.StatusOK, "accepted", reply)
			return
		}
		if c.Seq == 1 || a.round != c.Round {
			a.round = c.Round
			a.sr, _ = spec.SecAggRound(c.Round)
			vk, _ := secagg.DeriveVerifyKey([]byte(testToken), c.Round)
			a.eng, err = secagg.NewEngine(a.sr, true, vk)
			if err != nil {
				a.fail(err)
				return
			}
			a.agg, a.reports, a.rejected, a.nonces = a.eng.NewAggregate(), 0, make(map[int]secagg.Reason), map[[16]byte]bool{}
		}
		ps, err := a.sr.ParsePrep(c.Prep)
		if err != nil || len(ps) != len(c.Leader) {
			a.fail(fmt.Errorf("prep: %v", err))
			answer(http.StatusBadRequest, "invalid", nil)
			return
		}
		var ms []secagg.Entry
		for i, sealed := range c.Leader {
			pt, err := a.key.OpenLeaderShare(c.Round, [32]byte{}, sealed, a.sr.LeaderShareSize())
			if err != nil {
				pt = sealed // rejected by PrepInit: not a share's length
			}
			m, out := a.eng.Decide(a.eng.PrepInit(pt), ps[i])
			if a.keep > 0 && a.reports >= a.keep {
				m, out = secagg.Entry{Nonce: m.Nonce, Reason: secagg.RejectInvalidProof}, nil
			}
			if out != nil && a.nonces[m.Nonce] {
				m, out = secagg.Entry{Nonce: m.Nonce, Reason: secagg.RejectDuplicateNonce}, nil
			}
			if out != nil {
				a.agg.Fold(out)
				a.nonces[m.Nonce] = true
			} else {
				a.rejected[a.reports] = m.Reason
			}
			a.reports++
			ms = append(ms, m)
		}
		msg, err := a.sr.MarshalVerdicts(ms)
		if err != nil {
			a.fail(err)
			return
		}
		reply, _ := (&wire.SecAggPrep{Round: c.Round, Status: wire.BatchStatusOK, Msg: msg}).MarshalBinary()
		if a.replies == nil || c.Seq == 1 {
			a.replies = make(map[uint32][]byte)
		}
		a.replies[c.Seq] = reply
		if c.Seq == a.lose {
			a.mu.Unlock()
			<-r.Context().Done() // folded; the answer never reaches the relay
			a.mu.Lock()
			return
		}
		answer(http.StatusOK, "accepted", reply)
	case sumrelay.ResumePath:
		rs, err := wire.ParseSecAggResume(body)
		if err != nil {
			a.fail(err)
			answer(http.StatusBadRequest, "invalid", nil)
			return
		}
		reply, ok := a.replies[rs.Seq]
		if !ok || rs.Round != a.round {
			if a.sealed == 0 || rs.Seq < a.sealed {
				a.sealed = rs.Seq
			}
			reply, _ = (&wire.SecAggPrep{Round: rs.Round, Status: wire.BatchStatusInvalid}).MarshalBinary()
		}
		answer(http.StatusOK, "accepted", reply)
	case secAggClosePath:
		cl, err := wire.ParseSecAggClose(body)
		if err != nil {
			a.fail(err)
			answer(http.StatusBadRequest, "invalid", nil)
			return
		}
		a.closes = append(a.closes, cl)
		status, n := uint8(wire.BatchStatusOK), uint32(0)
		switch {
		case a.refuse:
			status = wire.BatchStatusRefused
		case a.agg == nil || cl.Round != a.round || int(cl.Reports) != a.reports || int(cl.Accepted) != a.agg.Count():
			a.fail(fmt.Errorf("close %+v, the leader has %d reports", cl, a.reports))
			status = wire.BatchStatusInvalid
		case a.lie > 0:
			n = a.lie
		case a.agg.Count() < int(a.p.MinBatch):
			status = wire.BatchStatusInvalid
		default:
			n = uint32(a.agg.Count())
		}
		reply, _ := (&wire.SecAggCharged{Round: cl.Round, Status: status, Accepted: n}).MarshalBinary()
		answer(http.StatusOK, "accepted", reply)
	case secAggAggregatePath:
		ag, err := wire.ParseSecAggAggregate(body)
		if err != nil || a.agg == nil {
			answer(http.StatusConflict, "obsolete", nil)
			return
		}
		a.aggs = append(a.aggs, bytes.Clone(ag.Share))
		if a.result != nil {
			answer(http.StatusAlreadyReported, "duplicate", nil)
			return
		}
		own, err := a.agg.Share()
		if err == nil {
			err = own.AddNoise(noise.NewSeeded(424242))
		}
		if err == nil {
			a.result, err = a.sr.Unshard(own, ag.Share)
		}
		if err != nil {
			a.fail(err)
			answer(http.StatusBadRequest, "invalid", nil)
			return
		}
		answer(http.StatusOK, "accepted", nil)
	case "/v1/abort":
		ab, err := wire.ParseAbort(body)
		if err != nil {
			a.fail(err)
			return
		}
		a.aborts = append(a.aborts, ab)
		answer(http.StatusOK, "accepted", []byte(`{"outcome":"accepted"}`))
	default:
		http.NotFound(w, r)
	}
}

// chunkReports returns the number of reports in the chunks received.
func (a *leaderAgg) chunkReports() int {
	n := 0
	for _, c := range a.chunks {
		n += len(c.Leader)
	}
	return n
}

// postFull posts to the relay and returns the status, the outcome header
// and the body.
func (h *harness) postFull(path string, body []byte) (int, string, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://relay"+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	c := h.httpClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(OutcomeHeader), b
}

// secAggAnnouncement is a signed secure-summation announcement naming
// relayPub.
func (h *harness) secAggAnnouncement(round uint64, p wire.Params, deadline time.Duration, relayPub [32]byte) []byte {
	h.t.Helper()
	a := wire.Announcement{Round: round, Deadline: time.Now().Add(deadline), Params: p,
		HPKEPub: h.key.Public().HPKE, RelayPub: relayPub, Model: make([]float64, p.D)}
	if err := a.Sign(h.key); err != nil {
		h.t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// helperPub fetches GET /v1/helper-key with the token.
func (h *harness) helperPub() [32]byte {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://relay/v1/helper-key", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	c := h.httpClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) != 32 {
		h.t.Fatalf("helper key: HTTP %d, %d bytes", resp.StatusCode, len(b))
	}
	return [32]byte(b)
}

// volunteerShares is what a volunteer sends: the update sharded, the
// leader share sealed to the aggregator, the helper share to relayPub,
// both for sealRound (the frame says round).
func (h *harness) volunteerShares(spec *roundspec.Spec, round, sealRound uint64, relayPub [32]byte, x []float64, seed uint64) []byte {
	h.t.Helper()
	sr, err := spec.SecAggRound(sealRound)
	if err != nil {
		h.t.Fatal(err)
	}
	l, hs, err := sr.Shard(x, noise.NewSeeded(seed))
	if err != nil {
		h.t.Fatal(err)
	}
	sl, err := envelope.SealShare(h.key.Public().HPKE, sealRound, envelope.ShareLeader, [32]byte{}, l)
	if err != nil {
		h.t.Fatal(err)
	}
	sh, err := envelope.SealShare(relayPub, sealRound, envelope.ShareHelper, [32]byte{}, hs)
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := (&wire.Shares{Round: round, Leader: sl, Helper: sh}).MarshalBinary()
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// TestSecAggRound: a secure-summation round end to end against an
// aggregator that runs the real Prio3 leader. Three honest volunteers
// report; around them Shares frames of the wrong size, a replayed frame,
// a second report on one connection, a frame for another round, two
// reports whose helper share does not open (sealed for another round,
// altered) and one whose leader share does not open. Every bad frame is
// rejected and counted with its reason, the unopened helper shares are
// dropped before preparation, the bad leader share is rejected in
// preparation and the relay learns it through 'M' (a frame one byte too
// long is cut at the read limit); the aggregator unshards
// exactly the three honest updates' sum within the two servers' noise.
func TestSecAggRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p}
		h := newHarness(t, agg, "")
		defer h.close()
		spec, err := roundspec.New(p)
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := spec.SecAgg()
		pub := h.helperPub()
		if pub != h.srv.cfg.HelperKey.Public() {
			t.Fatal("GET /v1/helper-key is not the relay's key")
		}
		const round = 1
		clients := make([]*tclient, 10)
		for i := range clients {
			clients[i] = h.mustDial()
		}
		synctest.Wait()
		if st, out, body := h.postFull("/v1/rounds", h.secAggAnnouncement(round, p, time.Minute, pub)); st != http.StatusOK {
			t.Fatalf("announce: HTTP %d %s %s", st, out, body)
		}
		for _, c := range clients {
			c.announcement()
			c.send(checkIn(round))
			if a := c.ack(); a.Status != wire.AckAccepted {
				t.Fatalf("check-in: %+v", a)
			}
		}
		updates := [][]float64{
			{0.5, -0.25, 0.1, 0, 0.3, -0.4, 0.2, 0},
			{-0.1, 0.2, 0.3, -0.3, 0, 0.1, -0.2, 0.4},
			{0.25, 0.25, -0.25, 0.25, 0.1, 0, 0, -0.1},
		}
		sendOK := func(c *tclient, f []byte) {
			t.Helper()
			c.send(f)
			if a := c.ack(); a.Status != wire.AckAccepted || a.Received != 1 || a.Round != round {
				t.Fatalf("shares ack %+v", a)
			}
		}
		honest := make([][]byte, 3)
		for i, x := range updates {
			honest[i] = h.volunteerShares(spec, round, round, pub, x, uint64(100+i))
			sendOK(clients[i], honest[i])
		}
		// A second report on connection 0: rejected, the first one kept.
		clients[0].send(h.volunteerShares(spec, round, round, pub, updates[0], 200))
		if a := clients[0].ack(); a.Status != wire.AckDuplicate {
			t.Fatalf("second report: %+v", a)
		}
		if code := clients[0].closeCode(); code != websocket.ClosePolicyViolation {
			t.Fatalf("second report: close %d", code)
		}
		// A replay of volunteer 1's frame on another connection.
		clients[3].send(honest[1])
		if a := clients[3].ack(); a.Status != wire.AckDuplicate {
			t.Fatalf("replay: %+v", a)
		}
		// A Shares frame one byte short.
		clients[4].send(honest[2][:len(honest[2])-1])
		if a := clients[4].ack(); a.Status != wire.AckMalformed {
			t.Fatalf("short frame: %+v", a)
		}
		if code := clients[4].closeCode(); code != websocket.CloseInvalidFramePayloadData {
			t.Fatalf("short frame: close %d", code)
		}
		// A Shares frame one byte long: above the read limit (1009, no Ack).
		// (The relay stops reading at the limit: the write may fail.)
		_ = clients[9].ws.WriteMessage(websocket.BinaryMessage, append(bytes.Clone(honest[2]), 0))
		if code := clients[9].closeCode(); code != websocket.CloseMessageTooBig {
			t.Fatalf("long frame: close %d", code)
		}
		// A frame for another round: Ack 2, the connection stays.
		clients[5].send(h.volunteerShares(spec, round+1, round+1, pub, updates[0], 300))
		if a := clients[5].ack(); a.Status != wire.AckWrongRound {
			t.Fatalf("other round: %+v", a)
		}
		// Accepted at ingest, dropped at the close: a helper share sealed
		// for another round, and an altered one.
		sendOK(clients[6], h.volunteerShares(spec, round, round+1, pub, updates[1], 400))
		bad := h.volunteerShares(spec, round, round, pub, updates[2], 500)
		bad[len(bad)-1] ^= 1
		sendOK(clients[7], bad)
		// A leader share that does not open: forwarded, rejected by the
		// leader's preparation.
		badLead := h.volunteerShares(spec, round, round, pub, updates[2], 600)
		badLead[18+40] ^= 1
		sendOK(clients[8], badLead)

		time.Sleep(time.Minute) // the deadline, on the bubble's clock
		synctest.Wait()

		agg.mu.Lock()
		defer agg.mu.Unlock()
		if len(agg.errs) != 0 {
			t.Fatalf("aggregator errors: %v", agg.errs)
		}
		if len(agg.chunks) < 1 || agg.chunkReports() != 4 || len(agg.closes) != 1 || len(agg.aggs) != 1 || len(agg.aborts) != 0 || agg.result == nil {
			t.Fatalf("%d chunks of %d reports, %d closes, %d aggregates, %d aborts, result %v", len(agg.chunks), agg.chunkReports(),
				len(agg.closes), len(agg.aggs), len(agg.aborts), agg.result)
		}
		b := agg.closes[0]
		if b.Round != round || b.Reports != 4 || b.Accepted != 3 || b.Chunks != uint32(len(agg.chunks)) || b.CheckedIn != 10 || b.Population != 10 {
			t.Fatalf("close %+v", b)
		}
		if len(agg.rejected) != 1 || agg.rejected[3] != secagg.RejectWrongLength {
			t.Fatalf("leader's rejections %v", agg.rejected)
		}
		res := agg.result
		if res.Count != 3 || res.NoiseShares != 2 {
			t.Fatalf("result: count %d, noise shares %d", res.Count, res.NoiseShares)
		}
		// Sum of the honest updates, within the noise (each server's
		// N_Z(0, 2^2): 6 sigma of the total) and the rounding (one unit per
		// report), in model units.
		tol := (6*math.Sqrt2*p.Sigma + 3) / sp.Scale
		for i := range p.D {
			want := updates[0][i] + updates[1][i] + updates[2][i]
			got := res.Mean[i] * float64(res.Count)
			if math.Abs(got-want) > tol {
				t.Fatalf("coordinate %d: %v, want %v ± %v", i, got, want, tol)
			}
		}

		s := h.srv.Metrics()
		checkCounters(t, s)
		wantRej := map[string]uint64{ReasonDuplicate: 1, ReasonReplay: 1, ReasonMalformed: 1, ReasonWrongRound: 1, ReasonOversized: 1}
		for r, n := range s.Rejected {
			if n != wantRej[r] {
				t.Errorf("rejected %s: %d, want %d", r, n, wantRej[r])
			}
		}
		if s.Accepted["checkin"] != 10 || s.Accepted["shares"] != 6 || s.Accepted["report"] != 0 || s.ReportsComplete != 6 {
			t.Errorf("accepted %v, complete %d", s.Accepted, s.ReportsComplete)
		}
		sa := s.SecAgg
		if sa.Dropped[DropUnopened] != 2 || sa.Rejected["wrong_length"] != 1 || len(sa.Rejected) != 1 ||
			sa.Aggregated != 3 || sa.Rounds[SecAggForwarded] != 1 || sa.Attempts != uint64(len(agg.chunks)+2) || sa.Failures != 0 {
			t.Errorf("secagg metrics %+v", sa)
		}
		if s.RoundsForwarded != 1 || s.RoundsAborted != 0 || s.LastRound == nil || s.LastRound.Outcome != SecAggForwarded ||
			s.LastRound.Reports != 4 {
			t.Errorf("rounds: forwarded %d, aborted %d, last %+v", s.RoundsForwarded, s.RoundsAborted, s.LastRound)
		}
		// The round's steps at the relay, in order (make bench-scale's
		// relay-close-to-model starts at closed_at).
		if l := s.LastRound; l != nil {
			steps := []time.Time{l.FirstReportAt, l.ClosedAt, l.DrainedAt, l.ChargedAt, l.EndedAt}
			for i, at := range steps {
				if at.IsZero() || (i > 0 && at.Before(steps[i-1])) {
					t.Errorf("round steps first report, closed, drained, charged, ended: %v", steps)
					break
				}
			}
		}
		if len(s.RecentRounds) == 0 || s.RecentRounds[len(s.RecentRounds)-1] != *s.LastRound {
			t.Errorf("recent rounds %+v do not end with the last one", s.RecentRounds)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Errorf("outbox not empty: %v", l)
		}
		// The receipts (classroom.go): each honest volunteer's report is in
		// the sum, the reports dropped or rejected before it are not.
		receipt := func(f []byte) [32]byte {
			_, helper, ok := wire.SharesHelper(f)
			if !ok {
				t.Fatal("not a Shares frame")
			}
			return wire.ReportReceipt(helper)
		}
		for i, f := range honest {
			if st, why := h.srv.sa.Receipts.Lookup(round, receipt(f), round); st != ReceiptIncluded {
				t.Errorf("honest report %d: receipt %s (%s)", i, st, why)
			}
		}
		for name, f := range map[string][]byte{"altered helper share": bad, "leader share rejected": badLead} {
			if st, _ := h.srv.sa.Receipts.Lookup(round, receipt(f), round); st != ReceiptExcluded {
				t.Errorf("%s: receipt %s, want excluded", name, st)
			}
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// honestX is the update every volunteer of sendHonestSecAggRound sends.
var honestX = []float64{0.1, 0.2, 0, 0, 0, 0, 0, 0}

// sendHonestSecAggRound opens round 1 with three volunteers, each sending
// the shares of honestX, and lets the relay act on them (a minute of the
// bubble's clock, then synctest.Wait); it returns the volunteers.
func (h *harness) sendHonestSecAggRound(p wire.Params) []*tclient {
	h.t.Helper()
	spec, err := roundspec.New(p)
	if err != nil {
		h.t.Fatal(err)
	}
	pub := h.helperPub()
	clients := h.openSecAggRound(1, p, 3)
	for i, c := range clients {
		c.send(h.volunteerShares(spec, 1, 1, pub, honestX, uint64(i+1)))
		synctest.Wait() // in the stream, in the clients' order
	}
	time.Sleep(time.Minute)
	synctest.Wait()
	// The acks that came (a report is acknowledged once its chunk is
	// answered; an aggregator holding it holds them): each accepted.
	for _, c := range clients {
		select {
		case b := <-c.frames:
			if a, err := wire.ParseAck(b); err != nil || a.Status != wire.AckAccepted {
				h.t.Fatalf("shares ack %+v %v", a, err)
			}
		default:
		}
	}
	return clients
}

// openSecAggRound dials n clients, announces a secure-summation round and
// has every client check in.
func (h *harness) openSecAggRound(round uint64, p wire.Params, n int) []*tclient {
	h.t.Helper()
	clients := make([]*tclient, n)
	for i := range clients {
		clients[i] = h.mustDial()
	}
	synctest.Wait()
	if st, out, body := h.postFull("/v1/rounds", h.secAggAnnouncement(round, p, time.Minute, h.helperPub())); st != http.StatusOK {
		h.t.Fatalf("announce: HTTP %d %s %s", st, out, body)
	}
	for _, c := range clients {
		c.announcement()
		c.send(checkIn(round))
		if a := c.ack(); a.Status != wire.AckAccepted {
			h.t.Fatalf("check-in: %+v", a)
		}
	}
	return clients
}

// sendShares sends a Shares frame and expects it accepted.
func (c *tclient) sendShares(f []byte) {
	c.t.Helper()
	c.send(f)
	if a := c.ack(); a.Status != wire.AckAccepted {
		c.t.Fatalf("shares ack %+v", a)
	}
}

// TestHelperKey: the helper key is created 0600 in the state directory,
// served only with the token, kept across a restart; an announcement
// naming another key is refused (409, outcome invalid, "helper key
// mismatch") and opens nothing.
func TestHelperKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &leaderAgg{t: t, p: secAggTestParams()}, "")
		defer h.close()
		// In the relay's store (relaystore), a file only its owner reads.
		st, err := os.Stat(filepath.Join(h.dir, datastore.LogFile))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("store file: %v %v", st, err)
		}
		if _, err := os.Stat(filepath.Join(h.dir, helperkey.File)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a helper key file beside the store: %v", err)
		}
		pub := h.helperPub()
		req, _ := http.NewRequest(http.MethodGet, "http://relay/v1/helper-key", nil)
		req.Header.Set("Authorization", "Bearer wrong")
		c := h.httpClient()
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("without the token: %v %v", resp, err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()

		other := pub
		other[0] ^= 1
		code, outcome, body := h.postFull("/v1/rounds", h.secAggAnnouncement(1, secAggTestParams(), time.Minute, other))
		var ans struct {
			Round   uint64 `json:"round"`
			Outcome string `json:"outcome"`
			Detail  string `json:"detail"`
		}
		if err := json.Unmarshal(body, &ans); err != nil || code != http.StatusConflict || outcome != "invalid" ||
			ans != (struct {
				Round   uint64 `json:"round"`
				Outcome string `json:"outcome"`
				Detail  string `json:"detail"`
			}{1, "invalid", "helper key mismatch"}) {
			t.Fatalf("mismatch: HTTP %d %q %s", code, outcome, body)
		}
		if m := h.srv.Metrics(); m.RoundsOpened != 0 {
			t.Fatalf("a round opened: %+v", m)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after a refused announcement: %v", l)
		}

		h.stop()
		h.start()
		if got := h.helperPub(); got != pub {
			t.Fatal("the helper key changed across a restart")
		}
		if code, outcome, body := h.postFull("/v1/rounds", h.secAggAnnouncement(1, secAggTestParams(), time.Minute, pub)); code != http.StatusOK {
			t.Fatalf("announcement with the relay's key: HTTP %d %q %s", code, outcome, body)
		}
	})
}

// TestSecAggRoundEnds: a batch the aggregator's ledger refuses ends the
// round with nothing more sent (no aggregate share); a round left below
// MinBatch by reports whose helper share does not open is aborted
// (reason below minimum batch, with the batch's count).
func TestSecAggRoundEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, refuse: true}
		h := newHarness(t, agg, "")
		defer h.close()
		clients := h.sendHonestSecAggRound(p)
		s := h.srv.Metrics()
		agg.mu.Lock()
		nb, na := len(agg.closes), len(agg.aggs)
		agg.mu.Unlock()
		if nb != 1 || na != 0 || s.SecAgg.Rounds[SecAggRefused] != 1 || s.LastRound.Outcome != SecAggRefused ||
			s.RoundsForwarded != 0 || s.SecAgg.Aggregated != 0 {
			t.Fatalf("refused round: %d closes, %d aggregates, %+v, last %+v", nb, na, s.SecAgg, s.LastRound)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after a refused round: %v", l)
		}
		for _, c := range clients {
			c.ws.Close()
		}

		// Receipts (classroom.go): a receipt of no report the relay
		// received is unknown, not excluded (a received report of a round
		// without a sum is excluded: below).
		if st, _ := h.srv.sa.Receipts.Lookup(1, [32]byte{}, 1); st != ReceiptUnknown {
			t.Errorf("refused round, a receipt of no report: %s, want unknown", st)
		}

		spec, _ := roundspec.New(p)
		pub := h.helperPub()
		clients = h.openSecAggRound(2, p, 2)
		kept := h.volunteerShares(spec, 2, 2, pub, honestX, 10)
		clients[0].sendShares(kept)
		clients[1].sendShares(h.volunteerShares(spec, 2, 1, pub, honestX, 11)) // helper share sealed for round 1
		time.Sleep(time.Minute)
		synctest.Wait()
		agg.mu.Lock()
		nb, aborts := len(agg.closes), agg.aborts
		agg.mu.Unlock()
		if nb != 1 || len(aborts) != 1 || aborts[0].Round != 2 || aborts[0].Reason != wire.AbortBelowMinBatch ||
			aborts[0].Reports != 1 || aborts[0].CheckedIn != 2 {
			t.Fatalf("below min batch after the drop: %d closes, aborts %+v", nb, aborts)
		}
		s = h.srv.Metrics()
		checkCounters(t, s)
		if s.SecAgg.Dropped[DropUnopened] != 1 || s.RoundsAborted != 1 || s.LastRound.Outcome != "aborted" {
			t.Fatalf("metrics %+v last %+v", s.SecAgg, s.LastRound)
		}
		// The volunteer whose report was kept learns the round was cancelled, and why.
		_, helper, _ := wire.SharesHelper(kept)
		if st, why := h.srv.sa.Receipts.Lookup(2, wire.ReportReceipt(helper), 2); st != ReceiptExcluded || !strings.Contains(why, "below minimum batch") {
			t.Errorf("cancelled round: receipt %s (%q)", st, why)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// TestSecAggRestartAborts: before its close is persisted, the helper's
// state is in memory only. A relay stopped while the aggregator prepares
// a chunk sends nothing more for the round; at the next start it posts
// the round's Abort (relay restart: nothing was charged) and never
// resends the chunk.
func TestSecAggRestartAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, hold: make(chan struct{})}
		h := newHarness(t, agg, "")
		defer h.close()
		h.sendHonestSecAggRound(p) // a chunk is posted; the aggregator holds it
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 1 || l[0] != (outbox.Entry{Round: 1, Kind: outbox.OpenRound}) {
			t.Fatalf("outbox while the chunk is at the aggregator: %v", l)
		}
		h.stop()
		close(agg.hold)
		h.start()
		synctest.Wait()
		agg.mu.Lock()
		nb, nc, na, aborts := len(agg.chunks), len(agg.closes), len(agg.aggs), agg.aborts
		agg.mu.Unlock()
		if nb != 0 || nc != 0 || na != 0 || len(aborts) != 1 || aborts[0].Round != 1 || aborts[0].Reason != wire.AbortRelayRestart {
			t.Fatalf("after the restart: %d chunks, %d closes, %d aggregates, aborts %+v", nb, nc, na, aborts)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after the abort: %v", l)
		}
	})
}

// TestSecAggRestartRebuilds: the relay is stopped (as if killed) while
// the aggregator holds the answer to chunk 2, which it folded (chunks of
// 2, one at the aggregator at a time). Only chunk 1's volunteers were
// acknowledged. At the next start the relay rebuilds the round from its
// chunk records: it asks for chunks 1 and 2's verdicts again, posts no
// chunk again, and closes the round with exactly the 4 reports the
// aggregator folded, which is charged and unsharded; nothing is owed
// after.
func TestSecAggRestartRebuilds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, lose: 2}
		h := newHarness(t, agg, "")
		defer h.close()
		h.srv.sa.SetKnobs(sumrelay.Knobs{Workers: 2, ChunkReports: 2, InFlight: 1})
		spec, _ := roundspec.New(p)
		pub := h.helperPub()
		const n = 6
		clients := h.openSecAggRound(1, p, n)
		for i, c := range clients {
			c.send(h.volunteerShares(spec, 1, 1, pub, honestX, uint64(i+1)))
			synctest.Wait()
		}
		time.Sleep(time.Second) // chunk 1 answered; chunk 2 folded, its answer held
		synctest.Wait()
		accepted := 0
		for _, c := range clients[:2] {
			if a := c.ack(); a.Status == wire.AckAccepted {
				accepted++
			}
		}
		h.stop()
		for _, c := range clients[2:] {
			for b := c.next(); b != nil; b = c.next() {
				if a, err := wire.ParseAck(b); err == nil && a.Status == wire.AckAccepted {
					accepted++
				}
			}
		}
		if accepted != 2 {
			t.Fatalf("%d reports acknowledged as accepted, want the 2 of chunk 1 (the only chunk answered)", accepted)
		}
		h.start()
		time.Sleep(time.Minute)
		synctest.Wait()
		agg.mu.Lock()
		nch, closes, res, sealed := len(agg.chunks), agg.closes, agg.result, agg.sealed
		agg.mu.Unlock()
		if nch != 2 || len(closes) != 1 || closes[0].Chunks != 2 || closes[0].Reports != 4 || closes[0].Accepted != 4 {
			t.Fatalf("after the restart: %d chunks posted, closes %+v: want 2 chunks, one close of 2 chunks and 4 reports", nch, closes)
		}
		if res == nil || res.Count != 4 || sealed != 3 {
			t.Fatalf("result %+v, sealed at %d: want the 4 reports unsharded, the aggregator sealed at chunk 3", res, sealed)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after the rebuilt round: %v", l)
		}
	})
}

// TestSecAggRetries: requests without a definitive answer are resent with
// the identical bytes — a chunk, and the noised aggregate share (never a
// second, differently noised one) — and the round completes; a chunk the
// aggregator never answers is given up when it announces a later round.
func TestSecAggRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, failChunk: 2, failAgg: 2}
		h := newHarness(t, agg, "")
		defer h.close()
		clients := h.sendHonestSecAggRound(p)
		time.Sleep(time.Minute) // the backoff, on the bubble's clock
		synctest.Wait()
		agg.mu.Lock()
		bs, as, res, nch := agg.attempts[secAggChunkPath], agg.attempts[secAggAggregatePath], agg.result, len(agg.chunks)
		agg.mu.Unlock()
		if len(bs) != nch+2 || len(as) != 3 || res == nil || res.Count != 3 {
			t.Fatalf("%d chunk attempts for %d chunks, %d aggregate attempts, result %v", len(bs), nch, len(as), res)
		}
		for i := 1; i < 3; i++ {
			if !bytes.Equal(bs[i], bs[0]) || !bytes.Equal(as[i], as[0]) {
				t.Fatalf("attempt %d resent different bytes", i)
			}
		}
		s := h.srv.Metrics()
		if s.SecAgg.Attempts != uint64(nch+2+1+3) || s.SecAgg.Failures != 4 || s.SecAgg.Rounds[SecAggForwarded] != 1 {
			t.Fatalf("metrics %+v", s.SecAgg)
		}
		for _, c := range clients {
			c.ws.Close()
		}

		// The aggregator never answers round 2's chunk, then announces
		// round 3: the relay gives round 2 up.
		agg.mu.Lock()
		agg.down = true
		agg.mu.Unlock()
		spec, _ := roundspec.New(p)
		clients = h.openSecAggRound(2, p, 2)
		for i, c := range clients {
			c.send(h.volunteerShares(spec, 2, 2, h.helperPub(), honestX, uint64(i+10)))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 1 || l[0] != (outbox.Entry{Round: 2, Kind: outbox.OpenRound}) {
			t.Fatalf("outbox while round 2's chunk is unanswered: %v", l)
		}
		h.openSecAggRound(3, p, 0)
		time.Sleep(time.Minute)
		synctest.Wait()
		// Round 2's volunteers were never told their reports are in: their
		// chunk was never answered, and the round was given up.
		for _, c := range clients {
			tooLate := false
			for more := true; more; {
				select {
				case b := <-c.frames:
					if a, err := wire.ParseAck(b); err == nil {
						if a.Status == wire.AckAccepted {
							t.Fatalf("round 2's report acknowledged as accepted: %+v", a)
						}
						tooLate = tooLate || a.Status == wire.AckTooLate
					}
				default:
					more = false
				}
			}
			if !tooLate {
				t.Fatal("round 2's volunteer was not told its report is too late")
			}
		}
		s = h.srv.Metrics()
		if s.SecAgg.Rounds[SecAggSuperseded] != 1 || s.LastRound.Round != 3 {
			t.Fatalf("metrics %+v, last %+v", s.SecAgg, s.LastRound)
		}
		// Round 2 owes nothing more (no abort either); round 3, empty, was
		// aborted and delivered.
		agg.mu.Lock()
		aborts := agg.aborts
		agg.mu.Unlock()
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 || len(aborts) != 1 || aborts[0].Round != 3 {
			t.Fatalf("outbox %v, aborts %+v", l, aborts)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// TestSecAggRestartAfterCloseResumes: once the close is persisted, a relay
// restart does not abort the round: the next start re-sends the identical
// close, releases the noised aggregate share for the charged round and
// delivers it, and nothing is owed afterwards.
func TestSecAggRestartAfterCloseResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, hold: make(chan struct{}), holdPath: secAggClosePath}
		h := newHarness(t, agg, "")
		defer h.close()
		h.sendHonestSecAggRound(p) // the close is posted; the aggregator holds it
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 1 || l[0] != (outbox.Entry{Round: 1, Kind: outbox.SecAggClose}) {
			t.Fatalf("outbox while the close is at the aggregator: %v", l)
		}
		h.stop()
		close(agg.hold)
		h.start()
		synctest.Wait()
		agg.mu.Lock()
		nc, na, aborts, res, errs := len(agg.closes), len(agg.aggs), agg.aborts, agg.result, agg.errs
		closes := agg.attempts[secAggClosePath]
		agg.mu.Unlock()
		if len(errs) != 0 || nc < 1 || na != 1 || len(aborts) != 0 || res == nil || res.Count != 3 {
			t.Fatalf("after the restart: %d closes, %d aggregates, aborts %+v, result %v, errors %v", nc, na, aborts, res, errs)
		}
		for i := range closes {
			if !bytes.Equal(closes[i], closes[0]) {
				t.Fatalf("close %d re-sent different bytes", i)
			}
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after the resumed round: %v", l)
		}
		if s := h.srv.Metrics(); s.SecAgg.Rounds[SecAggForwarded] != 1 {
			t.Fatalf("metrics %+v", s.SecAgg)
		}
	})
}

// TestSecAggRestartBetweenShareAndCloseSendsOneShare: a relay killed after
// it persisted its noised aggregate share but before it removed the
// persisted close holds both at restart. It must resend the persisted
// share, byte for byte, and not resume the close: that would noise the
// round a second time, and two independently noised shares of one sum let
// the aggregator average the relay's noise down (docs/secagg.md, "Crash
// safety"; the noise ledger charges one release per round).
func TestSecAggRestartBetweenShareAndCloseSendsOneShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, hold: make(chan struct{}), holdPath: secAggClosePath}
		h := newHarness(t, agg, "")
		defer h.close()
		h.sendHonestSecAggRound(p) // the close is persisted and held at the aggregator
		closeEntry, err := h.srv.cfg.Outbox.Get(1, outbox.SecAggClose)
		if err != nil {
			t.Fatal(err)
		}
		close(agg.hold)
		synctest.Wait() // the round ends: its share is sent and its state removed
		agg.mu.Lock()
		if len(agg.aggs) != 1 || agg.result == nil {
			t.Fatalf("before the crash: %d aggregate shares, result %v", len(agg.aggs), agg.result)
		}
		share := agg.aggs[0]
		closesBefore := len(agg.attempts[secAggClosePath])
		agg.mu.Unlock()
		h.stop()
		// The state a kill between Put(aggregate) and Remove(close) leaves.
		frame, err := (&wire.SecAggAggregate{Round: 1, Share: share}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ob, err := relaystore.Open(h.dir, nil) // the stopped relay's store
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Put(1, outbox.SecAggClose, closeEntry); err != nil {
			t.Fatal(err)
		}
		if err := ob.Put(1, outbox.SecAggAggregate, frame); err != nil {
			t.Fatal(err)
		}
		ob.Close()
		h.start()
		synctest.Wait()
		agg.mu.Lock()
		aggs, closes := agg.aggs, len(agg.attempts[secAggClosePath])
		agg.mu.Unlock()
		if closes != closesBefore {
			t.Errorf("the close was posted again after the share was persisted (%d posts, %d before)", closes, closesBefore)
		}
		if len(aggs) != 2 {
			t.Fatalf("%d aggregate shares posted, want the first and its resend", len(aggs))
		}
		if !bytes.Equal(aggs[1], aggs[0]) {
			t.Fatal("a second, differently noised aggregate share left the relay")
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after the resend: %v", l)
		}
	})
}

// TestSecAggDeviatingAggregatorGetsNoShare: an aggregator that answers the
// close with another accepted count than the helper's — here fewer than
// the announced minimum batch — gets no aggregate share: the relay does
// not noise the round (issue 18: the minimum batch is checked on the
// accepted count after the verdicts, not only before preparation).
func TestSecAggDeviatingAggregatorGetsNoShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams() // MinBatch 2
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, lie: 1}
		h := newHarness(t, agg, "")
		defer h.close()
		h.sendHonestSecAggRound(p)
		agg.mu.Lock()
		nc, na := len(agg.closes), len(agg.attempts[secAggAggregatePath])
		agg.mu.Unlock()
		if nc != 1 || na != 0 {
			t.Fatalf("%d closes, %d aggregate shares sent to an aggregator that charged 1 of 3 reports", nc, na)
		}
		s := h.srv.Metrics()
		if s.SecAgg.Rounds[SecAggFailed] != 1 || s.LastRound.Outcome != SecAggFailed || s.SecAgg.Aggregated != 0 {
			t.Fatalf("metrics %+v, last %+v", s.SecAgg, s.LastRound)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox: %v", l)
		}
	})
}

// TestSecAggCopiedShareKeepsGenuine (issue 18): a volunteer's leader share
// copied into a frame of the attacker's own, which completes first, does
// not displace the genuine report: both are admitted, the copy fails
// preparation, and the genuine report is in the sum.
func TestSecAggCopiedShareKeepsGenuine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p}
		h := newHarness(t, agg, "")
		defer h.close()
		spec, _ := roundspec.New(p)
		pub := h.helperPub()
		x := []float64{0.1, 0.2, 0, 0, 0, 0, 0, 0}
		clients := h.openSecAggRound(1, p, 3)
		genuine := h.volunteerShares(spec, 1, 1, pub, x, 1)
		own := h.volunteerShares(spec, 1, 1, pub, x, 2)
		// The copy: the genuine leader share, the attacker's helper share.
		ls, err := wire.ParseShares(genuine, len(genuine)-18-h.helperLen(spec), h.helperLen(spec))
		if err != nil {
			t.Fatal(err)
		}
		ows, err := wire.ParseShares(own, len(own)-18-h.helperLen(spec), h.helperLen(spec))
		if err != nil {
			t.Fatal(err)
		}
		copyFrame, err := (&wire.Shares{Round: 1, Leader: ls.Leader, Helper: ows.Helper}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		clients[0].sendShares(copyFrame) // completes first
		clients[1].sendShares(genuine)   // admitted: not a replay of the pair
		clients[2].sendShares(h.volunteerShares(spec, 1, 1, pub, x, 3))
		time.Sleep(time.Minute)
		synctest.Wait()
		agg.mu.Lock()
		res, rej := agg.result, agg.rejected
		agg.mu.Unlock()
		if res == nil || res.Count != 2 || len(rej) != 1 || rej[0] == secagg.Accepted {
			t.Fatalf("result %+v, rejections %v: want the genuine and the third report, the copy rejected", res, rej)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// helperLen is the sealed helper share size of spec.
func (h *harness) helperLen(spec *roundspec.Spec) int {
	_, help, err := spec.SharesSizes()
	if err != nil {
		h.t.Fatal(err)
	}
	return help
}

// TestSecAggNMinusOneAttackGetsNoRelease (issue 23): a deviating
// aggregator announces a minimum batch of 1 and marks every report but the
// first invalid in its verdicts, so that the round's sum would be one
// volunteer's update plus the relay's noise. The relay's own minimum batch
// (2, set at its start) is not lowered by the announcement: no close is
// posted (nothing charged), no share leaves, and the aggregator is told
// why (AbortRelayFloor). With the relay's own minimum met (1), two of three
// reports "failing" is more than half: AbortRejected, again no close and
// no share.
func TestSecAggNMinusOneAttackGetsNoRelease(t *testing.T) {
	for _, c := range []struct {
		name   string
		floor  roundspec.Floor
		reason uint8
	}{
		{"relay floor", roundspec.Floor{MinBatch: 2, MaxRejectedShare: 0.5}, wire.AbortRelayFloor},
		{"rejected share", roundspec.Floor{MinBatch: 1, MaxRejectedShare: 0.5}, wire.AbortRejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := secAggTestParams()
				p.MinBatch = 1
				key, _ := envelopetest.DeriveKey([32]byte{7})
				agg := &leaderAgg{t: t, key: key, p: p, keep: 1}
				h := newHarness(t, agg, "", func(cfg *Config) { cfg.Floor = c.floor })
				defer h.close()
				clients := h.sendHonestSecAggRound(p)
				agg.mu.Lock()
				nc, na, aborts := len(agg.closes), len(agg.attempts[secAggAggregatePath]), agg.aborts
				agg.mu.Unlock()
				if nc != 0 || na != 0 {
					t.Fatalf("%d closes, %d aggregate shares for a round cut to 1 of 3 reports", nc, na)
				}
				if len(aborts) != 1 || aborts[0].Reason != c.reason || aborts[0].Round != 1 {
					t.Fatalf("aborts %+v, want one with reason %d", aborts, c.reason)
				}
				if s := h.srv.Metrics(); s.SecAgg.Aggregated != 0 || s.LastRound.Outcome != "aborted" {
					t.Fatalf("metrics %+v, last %+v", s.SecAgg, s.LastRound)
				}
				for _, cl := range clients {
					cl.ws.Close()
				}
			})
		})
	}
}

// TestSecAggAnnouncementWithAnotherTargetRefused (issue 23): a relay that
// agreed to (ε, δ) = (4, 1e-5) refuses, 409 invalid, a secure-summation
// announcement carrying δ = 1e-6 or no target, naming both values and the
// flag to change, and opens nothing; the matching target opens the round.
func TestSecAggAnnouncementWithAnotherTargetRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		h := newHarness(t, &leaderAgg{t: t, key: key, p: p}, "", func(cfg *Config) { cfg.TargetEpsilon, cfg.TargetDelta = 4, 1e-5 })
		defer h.close()
		post := func(eps, delta string) (int, string, string) {
			req, _ := http.NewRequest(http.MethodPost, "http://relay/v1/rounds",
				bytes.NewReader(h.secAggAnnouncement(1, p, time.Minute, h.helperPub())))
			req.Header.Set("Authorization", "Bearer "+testToken)
			if eps != "" {
				req.Header.Set(wire.TargetEpsilonHeader, eps)
			}
			if delta != "" {
				req.Header.Set(wire.TargetDeltaHeader, delta)
			}
			resp, err := h.httpClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header.Get(OutcomeHeader), string(b)
		}
		for _, bad := range [][2]string{{"4", "1e-06"}, {"", ""}, {"8", "1e-05"}, {"4", "NaN"}} {
			st, out, body := post(bad[0], bad[1])
			if st != http.StatusConflict || out != "invalid" {
				t.Fatalf("target %v: HTTP %d %s %s", bad, st, out, body)
			}
			if bad == [2]string{"4", "1e-06"} && !(strings.Contains(body, "1e-06") && strings.Contains(body, "1e-05") && strings.Contains(body, "-target-delta")) {
				t.Fatalf("the refusal does not say what differs: %s", body)
			}
		}
		if s := h.srv.Metrics(); s.RoundsOpened != 0 {
			t.Fatalf("opened %d rounds", s.RoundsOpened)
		}
		if st, out, body := post(wire.FormatTarget(4), wire.FormatTarget(1e-5)); st != http.StatusOK {
			t.Fatalf("the relay's own target: HTTP %d %s %s", st, out, body)
		}
	})
}
