package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/web"
)

// TestWebJoinCode: the class code (the key fingerprint's first four
// characters, any case) sends the phone to the join page with the code to
// check; any other code, or a relay that does not know the key yet, is a
// page that says so; /favicon.ico is the icon.
func TestWebJoinCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := pubKey(t, 1)
		w := newWebRelay(t, &keyAgg{key: k}, nil, time.Minute)
		defer w.close()
		synctest.Wait()
		code := web.JoinCodeOf(k.Fingerprint())
		noFollow := &http.Client{Transport: w.hc.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Get("http://relay/" + strings.ToUpper(code))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/#code="+code {
			t.Errorf("GET /%s: HTTP %d, Location %q", strings.ToUpper(code), resp.StatusCode, resp.Header.Get("Location"))
		}
		other := "zzzz"
		if resp, b := w.get("/"+other, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "No class with the code") {
			t.Errorf("GET /%s: HTTP %d %s", other, resp.StatusCode, b)
		}
		if resp, b := w.get("/favicon.ico", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "<svg") {
			t.Errorf("favicon: HTTP %d", resp.StatusCode)
		}
	})
}

// TestWebReceipt: GET /api/receipt answers from the book and refuses
// malformed questions.
func TestWebReceipt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWebRelay(t, &keyAgg{key: pubKey(t, 1)}, nil, time.Minute)
		defer w.close()
		synctest.Wait()
		d := sha256.Sum256([]byte("report"))
		w.srv.sa.Receipts.Include(1, d)
		w.srv.sa.Receipts.SettleSum(1)
		resp, b := w.get("/api/receipt?round=1&report="+hex.EncodeToString(d[:]), nil)
		var got struct{ State string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || got.State != ReceiptIncluded {
			t.Errorf("HTTP %d %s", resp.StatusCode, b)
		}
		for _, q := range []string{"round=1", "round=0&report=" + hex.EncodeToString(d[:]), "round=1&report=abcd"} {
			if resp, _ := w.get("/api/receipt?"+q, nil); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("?%s: HTTP %d, want 400", q, resp.StatusCode)
			}
		}
	})
}

// predictorAgg serves /api/key, /api/status, /api/model (round 2, the
// given features, every guess 3) and, when task is set, /api/task.
type predictorAgg struct {
	statusAgg
	features int
	task     []byte
	models   int
}

func (a *predictorAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/model":
		a.mu.Lock()
		a.models++
		a.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"round": 2, "features": a.features, "classes": 10, "params": predictorParams(a.features)})
	case "/api/task":
		if a.task == nil {
			http.NotFound(w, r)
			return
		}
		w.Write(a.task)
	default:
		a.statusAgg.ServeHTTP(w, r)
	}
}

// predictorParams is a model of f features whose every guess is 3 (the
// bias of digit 3) and whose weights are distinct numbers.
func predictorParams(f int) []float64 {
	params := make([]float64, 10*f+10)
	for i := range 10 * f {
		params[i] = float64(i%97) / 1000
	}
	params[10*f+3] = 100
	return params
}

