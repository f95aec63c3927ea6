package durable

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the file holds exactly the new contents with the given
// mode, replaces an older one, and no temporary file is left behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.bin")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		st, serr := os.Stat(path)
		if err != nil || serr != nil || string(b) != data || st.Mode().Perm() != 0o600 {
			t.Fatalf("%q %v %v %v", b, err, serr, st.Mode())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir"), nil, 0o600); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}
