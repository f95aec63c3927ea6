package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// defaultChromium is where Debian's chromium package puts the browser.
const defaultChromium = "/usr/bin/chromium"

// chromiumPath returns the browser to drive, skipping the test when there
// is none (failing instead when BLANKET_REQUIRE_BROWSER=1, as CI sets).
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BLANKET_CHROMIUM")
	if p == "" {
		p = defaultChromium
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no Chromium at %s (apt-get install chromium, or set BLANKET_CHROMIUM): %v", p, err)
		if os.Getenv("BLANKET_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + "; BLANKET_REQUIRE_BROWSER=1 requires it")
		}
		t.Skip(msg)
	}
	return p
}

// browser is one headless Chromium with a fresh profile. Every tab opened
// through it reports its console errors, uncaught exceptions and any
// request that leaves the loopback interface.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string            // console errors, exceptions, external requests
	urls     map[string][]string // every request URL, by tab name
}

// requested reports whether the tab named name requested a URL ending in
// suffix.
func (b *browser) requested(name, suffix string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.urls[name] {
		if strings.HasSuffix(u, suffix) {
			return true
		}
	}
	return false
}

// hookScript runs in every document before the page's own scripts. It
// wraps the onEvent of the wasm client's API object (docs/web.md) the
// moment wasm sets globalThis.blanket, so every event the page receives is
// also recorded with its arrival time (performance.now(), ms). The page's
// handler still runs unchanged, synchronously, right after the record.
const hookScript = `(() => {
	const rec = { events: [], marker: Math.random() };
	Object.defineProperty(globalThis, "__blanketTest", { value: rec });
	let api;
	Object.defineProperty(globalThis, "blanket", {
		configurable: true, enumerable: true,
		get() { return api; },
		set(v) {
			if (v && typeof v.onEvent === "function" && !v.__wrapped) {
				const orig = v.onEvent;
				v.onEvent = function (fn) {
					return orig.call(this, function (e) {
						try {
							const r = { kind: String(e.kind), round: Number(e.round), t: performance.now() };
							if (r.kind === "sent") {
								r.work = [e.trainMs, e.encodeMs, e.sealMs, e.accountMs].map(Number);
							}
							rec.events.push(r);
						} catch (_) {}
						return fn.apply(this, arguments);
					});
				};
				v.__wrapped = true;
			}
			api = v;
		},
	});
})();`

// newBrowser starts Chromium; t.Cleanup stops it.
func newBrowser(t *testing.T, parent context.Context, exe string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// Start the browser now, bound to ctx (not to a shorter timeout).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{ctx: ctx}
}

func (b *browser) problem(format string, a ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, a...))
}

// Problems returns what went wrong in any page so far.
func (b *browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// tab is one browser tab.
type tab struct {
	name string
	ctx  context.Context
}

// open opens a new tab named name on rawURL, with the event hook installed
// and its console watched, and waits for the page's load event. The
// actions in before run ahead of the navigation (a phone's viewport, a
// colour scheme).
func (b *browser) open(t *testing.T, name, rawURL string, before ...chromedp.Action[chromedp.Void]) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	// The first Do opens the tab; listen before navigating.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: open tab: %v", name, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				b.problem("%s: console.error: %s", name, remoteArgs(ev.Args))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				text += " " + d.Exception.Description
			}
			b.problem("%s: uncaught exception at %s:%d: %s", name, d.URL, d.LineNumber+1, text)
		case *network.EventRequestWillBeSent:
			if ev.Request != nil && !local(ev.Request.URL) {
				b.problem("%s: request to a non-local address: %s", name, ev.Request.URL)
			}
			if ev.Request != nil {
				b.mu.Lock()
				if b.urls == nil {
					b.urls = map[string][]string{}
				}
				b.urls[name] = append(b.urls[name], ev.Request.URL)
				b.mu.Unlock()
			}
		}
	})
	if err != nil {
		t.Fatalf("%s: listen: %v", name, err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("%s: network.enable: %v", name, err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: hookScript}); err != nil {
		t.Fatalf("%s: install hook: %v", name, err)
	}
	nctx, ncancel := context.WithTimeout(ctx, 30*time.Second)
	defer ncancel()
	if err := chromedp.Do(nctx, before...); err != nil {
		t.Fatalf("%s: set up: %v", name, err)
	}
	if err := chromedp.Do(nctx, chromedp.Navigate(rawURL)); err != nil {
		t.Fatalf("%s: navigate to %s: %v", name, rawURL, err)
	}
	return &tab{name: name, ctx: ctx}
}

