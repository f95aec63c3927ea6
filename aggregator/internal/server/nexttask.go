package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/blanket-fl/blanket/shared/durable"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
	"github.com/blanket-fl/blanket/tasks"
	"github.com/blanket-fl/blanket/web/console"
)

// A class's task on disk. A class is one state directory (its key, ledger,
// checkpoint); the task it learns is part of it when the operator chose
// one on the operator page:
//
//   - NextTaskDir, inside the current class's state directory, holds the
//     task the operator chose for the next class (ChooseTask): TaskFile
//     and, for a shipped example, the files it names (its public holdout
//     and its simulation rows), under the names it gives them.
//   - ClassTaskDir, inside a class's state directory, holds the task that
//     class learns, in the same form. The supervisor that starts a new
//     class (make run: scripts/internal/localrun Cluster.NewClass) copies
//     the old class's NextTaskDir there, or else the old class's own
//     ClassTaskDir, so that a class keeps its task unless another was
//     chosen; the aggregator (main.go) then loads ClassTaskDir/TaskFile in
//     place of -task.
//
// The names are shared/task's (one definition for the aggregator and the
// supervisor in scripts/internal/localrun).
const (
	NextTaskDir  = task.NextClassDir
	ClassTaskDir = task.ClassDir
	TaskFile     = task.FileName
)

// maxTaskUpload bounds POST /operator/task: a task definition
// (task.MaxFileBytes) and the multipart form around it.
const maxTaskUpload = task.MaxFileBytes + 64<<10

// ErrUploadFiles is returned for an uploaded task that names a holdout or
// simulation file: an upload is the definition alone and cannot bring
// them.
var ErrUploadFiles = errors.New("an uploaded task definition cannot bring the files it names")

// TaskOption is a task the operator page offers for the next class.
type TaskOption struct {
	Task *task.Task
	// Files are the files Task names (holdout, simulation), by name.
	Files map[string][]byte
}

// taskOptions returns the built-in digits and the shipped examples
// (package tasks), in the order the operator page lists them.
func taskOptions() ([]TaskOption, error) {
	digits, err := task.Digits()
	if err != nil {
		return nil, err
	}
	exs, err := tasks.Examples()
	if err != nil {
		return nil, err
	}
	out := []TaskOption{{Task: digits}}
	for _, ex := range exs {
		out = append(out, TaskOption{Task: ex.Task, Files: ex.Files})
	}
	return out, nil
}

// ParseUploadedTask validates an uploaded task definition exactly as
// -task does (task.Parse: the same errors, naming the line and the field)
// and refuses one that names a holdout or simulation file
// (ErrUploadFiles), which the upload cannot bring.
func ParseUploadedTask(b []byte) (*task.Task, error) {
	t, err := task.Parse(b)
	if err != nil {
		return nil, err
	}
	for field, p := range map[string]string{"holdout": t.Holdout, "simulation": t.Simulation} {
		if p != "" {
			return nil, fmt.Errorf("task: field %s: names the file %q: %w; remove the field (without a holdout the class shows no accuracy) or start the aggregator with -task FILE next to the file",
				field, p, ErrUploadFiles)
		}
	}
	return t, nil
}

