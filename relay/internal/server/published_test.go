package server

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The relay serves anyone who can reach it; the aggregator (the adversary
// of docs/privacy.md) is one of them. Its view of a round must stay the
// batch: so everything the relay publishes is either fixed by the binary
// and the keys, or one of the fields below, each of which the aggregator's
// view already holds or which depends on how many volunteers connect and
// send, never on what they send. A new route or field fails
// TestPublishedRoutesAllowListed or TestPublishedFieldsAllowListed until it
// is added here with its reason.

// Sources of a published field.
const (
	fromBatch      = "the batch header or abort the aggregator receives (reports, check-ins, population, n_p, messages)"
	fromAggregator = "the aggregator's own announcements, answers and status"
	fromTransport  = "counts of frames, connections and deliveries: how many volunteers connect and send, never their values or dimension indices"
	fromReplicas   = "how many reports the helper prepared as jobs and here: the count of reports the aggregator's chunks carry, split by the relay's own deployment (-prep-jobs, its replicas' speed), never by what a report holds"
	fromTiming     = "when a step of the round happened, which the aggregator sees as it happens (the batch or close arriving, the first and last chunk, its own answers): it depends on when volunteers send, never on what"
)

// publishedRoutes is every route of the relay's mux and what it answers.
var publishedRoutes = map[string]string{
	"GET /ws":               "the volunteer's own websocket: the aggregator's announcements and acks of the volunteer's own frames",
	"POST /v1/rounds":       "takes the aggregator's announcement (bearer token); answers a status code",
	"GET /v1/helper-key":    "the relay's public secure-summation key (bearer token)",
	"GET /v1/anchor":        "the noise ledger's head and the aggregator's ledger head the relay holds (bearer token; wire.Anchor): counts and hashes, no values",
	"POST /v1/anchor":       "records the aggregator's ledger head (bearer token; wire.Anchor); answers as GET",
	"GET /healthz":          "a constant",
	"GET /readyz":           "whether the relay's store takes writes, its noise ledger is not suspended, and it has the aggregator's key and reaches the aggregator: the relay's own state and the aggregator's",
	"GET /metrics":          "Prometheus text: publishedSeries, with label values from publishedLabels",
	"GET /api/metrics":      "JSON: publishedFields[\"api/metrics\"]",
	"GET /{$}":              "the join page: the aggregator's key fingerprint and the wasm module's hash",
	"GET /static/":          "assets embedded in the binary",
	"GET /blanket.wasm":     "the wasm module",
	"GET /api/wasm":         "the wasm module's hash and size",
	"GET /api/key":          "the aggregator's public key as the relay fetched it",
	"GET /api/round":        "JSON: publishedFields[\"api/round\"]",
	"GET /digits.idx.gz":    "sample digits embedded in the binary",
	"GET /labels.idx.gz":    "sample labels embedded in the binary",
	"GET /standardizer.bin": "the standardizer of the embedded digits",
	"GET /{code}":           "the join page for the short join code (a prefix of the aggregator key's fingerprint)",
	"GET /favicon.ico":      "an icon embedded in the binary",
	"GET /api/receipt":      "whether the report with this receipt (a hash only its volunteer and the relay know) went into a round's sum: the aggregator's own verdict on it",
	"GET /api/predictor":    "the public model after the latest round, as the aggregator publishes it",
	"GET /api/task":         "the study's public definition (title, consent, features, classes): " + fromAggregator,
}

// publishedFields lists, per JSON document, every field path (maps: "*")
// and where the aggregator already has it.
var publishedFields = map[string]map[string]string{
	"api/metrics": {
		"received":                   fromTransport,
		"accepted.*":                 fromTransport,
		"rejected.*":                 fromTransport,
		"reports_complete":           fromBatch,
		"partial_discarded":          fromTransport,
		"timeouts":                   fromTransport,
		"connections":                fromTransport,
		"connections_total":          fromTransport,
		"origin_rejected":            fromTransport,
		"rounds_opened":              fromAggregator,
		"rounds_forwarded":           fromBatch,
		"rounds_aborted":             fromBatch,
		"send_attempts":              fromTransport,
		"send_failures":              fromTransport,
		"delivered.*":                fromAggregator,
		"pending":                    fromTransport,
		"last_round.round":           fromBatch,
		"last_round.outcome":         fromAggregator,
		"last_round.reason":          fromBatch,
		"last_round.population":      fromBatch,
		"last_round.checked_in":      fromBatch,
		"last_round.check_in_rate":   fromBatch,
		"last_round.reports":         fromBatch,
		"last_round.target_np":       fromAggregator,
		"last_round.realized_np":     fromBatch,
		"last_round.raised":          fromBatch,
		"last_round.messages":        fromBatch,
		"large_frames.slots":         "the relay's configuration",
		"large_frames.waits":         fromTransport,
		"large_frames.wait_seconds":  fromTiming,
		"large_frames.max_held":      fromTransport,
		"last_round.first_report_at": fromTiming,
		"last_round.closed_at":       fromTiming,
		"last_round.drained_at":      fromTiming,
		"last_round.charged_at":      fromTiming,
		"last_round.ended_at":        fromTiming,
		"recent_rounds":              "the last rounds' reports: each a RoundReport, the type of last_round, whose every field is allow-listed above",
		"secagg.rounds.*":            fromAggregator,
		"secagg.dropped.*":           fromTransport,
		"secagg.rejected.*":          fromAggregator,
		"secagg.aggregated":          fromAggregator,
		"secagg.answered":            fromAggregator, // the reports of the chunks it answered
		"secagg.closes_persisted":    fromAggregator, // the closes it receives
		"secagg.shares_persisted":    fromAggregator, // the aggregate shares it receives
		"secagg.attempts":            fromTransport,
		"secagg.failures":            fromTransport,
		"secagg.prepared.*":          fromReplicas,
		"secagg.prep_jobs_completed": fromReplicas,
		// The store's work: counts of commits and bytes written for the
		// frames the relay received and the rounds it ran.
		"datastore.commits":       fromTransport,
		"datastore.fsyncs":        fromTransport,
		"datastore.bytes_written": fromTransport,
		"datastore.compactions":   fromTransport,
		"datastore.log_size":      fromTransport,
	},
	"api/round": {
		"reachable":  fromAggregator,
		"round":      fromAggregator,
		"open_round": fromAggregator,
		"deadline":   fromAggregator,
		"paused":     fromAggregator,
		"stopped":    fromAggregator,
		"volunteers": fromTransport,
		"now":        "the relay's clock",
		// The class's progress, copied from the aggregator's public /api/status.
		"accuracy":             fromAggregator,
		"accuracy_source":      fromAggregator,
		"rounds_ok":            fromAggregator,
		"epsilon":              fromAggregator,
		"target_epsilon":       fromAggregator,
		"protocol":             fromAggregator,
		"model_resets":         fromAggregator,
		"last_abort.round":     fromAggregator,
		"last_abort.reason":    fromAggregator,
		"last_abort.received":  fromAggregator,
		"last_abort.min_batch": fromAggregator,
		"last_abort.timeout":   fromAggregator,
	},
}

// publishedSeries lists every Prometheus series family of GET /metrics
// (without the prefix blanket_relay_) and where the aggregator already
// has it: each is a field of api/metrics above. The Go runtime's and the
// process's series (memory, CPU, GC) are not served there: they follow
// the relay's work, dummies included, and are only on the operator's
// -ops-listen (relay/internal/metrics.Registry).
var publishedSeries = map[string]string{
	"frames_received_total":               fromTransport,
	"frames_accepted_total":               fromTransport,
	"frames_rejected_total":               fromTransport,
	"reports_complete_total":              fromBatch,
	"reports_partial_discarded_total":     fromTransport,
	"connection_timeouts_total":           fromTransport,
	"connections":                         fromTransport,
	"connections_total":                   fromTransport,
	"origin_rejected_total":               fromTransport,
	"rounds_opened_total":                 fromAggregator,
	"rounds_forwarded_total":              fromBatch,
	"rounds_aborted_total":                fromBatch,
	"send_attempts_total":                 fromTransport,
	"send_failures_total":                 fromTransport,
	"delivered_total":                     fromAggregator,
	"outbox_pending":                      fromTransport,
	"last_round":                          fromBatch,
	"last_round_population":               fromBatch,
	"last_round_checked_in":               fromBatch,
	"last_round_reports":                  fromBatch,
	"last_round_closed_timestamp_seconds": fromTiming,
	"secagg_rounds_total":                 fromAggregator,
	"secagg_reports_dropped_total":        fromTransport,
	"secagg_reports_rejected_total":       fromAggregator,
	"secagg_reports_aggregated_total":     fromAggregator,
	"secagg_reports_answered_total":       fromAggregator,
	"secagg_closes_persisted_total":       fromAggregator,
	"secagg_shares_persisted_total":       fromAggregator,
	"secagg_requests_total":               fromTransport,
	"secagg_request_failures_total":       fromTransport,
	"secagg_reports_prepared_total":       fromReplicas,
	"prep_jobs_completed_total":           fromReplicas,
	"large_frame_slots":                   "the relay's configuration",
	"large_frame_waits_total":             fromTransport,
	"large_frame_wait_seconds_total":      fromTiming,
	"large_frames_held_max":               fromTransport,
	"datastore_commits_total":             fromTransport,
	"datastore_fsyncs_total":              fromTransport,
	"datastore_written_bytes_total":       fromTransport,
	"datastore_compactions_total":         fromTransport,
	"datastore_log_size_bytes":            fromTransport,
}

// publishedLabels lists, per label name, every value a series may carry:
// fixed lists of the binary (frame kinds, rejection reasons, delivery and
// round outcomes, drop reasons, secure-summation rejection reasons), so
// that no label value can carry anything a volunteer sent.
func publishedLabels() map[string]map[string]bool {
	set := func(vs ...string) map[string]bool {
		m := map[string]bool{}
		for _, v := range vs {
			m[v] = true
		}
		return m
	}
	reason := set(append(slices.Clone(reasons), DropUnopened, DropLate)...)
	for r := secagg.Accepted + 1; !strings.HasPrefix(r.String(), "reason("); r++ {
		reason[strings.ReplaceAll(r.String(), " ", "_")] = true
	}
	outcome := set(sumrelay.Outcomes...)
	for o := outbox.Accepted; !strings.HasPrefix(o.String(), "outcome("); o++ {
		outcome[o.String()] = true
	}
	return map[string]map[string]bool{"kind": set("checkin", "report", "shares"), "reason": reason, "outcome": outcome, "where": set("apart", "here")}
}

// TestPublishedSeriesAllowListed: every family the relay's collector
// exposes is allow-listed with its source, and no allow-listed one is
// gone; none is a padding statistic.
func TestPublishedSeriesAllowListed(t *testing.T) {
	got := map[string]bool{}
	for _, s := range metrics.SeriesNames() {
		got[s] = true
		if publishedSeries[s] == "" {
			t.Errorf("series %s%s is published but not allow-listed: is it in the aggregator's view?", metrics.Prefix, s)
		}
		if strings.Contains(s, "dumm") || strings.Contains(s, "overflow") || strings.Contains(s, "truncat") {
			t.Errorf("padding statistic %q is published", s)
		}
	}
	for s := range publishedSeries {
		if !got[s] {
			t.Errorf("allow-listed series %q is gone: remove it", s)
		}
	}
}

// checkSeries parses a GET /metrics answer and checks every family and
// every label value against publishedSeries and publishedLabels.
func checkSeries(t *testing.T, body []byte) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET /metrics is not the Prometheus text format: %v", err)
	}
	labels := publishedLabels()
	for name, fam := range fams {
		short, ok := strings.CutPrefix(name, metrics.Prefix)
		if !ok || publishedSeries[short] == "" {
			t.Errorf("GET /metrics serves %s, not allow-listed", name)
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if !labels[l.GetName()][l.GetValue()] {
					t.Errorf("%s{%s=%q}: label value not in the fixed lists", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	// A labelled family with no value yet (no secure-summation rejection)
	// is not served; the others always are.
	if len(fams) < 30 || fams[metrics.Prefix+"frames_received_total"] == nil || fams[metrics.Prefix+"datastore_commits_total"] == nil {
		t.Errorf("GET /metrics serves only %d families", len(fams))
	}
}

// publishedTypes are the Go types of the JSON documents.
var publishedTypes = map[string]reflect.Type{
	"api/metrics": reflect.TypeFor[Snapshot](),
	"api/round":   reflect.TypeFor[RoundInfo](),
}

// jsonPaths returns the JSON field paths of type t (maps as "*", pointers
// followed; time.Time is a leaf).
func jsonPaths(t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		out[prefix] = true
	case t.Kind() == reflect.Map:
		jsonPaths(t.Elem(), join(prefix, "*"), out)
	case t.Kind() == reflect.Struct:
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			jsonPaths(f.Type, join(prefix, name), out)
		}
	default:
		out[prefix] = true
	}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// TestPublishedRoutesAllowListed: the relay's mux is exactly its route
// table, and every route of the table is allow-listed with what it
// publishes (and no allow-listed route is gone).
func TestPublishedRoutesAllowListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &fakeAgg{}, "")
		defer h.close()
		var got []string
		for _, r := range h.srv.routes() {
			got = append(got, r.pattern)
			if publishedRoutes[r.pattern] == "" {
				t.Errorf("route %q is served but not in publishedRoutes: say what it publishes", r.pattern)
			}
		}
		if want := slices.Sorted(maps.Keys(publishedRoutes)); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Errorf("routes %v, allow-listed %v", slices.Sorted(slices.Values(got)), want)
		}
		// The mux the relay serves is the table: every pattern routes to
		// a handler (a method or path outside it is a 404 or 405).
		mux := h.srv.mux()
		for _, r := range h.srv.routes() {
			method, path, _ := strings.Cut(r.pattern, " ")
			path = strings.TrimSuffix(path, "{$}")
			req, _ := http.NewRequest(method, path, nil)
			if _, pat := mux.Handler(req); pat != r.pattern {
				t.Errorf("%s %s routes to %q", method, path, pat)
			}
		}
		// One path segment is a join code (GET /{code} answers 404 itself
		// for a wrong one); two are no route.
		req, _ := http.NewRequest(http.MethodGet, "/not/a-route", nil)
		if _, pat := mux.Handler(req); pat != "" && pat != "GET /{$}" {
			t.Errorf("/not-a-route routes to %q", pat)
		}
	})
}

