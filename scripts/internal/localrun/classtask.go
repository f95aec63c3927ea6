package localrun

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// StoredTask is a class's task as its aggregator keeps it in its
// datastore (aggregator/internal/classtask): a bucket, task.ClassBucket
// for the class's own task or task.NextClassBucket for the one chosen for
// the next class, whose keys are task.FileName (the definition) and the
// names of the files it names, byte for byte.
type StoredTask struct {
	Task *task.Task
	// Def is the definition's bytes; Files the files it names, by name.
	Def   []byte
	Files map[string][]byte
}

// Open loads the task's public data (taskdata.OpenFiles), as the
// aggregator does.
func (st *StoredTask) Open() (*taskdata.Sets, error) {
	return taskdata.OpenFiles(st.Task, st.Files, "", "")
}

// ReadTask returns the task in bucket of the aggregator's datastore in
// dir, nil if there is none. It reads the datastore's log read-only
// (datastore.Scan): dir is not changed, and the aggregator may be running
// (a transaction it is writing is not seen).
func ReadTask(dir, bucket string) (*StoredTask, error) {
	var kv map[string][]byte
	_, err := datastore.Scan(dir, 0, func(ops []datastore.Op) error {
		for _, o := range ops {
			if o.Bucket != bucket {
				continue
			}
			switch o.Kind {
			case "put":
				if kv == nil {
					kv = map[string][]byte{}
				}
				kv[o.Key] = bytes.Clone(o.Value)
			case "delete":
				delete(kv, o.Key)
			case "delete-bucket":
				kv = nil
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no datastore: no task
	}
	if err != nil {
		return nil, fmt.Errorf("localrun: task in %s: %w", dir, err)
	}
	def, ok := kv[task.FileName]
	if !ok {
		return nil, nil
	}
	t, err := task.Parse(def)
	if err != nil {
		return nil, fmt.Errorf("localrun: task in %s (%s): %w", dir, bucket, err)
	}
	delete(kv, task.FileName)
	return &StoredTask{Task: t, Def: def, Files: kv}, nil
}

// classTask gives the new class in dir its task: the task the operator
// chose on the old class's operator page (the old datastore's
// task.NextClassBucket), or else the old class's own task
// (task.ClassBucket), written, definition and files byte for byte, as the
// new class's task.ClassBucket into the datastore in dir (opened, written
// in one transaction, closed), where the aggregator loads it in place of
// -task. With neither, the new class runs the aggregator's -task like the
// first. The old class's directory is only read (ReadTask); its
// aggregator must be stopped, so that no choice is made after the read.
func classTask(old, dir string) error {
	st, err := ReadTask(old, task.NextClassBucket)
	if err == nil && st == nil {
		st, err = ReadTask(old, task.ClassBucket)
	}
	if err != nil || st == nil {
		return err
	}
	db, err := datastore.Open(dir, nil)
	if err != nil {
		return fmt.Errorf("localrun: new class: task: %w", err)
	}
	err = db.Update(func(tx *datastore.Tx) error {
		tx.DeleteBucket(task.ClassBucket)
		tx.Put(task.ClassBucket, task.FileName, st.Def)
		for name, b := range st.Files {
			tx.Put(task.ClassBucket, name, b)
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		return fmt.Errorf("localrun: new class: task: %w", err)
	}
	return nil
}

// ClassTask returns the current class's own task (the one chosen for it
// on the operator page, which its aggregator loads in place of -task),
// nil when the class runs the aggregator's -task. A supervisor whose
// simulated volunteers hold a task's data (make run) reads it after
// NewClass to deal them the new task's rows.
func (c *Cluster) ClassTask() (*StoredTask, error) {
	return ReadTask(c.opts.AggregatorDir, task.ClassBucket)
}
