package server

import (
	"bytes"
	"errors"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"github.com/blanket-fl/blanket/aggregator/internal/operator"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// uploadTask posts a task definition file to /operator/task as the
// operator page's form does (multipart, field "file"), with the operator
// token unless token is "-".
func (h *harness) uploadTask(def []byte, token string) (int, string) {
	h.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("example", "digits") // the page always sends the select
	fw, err := mw.CreateFormFile("file", "my-task.json")
	if err != nil {
		h.t.Fatal(err)
	}
	fw.Write(def)
	mw.Close()
	req, err := http.NewRequest(http.MethodPost, h.http.URL+"/operator/task", &body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", h.http.URL)
	if token != "-" {
		req.Header.Set("X-Operator-Token", h.srv.OperatorToken())
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, html.UnescapeString(string(b))
}

// operatorPage is GET /operator with the operator's session.
func (h *harness) operatorPage() string {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/operator", nil)
	req.AddCookie(&http.Cookie{Name: operator.CookieName, Value: h.srv.auth.SessionValue()})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

const surveyUpload = `{"version": 1, "name": "my-survey", "title": "My survey", "consent": "Yes.", "source": "form",
	"features": [{"name": "minutes", "type": "numeric", "min": 0, "max": 60}, {"name": "rain", "type": "categorical", "categories": ["no", "yes"]}],
	"label": {"name": "transport", "classes": ["walk", "bike", "bus"]}, "model": {"type": "logreg"}}`

// TestOperatorChooseTask: POST /operator/task refuses an invalid upload
// with -task's reason (the line and the field), one naming files an
// upload cannot bring, one too large, and one without the operator
// password, storing nothing; it stores a valid upload, and a shipped
// example with its public holdout, for the next class only: the running
// class keeps its task. Without a supervisor (no New class) there is no
// next class to choose for: 404.
func TestOperatorChooseTask(t *testing.T) {
	h0 := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	if code, _ := h0.opPost("task", url.Values{"example": {"breast-cancer"}}, nil); code != http.StatusNotFound {
		t.Errorf("choosing a task without New class: HTTP %d, want 404", code)
	}

	dir := t.TempDir()
	h := newHarness(t, dir, newFakeRelay(t), func(c *Config) { c.Web.NewClass = true; c.Task = testTask(t) })
	h.relay.next(t)
	next := func() *task.Task {
		t.Helper()
		tk, err := h.srv.NextTask()
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	for _, c := range []struct {
		name  string
		def   string
		token string
		code  int
		want  string
	}{
		{"unknown field", strings.Replace(surveyUpload, `"model": {"type": "logreg"}`, `"model": {"type": "logreg", "layers": 2}`, 1), "", 400, `line 3: unknown field "layers"`},
		{"duplicate key", strings.Replace(surveyUpload, `"title": "My survey",`, `"title": "My survey", "title": "Other",`, 1), "", 400, `key "title" appears twice in the top-level object`},
		{"bad range", strings.Replace(surveyUpload, `"max": 60`, `"max": 0`, 1), "", 400, `features[0] ("minutes"): min 0 must be below max 0`},
		{"holdout", strings.Replace(surveyUpload, `"model"`, `"holdout": "rows.csv", "model"`, 1), "", 400, `field holdout: names the file "rows.csv"`},
		{"too large", surveyUpload + strings.Repeat(" ", task.MaxFileBytes+64<<10), "", http.StatusRequestEntityTooLarge, "request larger than"},
		{"no password", surveyUpload, "-", 403, "operator password required"},
	} {
		code, body := h.uploadTask([]byte(c.def), c.token)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: HTTP %d, want %d with %q; body %.300q", c.name, code, c.code, c.want, body)
		}
		if tk := next(); tk != nil {
			t.Fatalf("%s: refused, yet %q is stored for the next class", c.name, tk.Name)
		}
	}

	if code, body := h.uploadTask([]byte(surveyUpload), ""); code != http.StatusSeeOther {
		t.Fatalf("valid upload: HTTP %d: %.300s", code, body)
	}
	if tk := next(); tk == nil || tk.Name != "my-survey" || tk.D() != (1+2+1)*3 {
		t.Fatalf("next task after the upload: %+v", tk)
	}
	if st := h.stored(classtask.BucketNext); st == nil || len(st.Files) != 0 {
		t.Errorf("an upload stored %+v, want the definition alone", st)
	}
	// The running class is unchanged.
	if code, body := get(t, h.http.URL+"/api/task"); code != 200 || !strings.Contains(body, `"name": "tiny"`) {
		t.Errorf("the current class's task changed: HTTP %d %s", code, body)
	}

	// A shipped example replaces the choice, with its holdout and
	// simulation rows, loadable as the next aggregator loads it.
	if code, body := h.opPost("task", url.Values{"example": {"breast-cancer"}}, nil); code != http.StatusSeeOther {
		t.Fatalf("example: HTTP %d: %.300s", code, html.UnescapeString(body))
	}
	checkStoredExample(t, h.stored(classtask.BucketNext))
	if code, _ := h.opPost("task", url.Values{"example": {"nonesuch"}}, nil); code != http.StatusBadRequest || next().Name != "breast-cancer" {
		t.Errorf("unknown example: HTTP %d, next %q", code, next().Name)
	}
	// The operator page offers the examples and says what comes next.
	page := h.operatorPage()
	for _, s := range []string{`id="op-next-task" data-name="breast-cancer"`, `<option value="digits"`, `<option value="class-survey"`, `enctype="multipart/form-data"`} {
		if !strings.Contains(page, s) {
			t.Errorf("operator page lacks %s", s)
		}
	}
	// A definition posted as a JSON body (the API) works the same way.
	reqJSON, _ := http.NewRequest(http.MethodPost, h.http.URL+"/operator/task", strings.NewReader(surveyUpload))
	reqJSON.Header.Set("Content-Type", "application/json")
	reqJSON.Header.Set("X-Operator-Token", h.srv.OperatorToken())
	resp, err := noRedirect.Do(reqJSON)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || next().Name != "my-survey" {
		t.Errorf("JSON body: HTTP %d, next %q", resp.StatusCode, next().Name)
	}
	// ChooseTask writes only plain file names the definition gives.
	bad := *next()
	bad.Holdout = "../escape.csv"
	if err := h.srv.ChooseTask(&bad, map[string][]byte{"../escape.csv": []byte("x")}); err == nil {
		t.Error("a holdout path outside the task directory was accepted")
	}
	if err := h.srv.ChooseTask(next(), map[string][]byte{"extra.csv": []byte("x")}); err == nil {
		t.Error("a file the definition does not name was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "escape.csv")); !os.IsNotExist(err) {
		t.Errorf("a refused choice wrote outside its directory: %v", err)
	}
	// Nothing but the datastore (its log and its lock file) is written
	// in the state directory.
	if ents, _ := os.ReadDir(dir); len(ents) != 2 || ents[0].Name() != datastore.LockFile || ents[1].Name() != datastore.LogFile {
		t.Errorf("the state directory holds %v, want the datastore's %s and %s alone", ents, datastore.LockFile, datastore.LogFile)
	}
	// The choice survives a restart.
	h.stop()
	h = newHarness(t, dir, newFakeRelay(t), func(c *Config) { c.Web.NewClass = true; c.Task = testTask(t) })
	if tk := next(); tk == nil || tk.Name != "my-survey" {
		t.Errorf("after a restart the next class's task is %+v, want my-survey", tk)
	}
}

// stored returns the task in bucket of the server's datastore, nil if
// none.
func (h *harness) stored(bucket string) *classtask.Stored {
	h.t.Helper()
	var st *classtask.Stored
	err := h.srv.db.View(func(tx *datastore.ReadTx) (err error) {
		st, err = classtask.Get(tx, bucket)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// checkStoredExample checks that st is the shipped breast-cancer example,
// its holdout and simulation rows byte for byte, loadable as the next
// aggregator loads it.
func checkStoredExample(t *testing.T, st *classtask.Stored) {
	t.Helper()
	if st == nil {
		t.Fatal("no task stored")
	}
	tk := st.Task
	if tk.Name != "breast-cancer" || tk.D() != (30+1)*2 || tk.Holdout == "" || tk.Simulation == "" || len(st.Files) != 2 {
		t.Fatalf("stored example: %+v with %d files", tk, len(st.Files))
	}
	for _, f := range []string{tk.Holdout, tk.Simulation} {
		want, err := os.ReadFile(filepath.Join("../../../tasks/breast-cancer", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(st.Files[f], want) {
			t.Errorf("the stored %s differs from tasks/breast-cancer's", f)
		}
	}
	sets, err := st.Open("", "")
	if err != nil {
		t.Fatal(err)
	}
	if test, src, err := taskdata.Holdout(tk, sets); err != nil || test.Len() != 113 || src != taskdata.AccuracyHoldout {
		t.Errorf("the stored example's holdout: %d rows (%s): %v", test.Len(), src, err)
	}
}

// TestChooseTaskNotDurable: a choice whose transaction cannot be made
// durable (the datastore's write or its fsync fails) is refused, and the
// earlier choice stays, whole, in the running server and, after a failed
// write, after a restart; after a failed fsync a restart finds either
// choice whole.
func TestChooseTaskNotDurable(t *testing.T) {
	for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.Sync} {
		t.Run(op.String(), func(t *testing.T) {
			dir := t.TempDir()
			fsys := &ledgertest.StoreFS{}
			mod := func(c *Config) { c.Web.NewClass = true; c.Task = testTask(t); c.storeFS = fsys }
			h := newHarness(t, dir, newFakeRelay(t), mod)
			if code, body := h.opPost("task", url.Values{"example": {"breast-cancer"}}, nil); code != http.StatusSeeOther {
				t.Fatalf("example: HTTP %d: %.300s", code, html.UnescapeString(body))
			}
			fsys.Arm(op, []byte(classtask.BucketNext))
			survey, err := classtask.ParseUpload([]byte(surveyUpload))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.srv.ChooseTask(survey, nil); !errors.Is(err, datastore.ErrNotDurable) || !errors.Is(err, ledgertest.ErrInjected) {
				t.Fatalf("a choice with a failing %s: %v, want ErrNotDurable", op, err)
			}
			checkStoredExample(t, h.stored(classtask.BucketNext))
			h.stop()
			h = newHarness(t, dir, newFakeRelay(t), func(c *Config) { c.Web.NewClass = true; c.Task = testTask(t) })
			// A write that failed left nothing. After a failed fsync the
			// bytes may have reached the disk anyway (the datastore's
			// contract: an unacknowledged transaction may or may not be
			// there after a restart): then the new choice is there whole,
			// never one task's definition with the other's files.
			if st := h.stored(classtask.BucketNext); op == ledgertest.Sync && st != nil && st.Task.Name == "my-survey" {
				if len(st.Files) != 0 {
					t.Errorf("after a failed fsync the survey came back with %d files of the earlier choice", len(st.Files))
				}
			} else {
				checkStoredExample(t, st)
			}
		})
	}
}

// TestMajorityRate: the chance bar of a study is its holdout's most common
// class (here "a" on 3 of 5 rows, not 1/2), and a task without a holdout
// has none.
func TestMajorityRate(t *testing.T) {
	ds, err := logreg.NewDataset(logreg.Shape{Features: 1, Classes: 2}, []float32{0, 0, 0, 0, 0}, []uint8{1, 0, 0, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if r, c := classtask.MajorityRate(ds, []string{"a", "b"}); r != 0.6 || c != "a" {
		t.Errorf("majority %v %q, want 0.6 \"a\"", r, c)
	}
	none, err := logreg.ShapeOnly(logreg.Shape{Features: 1, Classes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r, c := classtask.MajorityRate(none, []string{"a", "b"}); r != 0 || c != "" {
		t.Errorf("no holdout: %v %q", r, c)
	}
}
