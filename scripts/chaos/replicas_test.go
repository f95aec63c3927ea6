package chaos

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/invariant"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/scripts/internal/replicas"
	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/wire"
)

// skipOrFail skips t for a missing tool, or fails it when
// BLANKET_REQUIRE_POSTGRES=1 (CI) requires the tier.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("BLANKET_REQUIRE_POSTGRES") == "1" {
		t.Fatalf("replicas tier: %s; BLANKET_REQUIRE_POSTGRES=1 requires it", why)
	}
	t.Skipf("replicas tier skipped: %s", why)
}

// hasFlag reports whether bin's usage (bin args... -h) mentions flag.
func hasFlag(bin, flag string, args ...string) bool {
	out, _ := exec.Command(bin, append(args, "-h")...).CombinedOutput()
	return bytes.Contains(out, []byte("-"+flag+" ")) || bytes.Contains(out, []byte("-"+flag+"\n"))
}

// replicaRounds reads the aggregator's round history through its
// frontend (-1: no answer).
func replicaRounds(ctx context.Context, base string) (int, []localrun.Round) {
	var r struct {
		Rounds []localrun.Round `json:"rounds"`
	}
	if getJSON(ctx, base+"/api/rounds", &r) != nil {
		return -1, nil
	}
	n := 0
	for _, x := range r.Rounds {
		if x.Status == "ok" {
			n++
		}
	}
	return n, r.Rounds
}

func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// anchorOf is party's GET /v1/anchor through its frontend: its own
// ledger's head and the peer's head it holds.
func anchorOf(base, token string) (*wire.Anchor, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/v1/anchor", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/v1/anchor: %s: %s", base, resp.Status, strings.TrimSpace(string(b)))
	}
	return wire.ParseAnchor(b)
}

func headString(h wire.Head) string {
	return fmt.Sprintf("%d records, %s…", h.Count, hex.EncodeToString(h.Hash[:6]))
}

// anchorLines are the servers' words for a ledger rollback or a head
// that went back (relay/internal/anchor, relay/internal/server/anchor.go,
// aggregator/internal/server/anchor.go): none may appear.
var anchorLines = regexp.MustCompile(`state rollback detected|ledger head went back|noise ledger went back|is behind the head`)

// checkedLine is a server's log line when its ledger was checked against
// the head its peer holds: the relay's at every start as an active
// server, the aggregator's only after it could not check at its start
// (uncheckedLine; a check that passes at once is silent, and one that
// finds a rollback refuses the start: aggregator/internal/server
// openAnchor).
var (
	checkedLine   = regexp.MustCompile(`^((?:relay|aggregator)-[ab])\| .*(?:noise ledger checked against the aggregator's copy of its head|ledger checked against the head the relay holds)`)
	uncheckedLine = regexp.MustCompile(`^(aggregator-[ab])\| .*cannot check the ledger against the relay yet`)
	// preparedLine is a standby's line when it takes over: the jobs it
	// prepared for the active one while it waited (-prep-jobs): the
	// aggregator's chunks, the relay's reports (the helper's PrepInit).
	preparedLine = regexp.MustCompile(`^(relay|aggregator)-[ab]\| .*the standby stopped preparing (?:chunks|reports).* jobs=(\d+)`)
)

// watchLog passes the servers' lines to invariant.Logs (the relay's
// reports per round) and keeps the anchor lines and when each replica's
// ledger was checked.
type watchLog struct {
	logs      *invariant.Logs
	mu        sync.Mutex
	anchor    []string
	checked   map[string][]time.Time
	unchecked map[string][]time.Time
	prepared  map[string][]int // by party: jobs each standby that took over had prepared
}

