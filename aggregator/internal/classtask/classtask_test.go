package classtask

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestImportOnce: a former task directory is imported once, byte for
// byte, then kept read-only as NAME.imported; a crash between the import
// and the rename (the directory back in place) imports nothing again, so
// a choice made since is kept; a directory without a definition is not a
// task and stays as it is.
func TestImportOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(p string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	def, err := os.ReadFile("../../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, NextDir, File), def)
	write(filepath.Join(dir, NextDir, "notes.txt"), []byte("kept too"))
	write(filepath.Join(dir, ClassDir, "stray.csv"), []byte("no definition"))
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Import(db, dir, nil); err != nil {
		t.Fatal(err)
	}
	var st *Stored
	get := func(bucket string) *Stored {
		t.Helper()
		if err := db.View(func(tx *datastore.ReadTx) (err error) { st, err = Get(tx, bucket); return err }); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := get(BucketNext); st == nil || st.Task.Name != "class-survey" || !bytes.Equal(st.Files["notes.txt"], []byte("kept too")) {
		t.Fatalf("imported next task: %+v", st)
	}
	if st := get(BucketClass); st != nil {
		t.Errorf("a directory without a definition was imported: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, ClassDir, "stray.csv")); err != nil {
		t.Errorf("the directory without a definition was moved: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, NextDir+ImportedSuffix, File)); err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("the imported directory is not kept read-only: %v", err)
	}
	// A choice made since; then the former directory reappears, as after
	// a crash before its rename.
	digits, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	if err := Choose(db, digits, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, NextDir+ImportedSuffix), filepath.Join(dir, NextDir)); err != nil {
		t.Fatal(err)
	}
	if err := Import(db, dir, nil); err != nil {
		t.Fatal(err)
	}
	if st := get(BucketNext); st == nil || st.Task.Name != task.DigitsName {
		t.Errorf("a second import replaced the choice made since: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, NextDir)); !os.IsNotExist(err) {
		t.Errorf("the directory left by the crash was not renamed: %v", err)
	}
}

// TestChooseReplaces: a choice replaces the earlier one whole (the
// example's files go with it), and a task that cannot be loaded (a
// holdout the task refuses) is refused with nothing stored.
func TestChooseReplaces(t *testing.T) {
	db, err := datastore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opts, err := Options()
	if err != nil {
		t.Fatal(err)
	}
	var bc Option
	for _, o := range opts {
		if o.Task.Name == "breast-cancer" {
			bc = o
		}
	}
	if bc.Task == nil {
		t.Fatal("no breast-cancer example")
	}
	bad := map[string][]byte{bc.Task.Holdout: []byte("x,y\n1,2\n"), bc.Task.Simulation: bc.Files[bc.Task.Simulation]}
	if err := Choose(db, bc.Task, bad); err == nil {
		t.Fatal("a holdout the task refuses was accepted")
	}
	if tk, err := Next(db); err != nil || tk != nil {
		t.Fatalf("a refused choice stored %+v (%v)", tk, err)
	}
	if err := Choose(db, bc.Task, bc.Files); err != nil {
		t.Fatal(err)
	}
	digits, _ := task.Digits()
	if err := Choose(db, digits, nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	db.View(func(tx *datastore.ReadTx) error { keys = tx.Keys(BucketNext); return nil })
	if len(keys) != 1 || keys[0] != File {
		t.Errorf("after the digits replaced breast cancer the bucket holds %v", keys)
	}
}
