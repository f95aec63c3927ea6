package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
)

// percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0 for no values.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// memSample is one reading of a process's resident set (bytes) at an
// elapsed time.
type memSample struct {
	at  time.Duration
	rss int64
}

// slope fits rss = a + b·t by least squares and returns b in bytes per
// minute (0 for fewer than two samples or a single instant).
func slope(ss []memSample) float64 {
	if len(ss) < 2 {
		return 0
	}
	var mt, mr float64
	for _, s := range ss {
		mt += s.at.Minutes()
		mr += float64(s.rss)
	}
	n := float64(len(ss))
	mt, mr = mt/n, mr/n
	var sxy, sxx float64
	for _, s := range ss {
		dt := s.at.Minutes() - mt
		sxy += dt * (float64(s.rss) - mr)
		sxx += dt * dt
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// stalls checks that rounds kept completing: every stretch of the run
// without a completed round, measured from the latest of the start, the
// previous completion and the last restart of a killed server (a kill
// resets the clock at its restart) to the next completion or the end, must
// be at most bound; the stretch from the start at most first. Times are
// elapsed since the start; completions and restarts need not be sorted. It
// returns one message per stretch longer than its bound.
func stalls(completions, restarts []time.Duration, end, first, bound time.Duration) []string {
	type ev struct {
		at      time.Duration
		restart bool
	}
	var evs []ev
	for _, c := range completions {
		evs = append(evs, ev{c, false})
	}
	for _, r := range restarts {
		evs = append(evs, ev{r, true})
	}
	slices.SortStableFunc(evs, func(x, y ev) int { return cmp.Compare(x.at, y.at) })
	var out []string
	ref, refWhat, b := time.Duration(0), "the start", first
	for _, e := range evs {
		if !e.restart && e.at-ref > b {
			out = append(out, fmt.Sprintf("no round completed for %v after %s at %v (bound %v)", (e.at-ref).Round(time.Second), refWhat, fmtElapsed(ref), b))
		}
		ref, refWhat, b = e.at, "a completed round", bound
		if e.restart {
			refWhat = "a restart"
		}
	}
	if end-ref > b {
		out = append(out, fmt.Sprintf("no round completed for %v after %s at %v until the end (bound %v)", (end-ref).Round(time.Second), refWhat, fmtElapsed(ref), b))
	}
	return out
}

// ackedLost checks the volunteers' own count of acknowledged reports
// against the aggregator's rounds: every report a volunteer saw fully
// acknowledged in a round that completed ok must be in that round's
// aggregate (acked <= n; fewer acks than reports is a volunteer that
// dropped before reading its last ack). A round interrupted by a relay
// restart is aborted as a whole, so acknowledged reports of rounds that
// did not complete are counted in dropped, not lost.
func ackedLost(rs []localrun.Round, acked map[int]int) (violations []string, dropped int) {
	ok := map[int]int{}
	for _, r := range rs {
		if r.Status == "ok" {
			ok[r.Round] = r.N
		}
	}
	for _, round := range slices.Sorted(maps.Keys(acked)) {
		n, isOK := ok[round]
		switch {
		case !isOK:
			dropped += acked[round]
		case acked[round] > n:
			violations = append(violations, fmt.Sprintf("round %d: volunteers saw %d reports acknowledged, the aggregator aggregated %d", round, acked[round], n))
		}
	}
	return violations, dropped
}

// fmtElapsed prints d as m:ss.
func fmtElapsed(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// fmtMs prints a latency in milliseconds ("-" for none).
func fmtMs(d time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// mib prints bytes in MiB ("-" for a process that is down).
func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}
