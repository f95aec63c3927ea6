//go:build js

package browser

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"math"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The page's environment under Node.js: fetch serves the relay's paths
// from Go byte slices, and WebSocket is a mock that opens at once and
// records what the client sends (Node.js 20 has no WebSocket, and a Go test
// under GOOS=js cannot listen on a socket).
const envSource = `((files, keyObj) => {
  globalThis.fetch = async (path) => {
    if (path === "/api/key") return {ok: true, status: 200, json: async () => keyObj};
    const f = files[path];
    if (!f) return {ok: false, status: 404};
    return {ok: true, status: 200, arrayBuffer: async () => f.buffer.slice(0)};
  };
  class MockWebSocket {
    constructor(url) {
      this.url = url; this.readyState = 0; this.sent = [];
      MockWebSocket.last = this;
      setTimeout(() => { this.readyState = 1; if (this.onopen) this.onopen({}); }, 0);
    }
    send(d) { this.sent.push(d.length); }
    close(code) {
      this.readyState = 3;
      setTimeout(() => { if (this.onclose) this.onclose({code: code || 1005, reason: "", wasClean: true}); }, 0);
    }
    deliver(u8) { this.onmessage({data: u8.buffer.slice(0)}); }
  }
  globalThis.WebSocket = MockWebSocket;
  globalThis.window = new EventTarget();
  return MockWebSocket;
})`

func u8(b []byte) js.Value {
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	return u
}

func digitsGz(t *testing.T) (images, labels []byte) {
	t.Helper()
	s, err := sample.Digits()
	if err != nil {
		t.Fatal(err)
	}
	var im, lb bytes.Buffer
	gi, gl := gzip.NewWriter(&im), gzip.NewWriter(&lb)
	if err := dataset.WriteIDX(gi, gl, s, 28, 28); err != nil {
		t.Fatal(err)
	}
	if err := gi.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gl.Close(); err != nil {
		t.Fatal(err)
	}
	return im.Bytes(), lb.Bytes()
}

// events collects the records the page would receive.
func events(t *testing.T) (<-chan map[string]any, js.Func) {
	ch := make(chan map[string]any, 256)
	fn := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ev := args[0]
		m := map[string]any{}
		for _, k := range []string{"kind", "error", "fingerprint", "message"} {
			m[k] = ev.Get(k).String()
		}
		for _, k := range []string{"round", "messages", "bytes", "epsilon", "rounds", "examples", "noiseStd"} {
			m[k] = ev.Get(k).Float()
		}
		select {
		case ch <- m:
		default:
		}
		return nil
	})
	return ch, fn
}

// waitKind returns the first event of the given kind.
func waitKind(t *testing.T, ch <-chan map[string]any, kind string) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m := <-ch:
			if m["kind"] == kind {
				return m
			}
			if m["kind"] == "error" || m["kind"] == "failed" || m["kind"] == "rejected" {
				t.Fatalf("waiting for %q: %v", kind, m)
			}
		case <-timeout:
			t.Fatalf("no %q event", kind)
		}
	}
}

