package helperkey

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadOrCreateRefuses: a key file readable by others, of the
// wrong length, or not a file is refused, never replaced.
func TestLoadOrCreateRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	k, created, err := LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	k2, created, err := LoadOrCreate(path)
	if err != nil || created || k2.Public() != k.Public() {
		t.Fatalf("load: %v %v", created, err)
	}
	good, _ := os.ReadFile(path)
	for name, tc := range map[string]struct {
		data []byte
		mode os.FileMode
	}{
		"world-readable": {good, 0o644},
		"group-readable": {good, 0o640},
		"short":          {good[:31], 0o600},
		"long":           {append(bytes.Clone(good), 0), 0o600},
		"empty":          {nil, 0o600},
	} {
		p := filepath.Join(t.TempDir(), File)
		if err := os.WriteFile(p, tc.data, tc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, tc.mode)
		if _, _, err := LoadOrCreate(p); err == nil {
			t.Errorf("%s: loaded", name)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, tc.data) {
			t.Errorf("%s: file changed", name)
		}
	}
	d := filepath.Join(t.TempDir(), File)
	os.Mkdir(d, 0o700)
	if _, _, err := LoadOrCreate(d); err == nil {
		t.Error("a directory loaded as a key")
	}
}
