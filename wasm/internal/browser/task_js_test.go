//go:build js

package browser

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"syscall/js"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/task"
)

const tinyTask = `{"version": 1, "name": "tiny", "title": "Tiny", "consent": "Yes.", "source": "csv",
	"features": [{"name": "age", "type": "numeric", "min": 0, "max": 120},
		{"name": "weather", "type": "categorical", "categories": ["sun", "rain"]}],
	"label": {"name": "y", "classes": ["a", "b"]}, "model": {"type": "logreg"}}`

// TestJSTask drives the study API as the join page does: setTask, a CSV
// with a bad row (listed with its row and column, the good rows kept),
// survey answers (an invalid one names its column), and a start on the
// study's rows that trains on exactly them.
func TestJSTask(t *testing.T) {
	g := js.Global()
	k, err := envelopetest.DeriveKey([32]byte{6})
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public()
	keyObj := js.ValueOf(map[string]any{
		"sign": base64.StdEncoding.EncodeToString(pub.Sign), "hpke": base64.StdEncoding.EncodeToString(pub.HPKE[:]),
		"fingerprint": pub.Fingerprint(),
	})
	g.Call("eval", envSource).Invoke(js.ValueOf(map[string]any{}), keyObj)
	install()
	b := g.Get("blanket")
	ch, onEvent := events(t)
	defer onEvent.Release()
	b.Call("onEvent", onEvent)

	if r := b.Call("parseCSV", u8([]byte("age\n"))); r.Get("ok").Bool() || !strings.Contains(r.Get("error").String(), "setTask") {
		t.Fatalf("parseCSV before setTask: %v", r.Get("error"))
	}
	if r := b.Call("setTask", `{"version": 1}`); r.Get("ok").Bool() {
		t.Fatal("an invalid task was accepted")
	}
	st := b.Call("setTask", tinyTask)
	if !st.Get("ok").Bool() || st.Get("inputs").Int() != 3 {
		t.Fatalf("setTask: %v", st.Get("error"))
	}
	if h := task.ConsentTextHash("Yes."); st.Get("consentHash").String() != hex.EncodeToString(h[:]) {
		t.Fatalf("consent hash %v, want %x", st.Get("consentHash"), h)
	}
	r := b.Call("parseCSV", u8([]byte("y,weather,age,extra\na,sun,30,x\nb,rain,212,x\nb,fog,40,x\na,rain,5,x\n")))
	if !r.Get("ok").Bool() || r.Get("rows").Int() != 2 || r.Get("skipped").Int() != 2 {
		t.Fatalf("parseCSV: ok %v rows %v skipped %v", r.Get("ok"), r.Get("rows"), r.Get("skipped"))
	}
	e0 := r.Get("errors").Index(0)
	if e0.Get("row").Int() != 3 || e0.Get("column").String() != "age" || !strings.Contains(e0.Get("text").String(), "outside the declared range") {
		t.Fatalf("first row error: %v", e0.Get("text"))
	}
	if r.Get("ignored").Length() != 1 || r.Get("ignored").Index(0).String() != "extra" {
		t.Fatal("the extra column is not reported as ignored")
	}
	if r := b.Call("parseCSV", u8([]byte("age,y\n1,a\n"))); r.Get("ok").Bool() || !strings.Contains(r.Get("error").String(), "'weather'") {
		t.Fatalf("a file missing a column: %v", r.Get("error"))
	}

	// The failed file above forgot the rows: a start now has none.
	opts := map[string]any{"relay": "ws://relay.test/ws", "source": "task", "fingerprint": pub.Fingerprint(),
		"consent": st.Get("consentHash").String()}
	if _, err := await(b.Call("start", js.ValueOf(opts))); err == nil || !strings.Contains(err.Error(), "no local data") {
		t.Fatalf("start without rows: %v", err)
	}
	waitKind(t, ch, "error")

	ans := js.ValueOf(map[string]any{"age": 200, "weather": "sun", "y": "a"})
	if r := b.Call("setAnswers", ans); r.Get("ok").Bool() || r.Get("column").String() != "age" {
		t.Fatalf("an out-of-range answer: %v", r.Get("error"))
	}
	ans.Set("age", 42)
	if r := b.Call("setAnswers", ans); !r.Get("ok").Bool() {
		t.Fatalf("setAnswers: %v", r.Get("error"))
	}
	if _, err := await(b.Call("start", js.ValueOf(opts))); err != nil {
		t.Fatalf("start: %v", err)
	}
	if e := waitKind(t, ch, "data"); e["examples"] != 1.0 {
		t.Fatalf("data event %v, want the one answered row", e)
	}
	waitKind(t, ch, "connected")
	b.Call("stop")
	waitKind(t, ch, "stopped")
}