// ChooseTask makes t the task of the next class: it checks that an
// aggregator can start with it (its public data open, taskdata.Open and
// Holdout, as main.go does at start) and writes it, with the files it
// names (its holdout and simulation rows, by the names t gives them, each
// a plain file name), to NextTaskDir in the state directory, replacing an
// earlier choice. The current class is unchanged: its task, model and
// ledger stay as they are, and the choice applies when the supervisor
// starts the next class (RequestNewClass), whose ledger and model are
// fresh.
func (s *Server) ChooseTask(t *task.Task, files map[string][]byte) error {
	want := 0
	for _, name := range []string{t.Holdout, t.Simulation} {
		if name == "" {
			continue
		}
		want++
		if _, ok := files[name]; !ok || name != filepath.Base(name) || name == TaskFile || name == "." || name == ".." {
			return fmt.Errorf("server: task %q names the file %q, which is not a plain file name given with it", t.Name, name)
		}
	}
	if len(files) != want {
		return fmt.Errorf("server: task %q: %d files given, it names %d", t.Name, len(files), want)
	}
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	final := filepath.Join(s.cfg.StateDir, NextTaskDir)
	tmp, err := os.MkdirTemp(s.cfg.StateDir, NextTaskDir+".tmp-")
	if err != nil {
		return fmt.Errorf("server: next task: %w", err)
	}
	defer os.RemoveAll(tmp) // after the rename: nothing, or what was replaced
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("server: next task: %w", err)
	}
	if err := durable.WriteFile(filepath.Join(tmp, TaskFile), b, 0o600); err != nil {
		return fmt.Errorf("server: next task: %w", err)
	}
	for name, b := range files {
		if err := durable.WriteFile(filepath.Join(tmp, name), b, 0o600); err != nil {
			return fmt.Errorf("server: next task: %w", err)
		}
	}
	// The next aggregator loads exactly these files: check now that it
	// can, so that New class does not fail on them.
	if _, err := loadClassTask(tmp); err != nil {
		return err
	}
	old := filepath.Join(tmp, "replaced")
	if err := os.Rename(final, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("server: next task: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("server: next task: %w", err)
	}
	s.log.Info("operator: task chosen for the next class", "task", t.Name, "d", t.D())
	return nil
}

// loadClassTask loads a task directory (TaskFile and its holdout) as the
// aggregator does at start and returns the task.
func loadClassTask(dir string) (*task.Task, error) {
	t, d, err := task.Load(filepath.Join(dir, TaskFile))
	if err != nil {
		return nil, err
	}
	sets, err := taskdata.Open(t, d, "", "")
	if err != nil {
		return nil, err
	}
	if _, _, err := taskdata.Holdout(t, sets); err != nil {
		return nil, err
	}
	return t, nil
}

// NextTask returns the task chosen for the next class, nil if none was.
func (s *Server) NextTask() (*task.Task, error) {
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	t, _, err := task.Load(filepath.Join(s.cfg.StateDir, NextTaskDir, TaskFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return t, err
}

// chooseTaskRequest reads POST /operator/task and makes its task the next
// class's: a form field "example" naming the built-in or a shipped task,
// a multipart file "file" with a definition, or a body of type
// application/json that is one. It returns the task chosen.
func (s *Server) chooseTaskRequest(r *http.Request) (*task.Task, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var upload []byte
	switch mt {
	case "application/json":
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, fmt.Errorf("task: reading the upload: %w", err)
		}
		upload = b
	case "multipart/form-data":
		f, _, err := r.FormFile("file")
		switch {
		case errors.Is(err, http.ErrMissingFile):
		case err != nil:
			return nil, fmt.Errorf("task: reading the upload: %w", err)
		default:
			defer f.Close()
			if upload, err = io.ReadAll(io.LimitReader(f, task.MaxFileBytes+1)); err != nil {
				return nil, fmt.Errorf("task: reading the upload: %w", err)
			}
			if len(upload) == 0 {
				upload = nil // an empty file input: use the example
			}
		}
	}
	if upload != nil {
		t, err := ParseUploadedTask(upload) // task.Parse skips a byte-order mark
		if err != nil {
			return nil, err
		}
		return t, s.ChooseTask(t, nil)
	}
	name := strings.TrimSpace(r.PostFormValue("example"))
	if name == "" {
		return nil, errors.New("choose an example task or a task definition file (JSON) to upload")
	}
	opts, err := taskOptions()
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o.Task.Name == name {
			return o.Task, s.ChooseTask(o.Task, o.Files)
		}
	}
	return nil, fmt.Errorf("no example task is named %q", name)
}

// operatorTasks fills the operator page's task choice.
func (s *Server) operatorTasks(d *console.OperatorData) {
	opts, err := taskOptions()
	if err != nil {
		s.log.Error("example tasks", "err", err)
	}
	for _, o := range opts {
		d.Tasks = append(d.Tasks, console.TaskChoice{Name: o.Task.Name, Title: o.Task.Title, D: o.Task.D()})
	}
	next, err := s.NextTask()
	switch {
	case err != nil:
		d.NextTaskError = err.Error()
	case next != nil:
		d.NextTask = &console.TaskChoice{Name: next.Name, Title: next.Title, D: next.D()}
	}
}
