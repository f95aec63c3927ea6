package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/web/console"
)

// maxTaskUpload bounds POST /operator/task: a task definition
// (task.MaxFileBytes) and the multipart form around it.
const maxTaskUpload = task.MaxFileBytes + 64<<10

// ChooseTask makes t, with the files it names, the task of the next class
// (classtask.Choose: in the datastore, one transaction, under the
// server's lock); the current class is unchanged.
func (s *Server) ChooseTask(t *task.Task, files map[string][]byte) error {
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	if err := classtask.Choose(s.db, t, files); err != nil {
		return err
	}
	s.log.Info("operator: task chosen for the next class", "task", t.Name, "d", t.D())
	return nil
}

// NextTask returns the task chosen for the next class, nil if none was.
func (s *Server) NextTask() (*task.Task, error) {
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	return classtask.Next(s.db)
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
		t, err := classtask.ParseUpload(upload) // task.Parse skips a byte-order mark
		if err != nil {
			return nil, err
		}
		return t, s.ChooseTask(t, nil)
	}
	name := strings.TrimSpace(r.PostFormValue("example"))
	if name == "" {
		return nil, errors.New("choose an example task or a task definition file (JSON) to upload")
	}
	opts, err := classtask.Options()
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
	opts, err := classtask.Options()
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