// TestPublishedFieldsAllowListed: every JSON field the relay serves (GET
// /metrics with its last round and secure-summation counters, GET
// /api/round) is allow-listed with its source, and none of the padding
// statistics (dummies, truncated dimensions) is among them.
func TestPublishedFieldsAllowListed(t *testing.T) {
	for doc, typ := range publishedTypes {
		paths := map[string]bool{}
		jsonPaths(typ, "", paths)
		allowed := publishedFields[doc]
		for p := range paths {
			if allowed[p] == "" {
				t.Errorf("%s: field %q is published but not allow-listed: is it in the aggregator's view?", doc, p)
			}
		}
		for p := range allowed {
			if !paths[p] {
				t.Errorf("%s: allow-listed field %q is gone: remove it", doc, p)
			}
		}
		for p := range paths {
			if strings.Contains(p, "dumm") || strings.Contains(p, "overflow") || strings.Contains(p, "truncat") {
				t.Errorf("%s: padding statistic %q is published", doc, p)
			}
		}
	}
}

// liveKeys checks every key of a decoded JSON document against allowed.
func liveKeys(t *testing.T, doc string, v any, prefix string, allowed map[string]string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		if allowed[prefix] == "" {
			t.Errorf("%s: %q served, not allow-listed", doc, prefix)
		}
		return
	}
	for k, sub := range m {
		p := join(prefix, k)
		if _, isMap := allowed[join(prefix, "*")]; isMap {
			p = join(prefix, "*")
		}
		liveKeys(t, doc, sub, p, allowed)
	}
}

