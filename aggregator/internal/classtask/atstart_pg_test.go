package classtask

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
	"github.com/blanket-fl/blanket/shared/task"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestAtStartPostgres: the class's task on PostgreSQL, as the aggregator
// opens its store twice at start (AtStartIn, then the server): a former
// class directory is imported into the schema, the task chosen there is
// found, and the first open released the schema for the second (it does
// not wait out pgstore.LockWait: the lock is released at Close).
func TestAtStartPostgres(t *testing.T) {
	c := pgtest.Get(t)
	dir := t.TempDir()
	cfg := serverstore.Config{Dir: dir, URL: c.DSN, Schema: c.Schema(t)}
	def, err := os.ReadFile("../../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ClassDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ClassDir, File), def, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := AtStartIn(context.Background(), cfg, nil)
	if err != nil || st == nil || st.Task.Name != "class-survey" {
		t.Fatalf("the imported class task: %+v %v", st, err)
	}
	// No wait for the lock: AtStartIn's Close released it.
	old := pgstore.LockWait
	defer func() { pgstore.LockWait = old }()
	pgstore.LockWait = 0
	db, err := serverstore.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("the server's open after AtStartIn's: %v", err)
	}
	digits, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	if err := Choose(db, digits, nil); err != nil {
		t.Fatal(err)
	}
	if next, err := Next(db); err != nil || next == nil || next.Name != task.DigitsName {
		t.Fatalf("the next class's task in the schema: %+v %v", next, err)
	}
	var class *Stored
	if err := db.View(func(tx *datastore.ReadTx) (err error) { class, err = Get(tx, BucketClass); return err }); err != nil || class == nil {
		t.Fatalf("the class task after the reopen: %v %v", class, err)
	}
	db.Close()
}
