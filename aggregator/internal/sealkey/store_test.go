package sealkey

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
)

func openStore(t *testing.T, dir string) *datastore.Store {
	t.Helper()
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestKeyInStore: a new store generates a key once (the same key after a
// reopen); a former key.bin is imported (the same key, the file kept read-only
// as key.bin.imported), again harmlessly after a crash before the rename,
// and a key.bin holding another key, or readable by others, is refused
// with the store's key unchanged.
func TestKeyInStore(t *testing.T) {
	dir := t.TempDir()
	db := openStore(t, dir)
	k1, created, err := LoadOrCreateKeyIn(db, filepath.Join(dir, "key.bin"))
	if err != nil || !created {
		t.Fatalf("new key: %v, created %v", err, created)
	}
	db.Close()
	db = openStore(t, dir)
	k2, created, err := LoadOrCreateKeyIn(db, filepath.Join(dir, "key.bin"))
	if err != nil || created || k2.Public().Fingerprint() != k1.Public().Fingerprint() {
		t.Fatalf("reopened: %v, created %v, same key %v", err, created, k2.Public().Fingerprint() == k1.Public().Fingerprint())
	}

	old := t.TempDir()
	file := filepath.Join(old, "key.bin")
	kf, _, err := LoadOrCreateKey(file)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(file)
	db = openStore(t, old)
	k, created, err := LoadOrCreateKeyIn(db, file)
	if err != nil || created || k.Public().Fingerprint() != kf.Public().Fingerprint() {
		t.Fatalf("import: %v, created %v", err, created)
	}
	st, err := os.Stat(file + ImportedSuffix)
	if err != nil || st.Mode().Perm() != 0o400 {
		t.Fatalf("key.bin.imported: %v", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key.bin left: %v", err)
	}
	os.WriteFile(file, raw, 0o600) // a crash before the rename
	if k, _, err := LoadOrCreateKeyIn(db, file); err != nil || k.Public().Fingerprint() != kf.Public().Fingerprint() {
		t.Fatalf("import again: %v", err)
	}

	other, _ := GenerateKey()
	ob, _ := other.MarshalBinary()
	for name, c := range map[string]struct {
		data []byte
		mode os.FileMode
	}{"another key": {ob, 0o600}, "readable by others": {raw, 0o644}} {
		os.Remove(file)
		os.WriteFile(file, c.data, c.mode)
		os.Chmod(file, c.mode)
		if _, _, err := LoadOrCreateKeyIn(db, file); err == nil {
			t.Fatalf("%s: imported", name)
		}
		if b, _ := os.ReadFile(file); !bytes.Equal(b, c.data) {
			t.Fatalf("%s: the file changed", name)
		}
	}
	os.Remove(file)
	if k, _, err := LoadOrCreateKeyIn(db, file); err != nil || k.Public().Fingerprint() != kf.Public().Fingerprint() {
		t.Fatalf("the store's key changed: %v", err)
	}
}