// TestMetricsSameForNeighbours: two SS-Topk rounds whose volunteers differ
// only in their top-k index sets (one with three volunteers on dimensions
// 0 and 1 at n_p = 2, which truncates both dimensions; one with disjoint
// sets, which truncates nothing) pad with different numbers of dummies,
// yet every byte the relay publishes about them, GET /metrics (every
// Prometheus series and label value allow-listed), GET /api/metrics and
// GET /api/round, is the same, and every key served is allow-listed. (The
// relay used to publish the dummy count and the truncated dimensions.)
func TestMetricsSameForNeighbours(t *testing.T) {
	p := wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace,
		D: 8, K: 2, L: 1, Width: 1, NP: 2, MinBatch: 2, Quota: 3, EpsL: 2, Clip: 1, CheckInP: 1}
	run := func(idx [][]uint32) (docs map[string][]byte, real int) {
		synctest.Test(t, func(t *testing.T) {
			agg := &fakeAgg{}
			h := newHarness(t, agg, "")
			defer h.close()
			clients := make([]*tclient, len(idx))
			for i := range clients {
				clients[i] = h.mustDial()
			}
			synctest.Wait()
			if st := h.announce(1, p, time.Minute); st != http.StatusOK {
				t.Fatalf("announce: HTTP %d", st)
			}
			for i, c := range clients {
				c.announcement()
				h.participate(c, 1, p, idx[i], 0.25)
			}
			synctest.Wait()
			batches, _ := agg.snapshot()
			if len(batches) != 1 {
				t.Fatalf("%d batches", len(batches))
			}
			b, err := wire.ParseBatch(batches[0], p)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range b.Messages {
				if v, err := h.key.OpenValues(1, m.Sealed, nil); err == nil && v[0] == 0.25 {
					real++
				}
			}
			docs = map[string][]byte{}
			resp, err := h.httpClient().Get("http://relay/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			checkSeries(t, body)
			docs["metrics"] = body
			for doc := range publishedTypes {
				resp, err := h.httpClient().Get("http://relay/" + doc)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Fatalf("%s: %v", doc, err)
				}
				liveKeys(t, doc, v, "", publishedFields[doc])
				docs[doc] = body
			}
			for _, c := range clients {
				c.ws.Close()
			}
		})
		return docs, real
	}
	a, realA := run([][]uint32{{0, 1}, {0, 1}, {0, 1}})
	b, realB := run([][]uint32{{0, 1}, {2, 3}, {4, 5}})
	if realA != 4 || realB != 6 {
		t.Fatalf("real messages kept %d and %d, want 4 (truncated) and 6: the rounds do not differ in padding", realA, realB)
	}
	for doc := range a {
		if !bytes.Equal(a[doc], b[doc]) {
			t.Errorf("%s differs between neighbouring rounds:\n%s\n%s", doc, a[doc], b[doc])
		}
	}
}
