// Package invariant holds what must survive a crash of the relay or the
// aggregator, as the chaos tier (scripts/chaos) and the soak (scripts/soak)
// check it on a local deployment (scripts/internal/localrun): the relay's
// own count of complete reports per round, read from its log; ε on the
// aggregator's /api/status, watched for decreases; and the checks of the
// aggregator's round history against both.
package invariant

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
)

// Logs is the writer both servers' log output goes to (localrun.Options
// Stdout and Stderr). It parses every complete line as it arrives and
// keeps only what the checks need, so a long run does not accumulate its
// logs; Echo, if set, receives everything written.
type Logs struct {
	Echo io.Writer

	mu      sync.Mutex
	partial []byte
	reports map[int]int      // round -> complete reports at the relay's close
	padded  map[int]int      // round -> batches persisted (padded)
	byRound map[int][]string // round -> its log lines (at most maxRoundLines each)
}

// maxRoundLines bounds the lines Logs keeps per round for RoundLines.
const maxRoundLines = 200

var (
	reClosed    = regexp.MustCompile(`msg="round closed" round=(\d+) .*reports=(\d+)`)
	rePersisted = regexp.MustCompile(`msg="batch persisted" round=(\d+) `)
	reRound     = regexp.MustCompile(` round=(\d+)\b`)
)

// Write records the relay's "round closed" and "batch persisted" lines.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Echo != nil {
		l.Echo.Write(p)
	}
	if l.reports == nil {
		l.reports, l.padded, l.byRound = map[int]int{}, map[int]int{}, map[int][]string{}
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// line parses one log line; l.mu is held. A later "round closed" line for
// the same round (after a restart) replaces the earlier count.
func (l *Logs) line(b []byte) {
	if m := reClosed.FindSubmatch(b); m != nil {
		r, _ := strconv.Atoi(string(m[1]))
		n, _ := strconv.Atoi(string(m[2]))
		l.reports[r] = n
	}
	if m := rePersisted.FindSubmatch(b); m != nil {
		r, _ := strconv.Atoi(string(m[1]))
		l.padded[r]++
	}
	if m := reRound.FindSubmatch(b); m != nil {
		r, _ := strconv.Atoi(string(m[1]))
		if len(l.byRound[r]) < maxRoundLines {
			l.byRound[r] = append(l.byRound[r], string(b))
		}
	}
}

// RoundLines returns the log lines (both servers) that name round r, in
// the order written: what a failing chaos test prints about a round.
func (l *Logs) RoundLines(r int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.byRound[r]...)
}

// RelayRounds returns the relay's complete reports per closed round and how
// many times it persisted (padded) a batch per round, from its logs.
func (l *Logs) RelayRounds() (reports map[int]int, padded map[int]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	reports, padded = make(map[int]int, len(l.reports)), make(map[int]int, len(l.padded))
	for r, n := range l.reports {
		reports[r] = n
	}
	for r, n := range l.padded {
		padded[r] = n
	}
	return reports, padded
}

// EpsilonWatch records every ε the aggregator's /api/status shows and
// every decrease among them (the ledger under-counting across a restart).
type EpsilonWatch struct {
	mu       sync.Mutex
	max      float64
	last     float64
	lastOK   time.Time
	decrease []string
}

