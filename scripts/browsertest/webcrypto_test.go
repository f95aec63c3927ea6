package browsertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/roundspec"
)

// sealPageHTML loads the wasm program named by ?wasm= with Go's
// wasm_exec.js. With ?nowebcrypto=1 it first hides WebCrypto's X25519
// (generateKey rejects it, as in a browser that lacks it), so the program
// falls back to the Go primitives (webhpke.SealGo: crypto/ecdh, crypto/hkdf,
// AES-GCM under the same RFC 9180 schedule). With ?test=1 the program is a Go test binary:
// it runs with -test.v, its output lines collect in globalThis.testOutput
// and its exit code lands in globalThis.testExit.
// testConsent stands for a study's consent hash (task.ConsentHash) in the
// share-sealing tests.
var testConsent = sha256.Sum256([]byte("the browser tests' consent text"))

const sealPageHTML = `<!doctype html><meta charset="utf-8"><title>seal</title>
<script src="/wasm_exec.js"></script>
<script>
(async () => {
	const q = new URLSearchParams(location.search);
	if (q.get("test")) {
		const out = [], log = console.log.bind(console);
		globalThis.testOutput = out;
		console.log = (...a) => { out.push(a.join(" ")); log(...a); };
	}
	if (q.get("nowebcrypto")) {
		const s = crypto.subtle, gen = s.generateKey.bind(s);
		s.generateKey = (alg, ...rest) => (alg && alg.name === "X25519")
			? Promise.reject(new DOMException("X25519 hidden by the test", "NotSupportedError"))
			: gen(alg, ...rest);
	}
	const go = new Go();
	if (q.get("test")) {
		go.argv = ["webhpke.test", "-test.v"];
		go.exit = (code) => { globalThis.testExit = code; };
	}
	const r = await WebAssembly.instantiateStreaming(fetch("/" + q.get("wasm")), go.importObject);
	go.run(r.instance);
})().catch((e) => { globalThis.loadError = String(e); });
</script>`

// sealServer serves the seal page, wasm_exec.js and the wasm programs
// (name -> path) on the loopback interface.
func sealServer(t *testing.T, wasms map[string]string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	execJS, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/page.html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(sealPageHTML))
	})
	mux.HandleFunc("/wasm_exec.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write(execJS)
	})
	for name, path := range wasms {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/wasm")
			http.ServeFile(w, r, path)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// buildPageWasm builds the js/wasm program ./internal/<pkg> of the
// browsertest module under root (this tree, or an exported older one).
func buildPageWasm(t *testing.T, root, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), pkg+".wasm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./internal/"+pkg)
	cmd.Dir = filepath.Join(root, "scripts", "browsertest")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=js GOARCH=wasm go build ./internal/%s in %s: %v\n%s", pkg, root, err, b)
	}
	return out
}

// openSealPage opens the seal page on the wasm program name and waits
// until it has set globalThis[global].
func openSealPage(t *testing.T, b *browser, base, name, wasm, global string, noWebCrypto bool) *tab {
	t.Helper()
	u := base + "/page.html?wasm=" + wasm
	if noWebCrypto {
		u += "&nowebcrypto=1"
	}
	tb := b.open(t, name, u)
	if err := waitFor(tb, "globalThis."+global, "String(globalThis.loadError)", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return tb
}

// call evaluates expr, a promise, in the tab (brought to the front, so no
// background throttling) and decodes its value.
func call[T any](tb *tab, expr string, timeout time.Duration) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.BringToFront, cdp.Empty{}); err != nil {
		return zero, fmt.Errorf("%s: bring to front: %w", tb.name, err)
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return zero, fmt.Errorf("%s: %.80s: %w", tb.name, expr, err)
	}
	return v, nil
}

func jsArgs(args ...any) string {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), "["), "]")
}