// TestJSAPI drives globalThis.blanket as the join page does: ready event,
// drawings, a rejected start, a start pinned to the served key that
// reports in one round through the WebSocket, and stop.
func TestJSAPI(t *testing.T) {
	g := js.Global()
	k, err := envelopetest.DeriveKey([32]byte{5})
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public()
	keyObj := js.ValueOf(map[string]any{
		"sign": base64.StdEncoding.EncodeToString(pub.Sign), "hpke": base64.StdEncoding.EncodeToString(pub.HPKE[:]),
		"fingerprint": pub.Fingerprint(),
	})
	im, lb := digitsGz(t)
	files := js.ValueOf(map[string]any{})
	files.Set("/digits.idx.gz", u8(im))
	files.Set("/labels.idx.gz", u8(lb))
	mock := g.Call("eval", envSource).Invoke(files, keyObj)

	readyCh := make(chan struct{}, 1)
	onReady := js.FuncOf(func(js.Value, []js.Value) any { readyCh <- struct{}{}; return nil })
	defer onReady.Release()
	g.Get("window").Call("addEventListener", "blanket-ready", onReady)
	install()
	select {
	case <-readyCh:
	default:
		t.Fatal("no blanket-ready event")
	}
	b := g.Get("blanket")
	ch, onEvent := events(t)
	defer onEvent.Release()
	b.Call("onEvent", onEvent)

	// Drawings: a valid one counts, an invalid one does not and says why.
	px := g.Get("Float32Array").New(784)
	px.SetIndex(300, 0.8)
	if n := b.Call("addDrawing", px, 7).Int(); n != 1 {
		t.Fatalf("addDrawing = %d, want 1", n)
	}
	px.SetIndex(0, 2)
	if n := b.Call("addDrawing", px, 7).Int(); n != 1 {
		t.Fatalf("addDrawing of an invalid drawing = %d, want 1", n)
	}
	if e := waitKind(t, ch, "error"); !strings.Contains(e["error"].(string), "pixel 0") {
		t.Fatalf("invalid drawing: %v", e)
	}

	// A start with a wrong pinned fingerprint is rejected.
	opts := map[string]any{"relay": "ws://relay.test/ws", "source": "shard", "shardSeed": 3,
		"fingerprint": "0000-0000-0000-0000-0000-0000-0000-0000"}
	if _, err := await(b.Call("start", js.ValueOf(opts))); err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Fatalf("start with a wrong fingerprint: %v", err)
	}
	waitKind(t, ch, "error")

	// Pinned to the served key: the client starts, trains on its shard and
	// reports in round 1.
	opts["fingerprint"] = strings.ToUpper(pub.Fingerprint())
	opts["epsLevel"] = 0.5
	if _, err := await(b.Call("start", js.ValueOf(opts))); err != nil {
		t.Fatalf("start: %v", err)
	}
	if e := waitKind(t, ch, "key"); e["fingerprint"] != pub.Fingerprint() {
		t.Fatalf("key event %v", e)
	}
	if e := waitKind(t, ch, "data"); e["examples"] != 20.0 {
		t.Fatalf("data event %v", e)
	}
	waitKind(t, ch, "connected")
	if _, err := await(b.Call("start", js.ValueOf(opts))); err == nil {
		t.Fatal("a second start was accepted while running")
	}
	digits, err := task.Digits() // the client trains the digits task's model (scatter1: d = 8,340)
	if err != nil {
		t.Fatal(err)
	}
	p := wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: uint32(digits.D()),
		K: 157, L: 5, Width: 1, NP: 100, MinBatch: 1, EpsL: 78.5, Clip: 0.01, CheckInP: 1}
	a := wire.Announcement{Round: 1, Deadline: time.Now().Add(time.Hour), Params: p, HPKEPub: pub.HPKE, Model: make([]float64, p.D)}
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	frame, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ws := mock.Get("last")
	ws.Call("deliver", u8(frame))
	sent := waitKind(t, ch, "sent")
	m := p.Messages() // K*L width-1 messages
	if sent["messages"] != float64(m) || sent["bytes"] != float64(wire.CheckInSize+m*p.ReportFrameSize()) {
		t.Fatalf("sent event %v", sent)
	}
	// epsLevel 0.5: the volunteer reports each coordinate's datum with the
	// probability that halves its guarantee (roundspec personal level), so
	// its own epsilon is 78.5/2 (up to rounding).
	near := func(v any, want float64) bool { f, ok := v.(float64); return ok && math.Abs(f-want) < 1e-9*want }
	if priv := waitKind(t, ch, "privacy"); !near(priv["epsilon"], 39.25) || priv["rounds"] != 1.0 {
		t.Fatalf("privacy event %v", priv)
	}
	if n := ws.Get("sent").Length(); n != m+1 {
		t.Fatalf("the WebSocket got %d frames, want CheckIn + %d reports", n, m)
	}
	b.Call("stop")
	if st := waitKind(t, ch, "stopped"); st["error"] != "" || !near(st["epsilon"], 39.25) {
		t.Fatalf("stopped event %v", st)
	}
}