// TestWebPredictor: GET /api/predictor is the aggregator's model, readable
// from the dashboard's origin, fetched again only when the model changes:
// for a model over the pixels (an aggregator without /api/task, or a task
// without a feature map) folded into raw-pixel weights; for the digits
// task (scatter1) the model's own parameters, not folded, with the map's
// name and the public standardization of the mapped features the
// aggregator evaluates with (task.FitPrep on the embedded training part).
func TestWebPredictor(t *testing.T) {
	digits, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := sample.TrainTest()
	if err != nil {
		t.Fatal(err)
	}
	prep, err := digits.FitPrep(train)
	if err != nil {
		t.Fatal(err)
	}
	def, err := json.Marshal(digits)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		task     []byte
		features int
		folded   bool
	}{{"no task", nil, 784, true}, {"digits", def, 833, false}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				agg := &predictorAgg{statusAgg: statusAgg{keyAgg: keyAgg{key: pubKey(t, 1)},
					status: `{"round": 2, "rounds_ok": 2, "accuracy": 0.5, "params": {"protocol": "secagg"}}`}, features: c.features, task: c.task}
				w := newWebRelay(t, agg, nil, time.Minute)
				defer w.close()
				synctest.Wait()
				var p web.Predictor
				for range 3 {
					resp, b := w.get("/api/predictor", nil)
					if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
						t.Fatalf("HTTP %d %s", resp.StatusCode, b)
					}
					if err := json.Unmarshal(b, &p); err != nil {
						t.Fatal(err)
					}
					time.Sleep(2 * time.Second)
				}
				f := c.features
				if p.Round != 2 || p.RoundsOK != 2 || p.Features != f || p.Classes != 10 || p.Inputs != 784 || len(p.Weights) != 10*f || len(p.Bias) != 10 || p.Folded != c.folded {
					t.Fatalf("predictor: round %d, ok %d, %d inputs, %dx%d, %d weights, %d biases, folded %v", p.Round, p.RoundsOK, p.Inputs, p.Features, p.Classes, len(p.Weights), len(p.Bias), p.Folded)
				}
				params := predictorParams(f)
				if c.folded {
					best := 0
					for k := range p.Bias {
						if p.Bias[k] > p.Bias[best] {
							best = k
						}
					}
					if best != 3 || p.FeatureMap != "identity" || p.Mean != nil {
						t.Errorf("the folded model guesses %d (map %q, %d means), want 3", best, p.FeatureMap, len(p.Mean))
					}
				} else {
					for i, v := range p.Weights {
						if v != float32(params[i]) {
							t.Fatalf("weight %d: %v, the model's %v", i, v, params[i])
						}
					}
					if p.FeatureMap != "scatter1" || !slices.Equal(p.Bias, params[10*f:]) ||
						!slices.Equal(p.Mean, prep.Z.Mean) || !slices.Equal(p.Std, prep.Z.Std) {
						t.Errorf("map %q, bias %v, %d means, %d stds: not the model and the public standardization", p.FeatureMap, p.Bias, len(p.Mean), len(p.Std))
					}
				}
				if agg.models != 1 {
					t.Errorf("%d model fetches for an unchanged model, want 1", agg.models)
				}
				resp, _ := w.get("/api/predictor", nil)
				if etag := resp.Header.Get("ETag"); etag == "" {
					t.Error("no ETag")
				} else if again, b := w.get("/api/predictor", map[string]string{"If-None-Match": etag}); again.StatusCode != http.StatusNotModified || len(b) != 0 {
					t.Errorf("revalidating an unchanged model: HTTP %d, %d bytes", again.StatusCode, len(b))
				}
				_, b := w.get("/api/round", nil)
				var info RoundInfo
				if json.Unmarshal(b, &info) != nil || info.Protocol != "secagg" || info.Accuracy == nil || *info.Accuracy != 0.5 || info.RoundsOK != 2 {
					t.Errorf("round info: %s", b)
				}
			})
		})
	}
}

// taskAgg serves /api/key, /api/status and /api/task (body; "" is 404).
type taskAgg struct {
	statusAgg
	body  string
	tasks int
}

func (a *taskAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/task" {
		a.mu.Lock()
		a.tasks++
		body := a.body
		a.mu.Unlock()
		if body == "" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
		return
	}
	a.statusAgg.ServeHTTP(w, r)
}

// TestWebTask: GET /api/task is the aggregator's task definition, checked
// and cached (one fetch per taskTTL); an invalid definition or none is a
// 503, never passed on.
func TestWebTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		def, err := os.ReadFile("../../../tasks/class-survey/task.json")
		if err != nil {
			t.Fatal(err)
		}
		agg := &taskAgg{statusAgg: statusAgg{keyAgg: keyAgg{key: pubKey(t, 1)}, status: `{"round": 0}`}, body: string(def)}
		w := newWebRelay(t, agg, nil, time.Minute)
		defer w.close()
		synctest.Wait()
		for range 3 {
			resp, b := w.get("/api/task", nil)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("HTTP %d %s", resp.StatusCode, b)
			}
			tk, err := task.Parse(b)
			if err != nil {
				t.Fatalf("served definition: %v", err)
			}
			if tk.Name != "class-survey" || tk.Source != task.SourceForm || len(tk.Features) != 4 {
				t.Fatalf("served %s %s with %d features", tk.Name, tk.Source, len(tk.Features))
			}
		}
		if agg.tasks != 1 {
			t.Errorf("%d task fetches within %v, want 1", agg.tasks, taskTTL)
		}
		agg.mu.Lock()
		agg.body = `{"version": 1, "name": "x"}`
		agg.mu.Unlock()
		time.Sleep(taskTTL + time.Second)
		if resp, b := w.get("/api/task", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("an invalid definition: HTTP %d %s, want 503", resp.StatusCode, b)
		}
		agg.mu.Lock()
		agg.body = ""
		agg.mu.Unlock()
		if resp, b := w.get("/api/task", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("no task: HTTP %d %s, want 503", resp.StatusCode, b)
		}
	})
}