// TestWebCryptoSeal seals in headless Chromium and opens natively, and the
// reverse. A page runs shared/envelope compiled to wasm
// (internal/sealpage): it must seal with the browser's WebCrypto, and what
// it seals (width-1 messages, leader and helper shares) must open with the
// native openers (crypto/hpke: envelopetest, which agrees with the
// aggregator's sealkey and the relay's helperkey), under the right round
// and role only. A second page hides WebCrypto's X25519: it must fall back
// to the Go primitives (webhpke.SealGo), and its output must open natively
// too. Natively sealed
// messages and shares must open in the page with WebCrypto
// (envelope/webhpke.Open).
func TestWebCryptoSeal(t *testing.T) {
	exe := chromiumPath(t)
	root := repoRoot(t)
	wasm := buildPageWasm(t, root, "sealpage")
	base := sealServer(t, map[string]string{"sealpage.wasm": wasm})
	b := newBrowser(t, context.Background(), exe)

	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		t.Fatal(err)
	}
	k, err := envelopetest.DeriveKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public().HPKE
	helperRaw := make([]byte, 32)
	if _, err := rand.Read(helperRaw); err != nil {
		t.Fatal(err)
	}
	h, err := envelopetest.UnmarshalHelperKey(helperRaw)
	if err != nil {
		t.Fatal(err)
	}
	const round = 0x0102030405
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, math.SmallestNonzeroFloat64, -math.MaxFloat64, 1e-300, 3.25}
	for i := range 200 {
		vals = append(vals, float64(i)/7-14)
	}
	var valBytes []byte
	for _, v := range vals {
		valBytes = binary.BigEndian.AppendUint64(valBytes, math.Float64bits(v))
	}
	share := make([]byte, 1000)
	if _, err := rand.Read(share); err != nil {
		t.Fatal(err)
	}

	for _, mode := range []struct {
		name, backend string
		hide          bool
	}{{"webcrypto", envelope.BackendWebCrypto, false}, {"fallback", envelope.BackendGo, true}} {
		t.Run(mode.name, func(t *testing.T) {
			tb := openSealPage(t, b, base, mode.name, "sealpage.wasm", "sealtest", mode.hide)
			got, err := call[string](tb, "sealtest.backend()", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got != mode.backend {
				t.Fatalf("the page seals with %q, want %q", got, mode.backend)
			}

			// Browser seals width-1 messages; the native opener opens them.
			sealedHex, err := call[[]string](tb, "sealtest.sealEach("+jsArgs(hex.EncodeToString(pub[:]), round, hex.EncodeToString(valBytes))+")", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			sealed := make([][]byte, len(sealedHex))
			encs := map[string]bool{}
			for i, s := range sealedHex {
				if sealed[i], err = hex.DecodeString(s); err != nil {
					t.Fatal(err)
				}
				if len(sealed[i]) != envelope.Width1Len {
					t.Fatalf("message %d has %d bytes, want %d", i, len(sealed[i]), envelope.Width1Len)
				}
				encs[string(sealed[i][:envelope.EncSize])] = true
			}
			if len(sealed) != len(vals) || len(encs) != len(vals) {
				t.Fatalf("%d messages with %d distinct encapsulated keys for %d values", len(sealed), len(encs), len(vals))
			}
			opened, errs := k.OpenEach(round, sealed)
			if errs != nil {
				t.Fatalf("native open: %v", errs)
			}
			for i, v := range vals {
				if math.Float64bits(opened[i]) != math.Float64bits(v) {
					t.Fatalf("message %d opened to %v, want %v", i, opened[i], v)
				}
			}
			if _, err := k.OpenValues(round+1, sealed[0], nil); err == nil {
				t.Fatal("a message sealed in the browser opens in another round")
			}

			// Shares, to each server.
			for _, role := range []envelope.ShareRole{envelope.ShareLeader, envelope.ShareHelper} {
				to := pub
				if role == envelope.ShareHelper {
					to = h.Public()
				}
				consent := "" // the helper's share is not bound to a consent text
				if role == envelope.ShareLeader {
					consent = hex.EncodeToString(testConsent[:])
				}
				sHex, err := call[string](tb, "sealtest.sealShare("+jsArgs(hex.EncodeToString(to[:]), round, int(role), consent, hex.EncodeToString(share))+")", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				s, err := hex.DecodeString(sHex)
				if err != nil {
					t.Fatal(err)
				}
				var pt []byte
				if role == envelope.ShareLeader {
					pt, err = k.OpenLeaderShare(round, testConsent, s, len(share))
					if _, err2 := k.OpenLeaderShare(round, [32]byte{}, s, len(share)); err2 == nil {
						t.Fatal("a leader share opens without its consent hash")
					}
				} else {
					pt, err = h.OpenHelperShare(round, s, len(share))
					if _, err2 := h.OpenHelperShare(round+1, s, len(share)); err2 == nil {
						t.Fatal("a helper share opens in another round")
					}
				}
				if err != nil || !bytes.Equal(pt, share) {
					t.Fatalf("role %d: native open: %v", role, err)
				}
			}
		})
	}

	// Native seals; the page opens with WebCrypto. The aggregator key's
	// X25519 scalar is derived as envelopetest.DeriveKey documents.
	tb := openSealPage(t, b, base, "open", "sealpage.wasm", "sealtest", false)
	x := sha256.Sum256(append([]byte("blanket/v1 hpke key"), seed[:]...))
	native, err := envelope.SealEach(pub, round, vals)
	if err != nil {
		t.Fatal(err)
	}
	info := envelope.ValuesInfo(round)
	pts, err := call[[]string](tb, "sealtest.open("+jsArgs(hex.EncodeToString(x[:]), hex.EncodeToString(pub[:]), hex.EncodeToString(info), hexAll(native))+")", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != len(vals) {
		t.Fatalf("the page opened %d messages of %d", len(pts), len(vals))
	}
	for i, p := range pts {
		want := binary.BigEndian.AppendUint64(nil, math.Float64bits(vals[i]))
		if p != hex.EncodeToString(want) {
			t.Fatalf("the page opened message %d to %s, want %x", i, p, want)
		}
	}
	hs, err := envelope.SealShare(h.Public(), round, envelope.ShareHelper, [32]byte{}, share)
	if err != nil {
		t.Fatal(err)
	}
	hp := h.Public()
	hInfo, err := envelope.ShareInfo(round, envelope.ShareHelper, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err = call[[]string](tb, "sealtest.open("+jsArgs(hex.EncodeToString(helperRaw), hex.EncodeToString(hp[:]), hex.EncodeToString(hInfo), hexAll([][]byte{hs}))+")", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 1 || pts[0] != hex.EncodeToString(share) {
		t.Fatal("the page did not open the natively sealed helper share")
	}
	// Under the leader's info the helper share must not open.
	lInfo, _ := envelope.ShareInfo(round, envelope.ShareLeader, testConsent)
	if _, err := call[[]string](tb, "sealtest.open("+jsArgs(hex.EncodeToString(helperRaw), hex.EncodeToString(hp[:]), hex.EncodeToString(lInfo), hexAll([][]byte{hs}))+")", time.Minute); err == nil {
		t.Fatal("the page opened a helper share under the leader's info")
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}

// TestWebHPKEInChromium runs shared/envelope/webhpke's own tests in
// headless Chromium: its test binary (GOOS=js go test -c) loaded in a
// page, so the RFC 9180 vector (Appendix A.1, with the vector's ephemeral
// key fixed: the encapsulated key and the 1000 encryptions byte for byte)
// and the interop with crypto/hpke in both directions hold for Chromium's
// WebCrypto as they do for Node's.
func TestWebHPKEInChromium(t *testing.T) {
	exe := chromiumPath(t)
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "webhpke.test.wasm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./shared/envelope/webhpke")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=js GOARCH=wasm go test -c ./shared/envelope/webhpke: %v\n%s", err, b)
	}
	base := sealServer(t, map[string]string{"webhpke.test.wasm": bin})
	b := newBrowser(t, context.Background(), exe)
	tb := b.open(t, "webhpke", base+"/page.html?wasm=webhpke.test.wasm&test=1")
	if err := waitFor(tb, `typeof globalThis.testExit === "number"`, `String(globalThis.loadError) + " " + (globalThis.testOutput || []).join("\n")`, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := eval[[]string](tb, "globalThis.testOutput")
	if err != nil {
		t.Fatal(err)
	}
	code, err := eval[int](tb, "globalThis.testExit")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(out, "\n")
	t.Logf("webhpke tests in Chromium:\n%s", text)
	if code != 0 {
		t.Fatalf("the webhpke tests exited with %d in Chromium", code)
	}
	for _, want := range []string{"--- PASS: TestRFC9180Vector", "--- PASS: TestRFC9180A11", "--- PASS: TestSealOpensWithCryptoHPKE", "--- PASS: TestOpenOpensCryptoHPKE", "\nPASS"} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func hexAll(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = hex.EncodeToString(b)
	}
	return out
}

// costWorkload is one protocol's sealing per round at the browser test's
// scale (d = 7850, the MNIST logistic regression; n = 60 volunteers).
type costWorkload struct {
	Name     string `json:"-"`
	Messages int    `json:"messages,omitempty"`
	Leader   int    `json:"leader,omitempty"`
	Helper   int    `json:"helper,omitempty"`
}

// TestSealCostInBrowser measures, in headless Chromium, the wall time a
// volunteer's browser spends sealing one round of each protocol: the d
// width-1 messages of a shuffle protocol (envelope.SealEach), or the two
// shares of secure summation (envelope.SealShare), each layout as
// roundspec.Build makes it for d = 7850 and n = 60. It is a measurement,
// not a check, so it runs only with BLANKET_SEAL_COST=1:
//
//	cd scripts/browsertest && BLANKET_SEAL_COST=1 BLANKET_SEAL_BASELINE=<rev> go test -count=1 -run TestSealCostInBrowser -v .
//
// Columns: WebCrypto (this tree), the Go fallback in wasm (this tree, the page
// hiding WebCrypto's X25519: the fallback), and, with
// BLANKET_SEAL_BASELINE naming git revisions (separated by spaces), each
// revision's sealer (internal/sealbench built against `git archive <rev>`). The pages run one
// round at a time in turn (after a warm-up round each), so load drift on a
// shared machine hits every column alike; the table gives the median over
// BLANKET_SEAL_ROUNDS rounds (default 5).
func TestSealCostInBrowser(t *testing.T) {
	if os.Getenv("BLANKET_SEAL_COST") != "1" {
		t.Skip("a measurement: set BLANKET_SEAL_COST=1")
	}
	exe := chromiumPath(t)
	root := repoRoot(t)
	rounds := 5
	if s := os.Getenv("BLANKET_SEAL_ROUNDS"); s != "" {
		var err error
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 1 {
			t.Fatalf("BLANKET_SEAL_ROUNDS=%q", s)
		}
	}
	const d, n = 7850, 60
	var ws []costWorkload
	for _, p := range roundspec.Protocols() {
		params, _, err := roundspec.Build(d, n, roundspec.Options{Protocol: p.Wire(), Sigma: 10})
		if err != nil {
			t.Fatalf("%v: %v", p.Wire(), err)
		}
		w := costWorkload{Name: p.Wire().String()}
		spec, err := roundspec.New(params)
		if err != nil {
			t.Fatal(err)
		}
		if l, h, err := spec.SharesSizes(); err == nil && l > 0 {
			w.Leader, w.Helper = l, h
		} else {
			w.Messages = params.Messages()
		}
		ws = append(ws, w)
	}

	type column struct {
		name, wasm string
		hide       bool
		tab        *tab
		ms         [][]float64 // [workload][round]
	}
	wasms := map[string]string{"current.wasm": buildPageWasm(t, root, "sealbench")}
	cols := []*column{
		{name: "WebCrypto", wasm: "current.wasm"},
		{name: "Go (fallback)", wasm: "current.wasm", hide: true},
	}
	var baselines []*column
	for i, rev := range strings.Fields(os.Getenv("BLANKET_SEAL_BASELINE")) {
		old := exportTree(t, root, rev)
		name := fmt.Sprintf("baseline%d.wasm", i)
		wasms[name] = buildPageWasm(t, old, "sealbench")
		baselines = append(baselines, &column{name: "at " + rev, wasm: name})
	}
	cols = append(baselines, cols...)
	base := sealServer(t, wasms)
	b := newBrowser(t, context.Background(), exe)
	k, err := envelopetest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public().HPKE
	for i, c := range cols {
		c.tab = openSealPage(t, b, base, fmt.Sprintf("col%d", i), c.wasm, "sealbench", c.hide)
		c.ms = make([][]float64, len(ws))
	}
	for r := range rounds {
		for i, w := range ws {
			// Every column seals the same round back to back, in an
			// order rotated from round to round and workload to workload.
			for j := range cols {
				c := cols[(r+i+j)%len(cols)]
				warm := 0
				if r == 0 {
					warm = 1
				}
				got, err := call[[][]float64](c.tab, "sealbench.run("+jsArgs(hex.EncodeToString(pub[:]), 1, []costWorkload{w}, 1, warm)+")", 10*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				c.ms[i] = append(c.ms[i], got[0]...)
			}
		}
	}
	var sb strings.Builder
	sb.WriteString("| protocol | sealed per round |")
	for _, c := range cols {
		fmt.Fprintf(&sb, " %s: ms/round (µs/msg) |", c.name)
	}
	sb.WriteString("\n|---|---|")
	for range cols {
		sb.WriteString("---|")
	}
	for i, w := range ws {
		what := fmt.Sprintf("%d width-1 messages", w.Messages)
		if w.Messages == 0 {
			what = fmt.Sprintf("shares of %d + %d bytes", w.Leader, w.Helper)
		}
		fmt.Fprintf(&sb, "\n| %s | %s |", w.Name, what)
		for _, c := range cols {
			med := median(c.ms[i])
			if w.Messages > 0 {
				fmt.Fprintf(&sb, " %.1f (%.1f) |", med, 1000*med/float64(w.Messages))
			} else {
				fmt.Fprintf(&sb, " %.1f |", med)
			}
		}
	}
	t.Logf("median over %d rounds, Chromium headless, d = %d, n = %d:\n%s", rounds, d, n, sb.String())
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// exportTree extracts the repository at git revision rev into a temporary
// directory (git archive) and copies this tree's internal/sealbench into
// it, which uses only API the older envelope had.
func exportTree(t *testing.T, root, rev string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, rev, dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, b)
	}
	src, err := os.ReadFile(filepath.Join(root, "scripts", "browsertest", "internal", "sealbench", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "scripts", "browsertest", "internal", "sealbench")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