func (w *watchLog) Write(p []byte) (int, error) {
	w.logs.Write(p) // whole lines: replicas.lineWriter
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if anchorLines.MatchString(l) {
			w.anchor = append(w.anchor, l)
		}
		if w.checked == nil {
			w.checked, w.unchecked = map[string][]time.Time{}, map[string][]time.Time{}
		}
		if m := checkedLine.FindStringSubmatch(l); m != nil {
			w.checked[m[1]] = append(w.checked[m[1]], time.Now())
		}
		if m := uncheckedLine.FindStringSubmatch(l); m != nil {
			w.unchecked[m[1]] = append(w.unchecked[m[1]], time.Now())
		}
		if m := preparedLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			if w.prepared == nil {
				w.prepared = map[string][]int{}
			}
			w.prepared[m[1]] = append(w.prepared[m[1]], n)
		}
	}
	return len(p), nil
}

// checkedSince reports whether replica's ledger was checked against the
// head its peer holds since t: a relay logs it; an aggregator that
// started is checked unless it logged that it could not check, and then
// it must log the check after that.
func (w *watchLog) checkedSince(replica string, p replicas.Party, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := func(ts []time.Time) (time.Time, bool) {
		var l time.Time
		for _, c := range ts {
			if !c.Before(t) {
				l = c
			}
		}
		return l, !l.IsZero()
	}
	checked, ok := last(w.checked[replica])
	if p == replicas.Relay {
		return ok
	}
	unchecked, warned := last(w.unchecked[replica])
	return !warned || ok && !checked.Before(unchecked)
}

// relayMetric is the active relay's /api/metrics field group.name (a
// number: accepted.shares, the volunteers' reports accepted;
// secagg.answered, the reports in chunks the aggregator answered), through
// the relay's frontend (-1: unreadable).
func relayMetric(base, group, name string) float64 {
	var m map[string]json.RawMessage
	if getJSON(context.Background(), base+"/api/metrics", &m) != nil {
		return -1
	}
	var fields map[string]json.RawMessage
	var n float64
	if json.Unmarshal(m[group], &fields) != nil || json.Unmarshal(fields[name], &n) != nil {
		return -1
	}
	return n
}

// waitRise waits until read rises above its first readable value
// (failing the test with what after within), calling guard at each look.
func waitRise(t *testing.T, guard func(), read func() float64, within time.Duration, what string) {
	t.Helper()
	base := read()
	for end := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		guard()
		if n := read(); base >= 0 && n > base {
			return
		} else if base < 0 {
			base = n
		}
		if time.Now().After(end) {
			t.Fatalf("%s within %v", what, within)
		}
	}
}