// local reports whether a request stays on this machine: loopback hosts,
// and URLs with no network behind them (data:, blob:, about:).
func local(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "data", "blob", "about":
		return true
	case "http", "https", "ws", "wss":
		h := u.Hostname()
		return h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1"
	}
	return false
}

func remoteArgs(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case a == nil:
		case a.Description != "":
			parts = append(parts, a.Description)
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

// eval evaluates a JavaScript expression in the tab, with a timeout.
func eval[T any](tb *tab, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		return v, fmt.Errorf("%s: evaluate %.60q: %w", tb.name, expr, err)
	}
	return v, nil
}

// waitFor polls cond (a JavaScript expression) every 100 ms until it is
// true or timeout passes; describe is evaluated for the error message.
func waitFor(tb *tab, cond, describe string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := eval[bool](tb, "Boolean("+cond+")")
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			state, _ := eval[string](tb, describe)
			if err != nil {
				return fmt.Errorf("%s: %s not true after %v (%v); page: %s", tb.name, cond, timeout, err, state)
			}
			return fmt.Errorf("%s: %s not true after %v; page: %s", tb.name, cond, timeout, state)
		}
		select {
		case <-tb.ctx.Done():
			return tb.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// screenshot saves the whole page as a PNG.
func (tb *tab) screenshot(path string) error {
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("%s: screenshot: %w", tb.name, err)
	}
	if !bytes.HasPrefix(buf, []byte("\x89PNG\r\n\x1a\n")) {
		return fmt.Errorf("%s: screenshot is not a PNG", tb.name)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf, 0o644)
}

type inputParams = input.DispatchMouseEventParams

const (
	mousePressed  = input.DispatchMouseEventTypeMousePressed
	mouseMoved    = input.DispatchMouseEventTypeMouseMoved
	mouseReleased = input.DispatchMouseEventTypeMouseReleased
)

// leftDrag is a mouse option for a move with the left button held.
func leftDrag(p *inputParams) {
	p.Button = "left"
	p.Buttons = 1
}

// draw drags the mouse over the page through the points, with the left
// button down: real input events, which the page receives as pointer
// events.
func (tb *tab) draw(points [][2]float64) error {
	if len(points) < 2 {
		return errors.New("draw: need two points")
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	acts := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(mousePressed, points[0][0], points[0][1], leftDrag, chromedp.ClickCount(1))}
	for _, p := range points[1:] {
		acts = append(acts, chromedp.MouseEvent(mouseMoved, p[0], p[1], leftDrag))
	}
	last := points[len(points)-1]
	acts = append(acts, chromedp.MouseEvent(mouseReleased, last[0], last[1], leftDrag, chromedp.ClickCount(1)))
	return chromedp.Do(ctx, acts...)
}

// joinReady is the join page's condition for a volunteer to act: the
// consent box is enabled (the wasm client loaded and holds the consent
// text the page shows) and Start waits only for it to be ticked.
const joinReady = `!document.getElementById("consent-box").disabled`

// agree ticks the join page's consent box, as a volunteer does after
// reading the consent text (a real click, once: a ticked box stays
// ticked), and waits for Start to be enabled.
func (tb *tab) agree() error {
	if on, err := eval[bool](tb, `document.getElementById("consent-box").checked`); err != nil {
		return err
	} else if !on {
		if err := tb.click("consent-box"); err != nil {
			return err
		}
	}
	return waitFor(tb, `!document.getElementById("start").disabled`, joinStateJS, 20*time.Second)
}

// click clicks the element with the given id.
func (tb *tab) click(id string) error {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID(id), chromedp.NodeVisible)); err != nil {
		return fmt.Errorf("%s: click #%s: %w", tb.name, id, err)
	}
	return nil
}