// Run polls /api/status every 200 ms until ctx ends; failed requests (a
// server down) are skipped.
func (w *EpsilonWatch) Run(ctx context.Context, cl *localrun.Cluster) {
	for ctx.Err() == nil {
		var st localrun.Status
		if err := cl.GetJSON(ctx, "/api/status", &st); err == nil {
			w.Observe(st.Epsilon, st.Round, time.Now())
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Observe records one ε read at round round.
func (w *EpsilonWatch) Observe(eps float64, round int, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if eps < w.max {
		w.decrease = append(w.decrease, fmt.Sprintf("epsilon %v after %v (round %d)", eps, w.max, round))
	}
	w.max = max(w.max, eps)
	w.last, w.lastOK = eps, at
}

// Decreases lists every decrease seen (empty: ε never decreased).
func (w *EpsilonWatch) Decreases() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.decrease...)
}

// Last is the latest ε seen and when (zero time: none yet).
func (w *EpsilonWatch) Last() (float64, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.lastOK
}

// OKRounds returns how many of the aggregator's rounds are ok and its whole
// round history, or -1 when the aggregator does not answer.
func OKRounds(ctx context.Context, cl *localrun.Cluster) (int, []localrun.Round) {
	rs, err := cl.Rounds(ctx)
	if err != nil {
		return -1, nil
	}
	n := 0
	for _, r := range rs {
		if r.Status == "ok" {
			n++
		}
	}
	return n, rs
}

// Result is what CheckRounds found: Violations break an invariant; Lost
// are rounds the aggregator records as lost (killed between charging the
// round and checkpointing it), which the chaos tier treats as a known gap
// unless run strictly.
type Result struct {
	Violations []string
	Lost       []string
}

// CheckRounds checks the aggregator's round history rs (in round order)
// against the relay's log (reports: complete reports per closed round;
// padded: batches persisted per round): no round is recorded twice, every
// ok round holds exactly the reports the relay acknowledged for it (no
// acknowledged report lost outside aborted or abandoned rounds), ε
// (epsilon_tightest) grows with every ok round, and the relay padded each
// round at most once (a restart resends the persisted batch).
func CheckRounds(rs []localrun.Round, reports, padded map[int]int) Result {
	var res Result
	seen := map[int]bool{}
	prev := 0.0
	for _, r := range rs {
		if seen[r.Round] {
			res.Violations = append(res.Violations, fmt.Sprintf("round %d recorded twice", r.Round))
		}
		seen[r.Round] = true
		if r.Status == "lost" {
			// The aggregator was killed between charging the round and
			// checkpointing it: charged (the ledger does not under-count)
			// but its acknowledged reports never reach the model, although
			// the relay resends the identical batch (answered obsolete).
			res.Lost = append(res.Lost, fmt.Sprintf("round %d lost: %d acknowledged reports charged but not applied (%s)", r.Round, r.N, r.Detail))
		}
		if r.Status != "ok" {
			continue
		}
		if got, ok := reports[r.Round]; ok && got != r.N {
			res.Violations = append(res.Violations, fmt.Sprintf("round %d: the relay acknowledged %d complete reports, the aggregator aggregated %d", r.Round, got, r.N))
		}
		if r.EpsilonTightest == nil || *r.EpsilonTightest <= prev {
			eps := "none"
			if r.EpsilonTightest != nil {
				eps = strconv.FormatFloat(*r.EpsilonTightest, 'g', -1, 64)
			}
			res.Violations = append(res.Violations, fmt.Sprintf("round %d: epsilon %s does not grow from %v", r.Round, eps, prev))
		} else {
			prev = *r.EpsilonTightest
		}
	}
	for _, r := range slices.Sorted(maps.Keys(padded)) {
		if n := padded[r]; n > 1 {
			res.Violations = append(res.Violations, fmt.Sprintf("round %d padded %d times", r, n))
		}
	}
	return res
}

// CheckAcked checks that no report a volunteer was told is in (an Ack
// accepted: acked, by round, as the volunteers counted them) was lost: an
// ok round holds at least the reports acknowledged for it, and a round
// that ended otherwise had fewer acknowledged than minBatch (it could not
// have been released: the minimum batch, not a fault, kept them out). A
// round the volunteers acknowledged but the aggregator never recorded is
// checked as not ok, unless it is the last one (still open at the end).
func CheckAcked(rs []localrun.Round, acked map[int]int, minBatch int) []string {
	byRound := make(map[int]localrun.Round, len(rs))
	last := 0
	for _, r := range rs {
		byRound[r.Round] = r
		last = max(last, r.Round)
	}
	var out []string
	for _, num := range slices.Sorted(maps.Keys(acked)) {
		n := acked[num]
		r, ok := byRound[num]
		switch {
		case n == 0:
		case ok && r.Status == "ok":
			if held := max(r.Reports, r.N); n > held {
				out = append(out, fmt.Sprintf("round %d: %d reports acknowledged, the round holds %d", num, n, held))
			}
		case !ok && num > last:
			// Still open when the volunteers stopped.
		case n >= minBatch:
			status := "never recorded"
			if ok {
				status = r.Status + " (" + r.Detail + ")"
			}
			out = append(out, fmt.Sprintf("round %d: %d reports acknowledged, at least the minimum batch %d, and the round ended %s: acknowledged reports lost", num, n, minBatch, status))
		}
	}
	return out
}