// TestReplicasFailover (issue 26, deliverables 2 and 3) runs secure
// summation with both parties replicated in the active/standby form
// (scripts/internal/replicas): one throwaway PostgreSQL holding both
// parties' state (one schema each), relay A and aggregator A active,
// relay B and aggregator B hot standbys (-standby) on the same schemas,
// each with its own empty state directory, and HAProxy before each party
// sending traffic to whichever replica listens; the volunteers, the
// relay's -aggregator and the aggregator's -relay go through HAProxy.
//
// The volunteers' websockets go to two edge relays (relay -edge-of, behind
// the relay's frontend's /ws), which hand their reports to the active
// relay. Mid-round (once the relay has accepted reports of a round), it
// kills an edge, then the active relay (SIGKILL), then the active
// aggregator, then restarts
// PostgreSQL (pg_ctl restart -m fast), then kills both actives at once; a
// killed replica is started again as a standby by its supervisor, so each
// party always has two (and the last fault's takeovers are by the
// replicas killed first). The active relay is killed once a chunk of the
// round was answered (some of its reports acknowledged), so its standby
// finishes that round (docs/secagg.md, "A relay lost mid-round"). After
// each fault a round must complete ok, and
// a round numbered after the one the fault hit (begun by the servers
// active after it); at the end: no charged round lost, none recorded
// twice, every ok round holds the reports the relay acknowledged, no
// report a volunteer was told is in (an accepted Ack) is lost
// (invariant.CheckAcked over the volunteers' own count), ε never
// decreased (on /api/status and per round), the ledgers' anchors hold
// (each party holds the other's current head, every takeover checked its
// ledger against it, no rollback reported, both ready), each kill was
// followed by exactly one takeover (by the other replica of the killed
// party; a party not killed unchanged), never two replicas of a party
// listening at once (this fails the test as soon as it is seen), and
// exactly one replica of each party listens while the other waits as a
// standby.
//
// It prints the timeline: starts, kills, takeovers (when a standby began
// listening), rounds ok. About 100 s besides the build with the edge's
// fault: 102 s on 2 cores at a load average of 1.1 (nice -n 10 go test
// -count=1 -run TestReplicasFailover -v ./scripts/chaos/).
func TestReplicasFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos tier: real binaries, PostgreSQL and HAProxy")
	}
	haproxy, err := replicas.Check()
	if err != nil {
		skipOrFail(t, err.Error())
	}
	if _, err := pgtest.Check(); err != nil {
		skipOrFail(t, "PostgreSQL: "+err.Error())
	}
	const (
		clients      = 24
		roundTimeout = 15 * time.Second
		grace        = 20 * time.Second
		warmup       = 5 * time.Second // the relay's default -warmup
		standbyGrace = 3 * time.Second // -standby-grace (the servers' default)
	)
	if !hasFlag(bins.Relay, "standby") || !hasFlag(bins.Aggregator, "standby", "serve") {
		t.Fatal("the relay or the aggregator has no -standby flag: hot standby is what this test checks")
	}
	start := time.Now()

	pg, err := pgtest.StartCluster()
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	t.Cleanup(func() { pg.Close() })
	t.Logf("PostgreSQL: %s", pg.How)
	// Schemas of their own, dropped at the end (BLANKET_PG_DSN's server
	// may be shared).
	suffix := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	relaySchema, aggSchema := "replicas_relay_"+suffix, "replicas_aggregator_"+suffix
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.Connect(ctx, pg.DSN); err == nil {
			for _, s := range []string{relaySchema, aggSchema} {
				conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
			}
			conn.Close(ctx)
		}
	})

	logs := &invariant.Logs{}
	if testing.Verbose() {
		logs.Echo = os.Stderr
	}
	wl := &watchLog{logs: logs}
	n := strconv.Itoa(clients)
	aggArgs := []string{"-protocol", "secagg", "-sigma", "23000", "-expected-n", n, "-quota", n, "-min-batch", "10", "-epsilon", "1e9",
		"-check-in", "1", "-round-timeout", roundTimeout.String(), "-batch-grace", grace.String(), "-standby-grace", standbyGrace.String(),
		// The standby prepares the active one's chunks while it waits
		// (leased jobs), which leaves them to it for a second.
		"-prep-jobs", "-prep-lease", "3s", "-prep-help-after", "1s"}
	d, err := replicas.Start(context.Background(), replicas.Config{Bins: bins, Dir: t.TempDir(), HAProxy: haproxy, Edges: 2,
		Store: pg.DSN, RelaySchema: relaySchema, AggregatorSchema: aggSchema,
		AggregatorArgs: aggArgs,
		// What the relay must agree on with the aggregator (as
		// localrun's relayAgreed passes it).
		RelayArgs: []string{"-target-epsilon", "1e9", "-min-batch", "10", "-standby-grace", standbyGrace.String(),
			// The relay's standby does the helper's PrepInit of the
			// active one's reports while it waits, as the aggregator's.
			"-prep-jobs", "-prep-lease", "3s", "-prep-help-after", "1s"},
		Log: wl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range d.Replicas {
				t.Logf("%s's last output:\n%s", r.Name, r.Output())
			}
		}
	})
	t.Cleanup(func() { logTimeline(t, d, start) })

	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, d.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var sums []cohort.RoundSummary // the volunteers' view, once they stopped
	wg.Go(func() {
		sums, _ = cohort.Run(ctx, cohort.Config{Relay: d.WebSocketURL(), Key: key, Clients: clients, PerUser: 8000 / clients,
			Dataset: sample.Name, Seed: 3, SeededNoise: true, Backoff: client.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
			Logger: slog.New(slog.DiscardHandler)})
	})
	// ε on /api/status (through the aggregator's frontend), and every
	// new ok round into the timeline.
	watch := &invariant.EpsilonWatch{}
	overlaps := map[replicas.Party]int{}
	var ovMu sync.Mutex
	wg.Go(func() {
		seen := map[int]bool{}
		for ctx.Err() == nil {
			var st localrun.Status
			if getJSON(ctx, d.AggregatorURL()+"/api/status", &st) == nil {
				watch.Observe(st.Epsilon, st.Round, time.Now())
			}
			if _, rs := replicaRounds(ctx, d.AggregatorURL()); rs != nil {
				for _, r := range rs {
					if r.Status == "ok" && !seen[r.Round] {
						seen[r.Round] = true
						d.Record("", fmt.Sprintf("round %d ok (n=%d)", r.Round, r.N))
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	})
	// Two replicas of a party listening at once: both would take traffic.
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, p := range []replicas.Party{replicas.Relay, replicas.Aggregator} {
				if _, k := d.Active(p); k > 1 {
					ovMu.Lock()
					if overlaps[p]++; overlaps[p] == 1 {
						d.Record("", fmt.Sprintf("both %s replicas listening", p))
					}
					ovMu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	// guard fails the test at once when two replicas of a party listen
	// (every wait below calls it): nothing after would mean much.
	guard := func() {
		t.Helper()
		ovMu.Lock()
		defer ovMu.Unlock()
		for p, k := range overlaps {
			if k > 0 {
				t.Fatalf("both %s replicas listen at once (see the timeline)", p)
			}
		}
	}

	// The volunteers map their digits before connecting (the digits
	// task's feature map): the faults start once they are in.
	for end := time.Now().Add(5 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		var info struct {
			Volunteers int `json:"volunteers"`
		}
		guard()
		if getJSON(ctx, d.RelayURL()+"/api/round", &info) == nil && info.Volunteers >= clients {
			d.Record("", fmt.Sprintf("%d volunteers connected", info.Volunteers))
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d volunteers connected after 5m", info.Volunteers, clients)
		}
	}
	waitReplicasOK(t, d, guard, 0, 4*roundTimeout, "first round")
	// A fault's deadline: the round it hit times out, the batch grace,
	// the takeover (standby grace, a process start, HAProxy's checks),
	// the relay's warm-up, and a whole round after that.
	recoverWithin := 3*roundTimeout + grace + warmup + standbyGrace + 10*time.Second

	type fault struct {
		name string
		kill []replicas.Party // the parties whose active is killed (none: PostgreSQL restarts)
	}
	faults := []fault{
		// An edge holding volunteers' websockets: its volunteers reconnect
		// to the other edge, the relay gives its counts up, and the
		// round completes with the reports it had handed over.
		{"SIGKILL an edge relay", []replicas.Party{replicas.Edge}},
		{"SIGKILL the active relay", []replicas.Party{replicas.Relay}},
		{"SIGKILL the active aggregator", []replicas.Party{replicas.Aggregator}},
		{"restart PostgreSQL (pg_ctl restart -m fast)", nil},
		// Both at once, each taken over by the replica killed before
		// (restarted as a standby), neither knowing the other's.
		{"SIGKILL both actives at once", []replicas.Party{replicas.Relay, replicas.Aggregator}},
	}
	type window struct {
		at      time.Time
		killed  map[replicas.Party]*replicas.Replica
		actives map[replicas.Party]*replicas.Replica
		round   int // the round being collected at the fault
		firstOK int // the first round ok after it
		freshOK int // the first round after round ok
	}
	var windows []window
	for i, f := range faults {
		if f.kill == nil && !pg.Owned() {
			t.Logf("fault %d (%s) not made: the server of BLANKET_PG_DSN is not the test's to restart", i+1, f.name)
			continue
		}
		before, _ := replicaRounds(context.Background(), d.AggregatorURL())
		if before < 0 {
			t.Fatalf("fault %d: the aggregator's frontend does not answer", i+1)
		}
		// Mid-round: once the active relay has accepted a volunteer's
		// report of the round being collected.
		waitRise(t, guard, func() float64 { return relayMetric(d.RelayURL(), "accepted", "shares") }, 2*recoverWithin,
			fmt.Sprintf("fault %d (%s): no report was accepted", i+1, f.name))
		// A relay killed once a chunk of the round was answered (its
		// reports acknowledged): the standby must finish the round with
		// them (docs/secagg.md, "A relay lost mid-round").
		if slices.Contains(f.kill, replicas.Relay) {
			waitRise(t, guard, func() float64 { return relayMetric(d.RelayURL(), "secagg", "answered") }, 2*recoverWithin,
				fmt.Sprintf("fault %d (%s): no chunk was answered", i+1, f.name))
		}
		w := window{actives: map[replicas.Party]*replicas.Replica{}, killed: map[replicas.Party]*replicas.Replica{}}
		for _, p := range []replicas.Party{replicas.Relay, replicas.Aggregator} {
			a, k := d.Active(p)
			if k != 1 {
				t.Fatalf("fault %d: %d %s replicas listen before it", i+1, k, p)
			}
			w.actives[p] = a
		}
		// The round being collected: a round after it must complete too
		// (one begun by the new active, not only the one it resumed).
		var st struct {
			Round     int `json:"round"`      // the last finished
			OpenRound int `json:"open_round"` // the announced round awaiting its batch
		}
		if err := getJSON(context.Background(), d.AggregatorURL()+"/api/status", &st); err != nil {
			t.Fatalf("fault %d: %v", i+1, err)
		}
		w.round = max(st.OpenRound, st.Round+1)
		w.at = time.Now()
		d.Record("", fmt.Sprintf("fault %d: %s, in round %d (ok rounds so far %d)", i+1, f.name, w.round, before))
		for _, p := range f.kill {
			w.killed[p] = w.actives[p]
			if p == replicas.Edge {
				w.killed[p] = d.Party(replicas.Edge)[0]
			}
			if err := w.killed[p].Kill(); err != nil {
				t.Fatal(err)
			}
		}
		if f.kill == nil {
			if err := pg.Restart(); err != nil {
				t.Fatal(err)
			}
			d.Record("", "PostgreSQL restarted")
		}
		windows = append(windows, w)
		waitReplicasOK(t, d, guard, before, recoverWithin, fmt.Sprintf("after fault %d (%s)", i+1, f.name))
		_, rs := replicaRounds(context.Background(), d.AggregatorURL())
		for _, r := range rs {
			if r.Status == "ok" {
				before--
				if before < 0 {
					windows[len(windows)-1].firstOK = r.Round
					break
				}
			}
		}
		windows[len(windows)-1].freshOK = waitRoundAfter(t, d, guard, w.round, recoverWithin, fmt.Sprintf("after fault %d (%s)", i+1, f.name))
		// Two processes per party again (the killed one restarted as a
		// standby) before the next fault.
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			all := true
			for _, r := range d.Replicas {
				all = all && r.Running()
			}
			if all {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("after fault %d: not every replica runs again", i+1)
			}
		}
	}
	cancel()
	wg.Wait()
	if _, rs := replicaRounds(context.Background(), d.AggregatorURL()); len(rs) > 0 {
		r := rs[len(rs)-1]
		d.Record("", fmt.Sprintf("volunteers stopped; last round %d %s (n=%d)", r.Round, r.Status, r.N))
	}
	// The end state is read once the volunteers are gone: a round
	// completing meanwhile moves the heads.
	time.Sleep(time.Second)

	// Rounds: none charged and lost, none twice, every ok round's reports
	// as the relay acknowledged, ε growing.
	if dec := watch.Decreases(); len(dec) > 0 {
		t.Errorf("epsilon decreased on /api/status: %v", dec)
	}
	okN, rs := replicaRounds(context.Background(), d.AggregatorURL())
	reports, padded := logs.RelayRounds()
	res := invariant.CheckRounds(rs, reports, padded)
	for _, v := range res.Violations {
		t.Error(v)
	}
	for _, msg := range res.Lost {
		t.Error("a charged secure-summation round was lost: " + msg)
	}
	// No acknowledged report lost, whichever replica was killed: the
	// volunteers' accepted acks per round against the rounds recorded.
	acked := ackedByRound(sums)
	for _, v := range invariant.CheckAcked(rs, acked, 10) { // -min-batch 10
		t.Error(v)
	}
	for _, w := range windows {
		if r := w.round; acked[r] > 0 {
			status := "not recorded"
			for _, x := range rs {
				if x.Round == r {
					status = fmt.Sprintf("%s (n=%d, %s)", x.Status, x.N, x.Detail)
				}
			}
			t.Logf("round %d (hit by a fault): %d reports acknowledged, ended %s", r, acked[r], status)
		}
	}

	// Takeovers: per fault, who began listening until the next fault.
	events := d.Events()
	for i, w := range windows {
		end := time.Now()
		if i+1 < len(windows) {
			end = windows[i+1].at
		}
		began := map[replicas.Party][]string{}
		for _, e := range events {
			if e.What != "began listening" || e.At.Before(w.at) || !e.At.Before(end) {
				continue
			}
			for _, r := range d.Replicas {
				if r.Name == e.Replica {
					began[r.Party] = append(began[r.Party], r.Name)
					t.Logf("fault %d: takeover: %s began listening %.2f s after the fault", i+1, r.Name, e.At.Sub(w.at).Seconds())
				}
			}
		}
		t.Logf("fault %d (in round %d): began listening after it: relay %v, aggregator %v; first ok round after it: %d; first later round ok: %d",
			i+1, w.round, began[replicas.Relay], began[replicas.Aggregator], w.firstOK, w.freshOK)
		for _, p := range []replicas.Party{replicas.Relay, replicas.Aggregator} {
			k, killed := w.killed[p]
			switch {
			case killed && (len(began[p]) != 1 || began[p][0] == k.Name):
				t.Errorf("fault %d (%s killed): %s takeovers %v, want exactly one, by the other replica", i+1, k.Name, p, began[p])
			case !killed && len(w.killed) > 0 && len(began[p]) != 0:
				t.Errorf("fault %d: the %s, not killed, changed hands: %v", i+1, p, began[p])
			}
		}
		for p, names := range began {
			if p == replicas.Edge {
				continue // an edge restarts as itself: no ledger, no takeover
			}
			if len(names) > 1 {
				t.Errorf("fault %d: %s took over %d times: %v", i+1, p, len(names), names)
			}
			// Every replica that began listening checked its ledger
			// against the head its peer holds.
			for _, name := range names {
				if !wl.checkedSince(name, p, w.at) {
					t.Errorf("fault %d: %s began listening but never checked its ledger against the head its peer holds", i+1, name)
				}
			}
		}
	}
	// Each party's standby prepared the active one's jobs while it waited
	// (-prep-jobs): the one that took over says how many.
	for _, p := range []string{"relay", "aggregator"} {
		wl.mu.Lock()
		prepared := slices.Clone(wl.prepared[p])
		wl.mu.Unlock()
		if len(prepared) == 0 || slices.Max(prepared) == 0 {
			t.Errorf("no %s standby that took over had prepared a job while it waited (jobs %v)", p, prepared)
		}
		t.Logf("jobs prepared by each %s standby before it took over: %v", p, prepared)
	}
	ovMu.Lock()
	for p, k := range overlaps {
		if k > 0 {
			t.Errorf("both %s replicas were listening at once (%d polls of 100 ms)", p, k)
		}
	}
	ovMu.Unlock()
	// Exactly one replica of each party listens; the other runs and
	// waits as a standby.
	for _, p := range []replicas.Party{replicas.Relay, replicas.Aggregator} {
		a, k := d.Active(p)
		if k != 1 {
			t.Errorf("%d %s replicas listen at the end, want 1", k, p)
			continue
		}
		for _, r := range d.Party(p) {
			if r != a && !r.Running() {
				t.Errorf("%s's standby %s does not run at the end", p, r.Name)
			}
		}
		t.Logf("at the end: %s active (started %d times)", a.Name, a.Starts())
	}

	// Anchors: no rollback reported; each party holds the other's current
	// head (exchanged every second); both ready (ledgers not suspended).
	wl.mu.Lock()
	for _, l := range wl.anchor {
		t.Error("anchor: " + l)
	}
	wl.mu.Unlock()
	var ra, aa *wire.Anchor
	var aerr error
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		ra, aerr = anchorOf(d.RelayURL(), d.Token())
		if aerr == nil {
			aa, aerr = anchorOf(d.AggregatorURL(), d.Token())
		}
		if aerr == nil && ra.Held == aa.Own && aa.Held == ra.Own {
			break
		}
		if time.Now().After(end) {
			if aerr != nil {
				t.Errorf("anchor: %v", aerr)
			} else {
				t.Errorf("anchor: the relay's noise ledger %s, the aggregator holds %s; the aggregator's ledger %s, the relay holds %s",
					headString(ra.Own), headString(aa.Held), headString(aa.Own), headString(ra.Held))
			}
			break
		}
	}
	if aerr == nil {
		t.Logf("anchors: relay's noise ledger %s, aggregator's ledger %s, each held by the other", headString(ra.Own), headString(aa.Own))
		if ra.Own.Count == 0 || aa.Own.Count == 0 {
			t.Error("anchor: a ledger holds no record after the ok rounds")
		}
	}
	for _, p := range []replicas.Party{replicas.Relay, replicas.Aggregator} {
		if err := waitReady(d.FrontendURL(p), 20*time.Second); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}

	if t.Failed() {
		logBadRounds(t, logs, rs)
	}
	t.Logf("%d faults with replicas: %d rounds, %d ok, in %v", len(windows), len(rs), okN, time.Since(start).Round(time.Second))
	for _, r := range rs {
		eps := "-"
		if r.EpsilonTightest != nil {
			eps = fmt.Sprintf("%.6g (%s)", *r.EpsilonTightest, r.Method)
		}
		t.Logf("round %d: %s n=%d epsilon %s %s", r.Round, r.Status, r.N, eps, r.Detail)
	}
}

// waitReplicasOK waits until more than before rounds are ok, or fails
// (as guard may).
func waitReplicasOK(t *testing.T, d *replicas.Deployment, guard func(), before int, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		guard()
		n, rs := replicaRounds(context.Background(), d.AggregatorURL())
		if n > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no round completed within %v (ok rounds %d): %+v", what, within, before, rs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitRoundAfter waits until a round numbered above round is ok and
// returns its number, or fails (as guard may).
func waitRoundAfter(t *testing.T, d *replicas.Deployment, guard func(), round int, within time.Duration, what string) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		guard()
		_, rs := replicaRounds(context.Background(), d.AggregatorURL())
		for _, r := range rs {
			if r.Round > round && r.Status == "ok" {
				return r.Round
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no round after round %d completed within %v: %+v", what, round, within, rs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitReady waits until base's /readyz answers 200.
func waitReady(base string, within time.Duration) error {
	var last string
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			last = err.Error()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = resp.Status + ": " + strings.TrimSpace(string(b))
	}
	return fmt.Errorf("not ready after %v: %s", within, last)
}

// logTimeline prints the deployment's timeline, in seconds from start.
func logTimeline(t *testing.T, d *replicas.Deployment, start time.Time) {
	t.Log("timeline (s from the start):")
	for _, e := range d.Events() {
		who := e.Replica
		if who == "" {
			who = "test"
		}
		t.Logf("  %7.2f %-13s %s", e.At.Sub(start).Seconds(), who, e.What)
	}
}

// ackedByRound is the volunteers' accepted acks of their reports (a
// secure-summation report is one Shares frame), by round
// (cohort.RoundSummary.ReportAcks).
func ackedByRound(sums []cohort.RoundSummary) map[int]int {
	out := make(map[int]int, len(sums))
	for _, s := range sums {
		out[int(s.Round)] += s.ReportAcks
	}
	return out
}
