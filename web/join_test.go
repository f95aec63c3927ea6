package web

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

func renderJoin(t *testing.T, d JoinData) string {
	t.Helper()
	var buf bytes.Buffer
	if err := JoinPage(d).Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.String()
}

// element returns the start tag of the element with the given id, or "".
func element(page, id string) string {
	re := regexp.MustCompile(`<[a-z]+\b[^>]*\sid="` + regexp.QuoteMeta(id) + `"[^>]*>`)
	return re.FindString(page)
}

func testModule(t *testing.T) *WasmModule {
	t.Helper()
	b := append([]byte{0, 'a', 's', 'm', 1, 0, 0, 0}, bytes.Repeat([]byte("blanket module "), 200)...)
	m, err := NewWasmModule(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJoinPageContract: every element id of docs/web.md is on the page,
// on an element of the right kind, with its initial data-* values.
func TestJoinPageContract(t *testing.T) {
	page := renderJoin(t, JoinData{Fingerprint: "abcd-0123-4567-89ab-cdef-0123-4567-89ab", Wasm: testModule(t)})
	want := map[string]string{ // id -> what its start tag must contain
		"consent":       "<section",
		"eps-level":     "<select",
		"source-shard":  `type="radio"`,
		"source-draw":   `type="radio"`,
		"canvas":        "<canvas",
		"label":         "<select",
		"add-drawing":   "<button",
		"start":         "<button",
		"stop":          "<button",
		"status":        `data-state="idle"`,
		"progress":      "<progress",
		"sent":          "",
		"my-epsilon":    `data-value="0"`,
		"fingerprint":   "",
		"wasm-sha256":   "",
		"rounds-joined": `data-value="0"`,
	}
	for id, frag := range want {
		tag := element(page, id)
		if tag == "" {
			t.Errorf("no element with id %q", id)
			continue
		}
		if !strings.Contains(tag, frag) {
			t.Errorf("#%s is %s, want it to contain %s", id, tag, frag)
		}
	}
	if n := strings.Count(page, `id="status"`); n != 1 {
		t.Errorf("%d elements with id status", n)
	}
	// The radios share a group; the status is announced to screen readers.
	for _, id := range []string{"source-shard", "source-draw"} {
		if !strings.Contains(element(page, id), `name="source"`) {
			t.Errorf("#%s not in the source radio group", id)
		}
		if !strings.Contains(page, `for="`+id+`"`) {
			t.Errorf("#%s has no label", id)
		}
	}
	for _, id := range []string{"eps-level", "label"} {
		if !strings.Contains(page, `for="`+id+`"`) {
			t.Errorf("#%s has no label", id)
		}
	}
	if !strings.Contains(element(page, "status"), `aria-live="polite"`) {
		t.Error("#status is not a live region")
	}
	if !strings.Contains(element(page, "canvas"), `tabindex="0"`) {
		t.Error("the canvas cannot be reached with the keyboard")
	}
	if !strings.Contains(page, `name="viewport" content="width=device-width`) {
		t.Error("no viewport meta for phones")
	}
	for _, src := range []string{`src="/static/wasm_exec.js"`, `src="/static/join.js"`, `href="/static/style.css"`} {
		if !strings.Contains(page, src) {
			t.Errorf("page does not load %s", src)
		}
	}
	// The label picker offers the ten digits.
	for d := range 10 {
		if !strings.Contains(page, `<option value="`+string(rune('0'+d))+`">`) {
			t.Errorf("no option for digit %d", d)
		}
	}
}

// TestJoinPageConsent: the consent text says, in plain words, what each
// party sees: the relay who and when but not the values, the aggregator
// the values but not who, and that drawings and the shard choice stay in
// the browser, and that the noise makes each message epsilon-LDP.
func TestJoinPageConsent(t *testing.T) {
	page := renderJoin(t, JoinData{})
	start := strings.Index(page, `id="consent"`)
	end := strings.Index(page[start:], "</section>")
	if start < 0 || end < 0 {
		t.Fatal("no consent section")
	}
	consent := strings.ToLower(page[start : start+end])
	for _, phrase := range []string{
		"the relay", "who you are", "when you send", "never the values",
		"the aggregator", "never who sent them",
		"drawings", "never leave this browser", "noise", "locally differentially private",
		"stop at any time",
	} {
		if !strings.Contains(consent, phrase) {
			t.Errorf("consent text does not say %q", phrase)
		}
	}
}

// TestJoinPageShowsHashes: the page shows the key fingerprint and the
// module's SHA-256 (text and data-value), or says plainly that they are
// not available.
func TestJoinPageShowsHashes(t *testing.T) {
	m := testModule(t)
	fp := "abcd-0123-4567-89ab-cdef-0123-4567-89ab"
	page := renderJoin(t, JoinData{Fingerprint: fp, Wasm: m})
	if !strings.Contains(page, `data-value="`+fp+`">`+fp+`</code>`) {
		t.Error("fingerprint not shown")
	}
	if !strings.Contains(page, `data-value="`+m.SHA256()+`">`+m.SHA256()+`</code>`) {
		t.Error("module SHA-256 not shown")
	}
	if !strings.Contains(page, `data-wasm="true"`) {
		t.Error("join.js not told that a module is served")
	}

	page = renderJoin(t, JoinData{})
	if !strings.Contains(page, "no Blanket client module configured") || !strings.Contains(page, `data-wasm="false"`) {
		t.Error("page without a module does not say so")
	}
	if !strings.Contains(element(page, "fingerprint"), `data-value=""`) || !strings.Contains(page, "not known yet") {
		t.Error("page without a key does not say so")
	}
	if !strings.Contains(element(page, "start"), "disabled") {
		t.Error("start is enabled before the client is loaded")
	}
}

// TestLayoutChildren: the shell escapes its title and wraps the children in
// <main id="main">.
func TestLayoutChildren(t *testing.T) {
	var buf bytes.Buffer
	if err := Layout("a<b").Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	if !strings.Contains(s, "<title>a&lt;b</title>") || !strings.Contains(s, `<main id="main">`) || !strings.HasPrefix(s, "<!doctype html>") {
		t.Errorf("layout: %s", s)
	}
}

// TestJoinPageStatusNextToStart: the live status (text, countdown,
// progress) comes right after Start and Stop, before the longer sections,
// so it is on screen after pressing Start; the technical text of an error
// has its own place, and ε is explained in one sentence.
func TestJoinPageStatusNextToStart(t *testing.T) {
	page := renderJoin(t, JoinData{Wasm: testModule(t)})
	order := []string{`id="source-shard"`, `id="eps-level"`, `id="start"`, `id="stop"`, `id="status"`, `id="round-info"`, `id="progress"`, `id="results-h"`, `id="try-canvas"`, `id="check-h"`}
	last := -1
	for _, id := range order {
		i := strings.Index(page, id)
		if i < last {
			t.Errorf("%s comes before the previous element of %v", id, order)
		}
		last = i
	}
	if !strings.Contains(page, `id="error-details" hidden`) {
		t.Error("no hidden place for an error's technical details")
	}
	meaning := element(page, "eps-meaning")
	if meaning == "" || !strings.Contains(page, "ε measures how much what the class sees could reveal about any one student") {
		t.Error("ε is not explained in plain words")
	}
	// The personal privacy level is offered only once the page knows the
	// protocol uses it (join.js shows it for the shuffle protocols).
	if !strings.Contains(page, `id="eps-field" hidden`) {
		t.Error("the privacy level is shown before the page knows the protocol")
	}
	for _, l := range epsLevels {
		if len(l.label) > 34 {
			t.Errorf("privacy level label %q is too long for a 390 px phone", l.label)
		}
	}
}

// TestJoinPageConsentBox: Start is disabled as served and a required,
// labelled consent checkbox sits beside the consent text, in the join
// form (form="join-form": the section is outside it), described by the
// text and the consent version, disabled until join.js has the text and
// its hash, never restored ticked by the browser; join.js enables Start
// only once it is ticked and passes the hash to start only then.
func TestJoinPageConsentBox(t *testing.T) {
	page := renderJoin(t, JoinData{Wasm: testModule(t)})
	start := element(page, "start")
	if !regexp.MustCompile(`\sdisabled[\s>]`).MatchString(start) {
		t.Errorf("#start is %s, want disabled as served", start)
	}
	box := element(page, "consent-box")
	for _, frag := range []string{`type="checkbox"`, ` required`, `aria-required="true"`, `form="join-form"`,
		`aria-describedby="task-consent consent-version"`, ` disabled`, `autocomplete="off"`} {
		if !strings.Contains(box, frag) {
			t.Errorf("#consent-box is %s, want %s", box, frag)
		}
	}
	if !strings.Contains(page, `<label for="consent-box">I have read this and agree</label>`) {
		t.Error("#consent-box has no label saying what it agrees to")
	}
	if v := element(page, "consent-version"); !strings.Contains(v, `data-value=""`) {
		t.Errorf("#consent-version is %s", v)
	}
	// The box is in the consent section, after the text it agrees to.
	sec := strings.Index(page, `id="consent"`)
	text := strings.Index(page, `id="task-consent"`)
	b := strings.Index(page, `id="consent-box"`)
	end := sec + strings.Index(page[sec:], "</section>")
	if !(sec < text && text < b && b < end) {
		t.Errorf("consent section at %d, text at %d, box at %d, section end %d", sec, text, b, end)
	}
	// join.js gates Start on the box and passes the hash to start.
	js, err := os.ReadFile("static/join.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`startBtn.disabled = on || !api || cls.finished || !agreed()`,
		`consent: consentHash`, `consentBox.checked = false`} {
		if !strings.Contains(string(js), frag) {
			t.Errorf("join.js does not contain %q", frag)
		}
	}
}
