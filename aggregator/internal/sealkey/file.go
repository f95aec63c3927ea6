package sealkey

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/durable"
)

// The key in the aggregator's datastore (LoadOrCreateKeyIn).
const (
	// BucketKeys holds the key: key KeyName, value
	// PrivateKey.MarshalBinary's bytes.
	BucketKeys = "aggregator/keys"
	KeyName    = "aggregator"
	// ImportedSuffix is appended to a former key file once imported.
	ImportedSuffix = ".imported"
)

// LoadOrCreateKey returns the aggregator key pair stored at path
// (PrivateKey.MarshalBinary bytes), generating and storing a new
// one if the file does not exist. A new key is written atomically with mode
// 0600 (temporary file, fsync, rename, fsync of the directory), so a crash
// never leaves a truncated key behind. An existing key file that is
// readable by group or others is refused: the key decrypts every value.
// The aggregator keeps its key in its datastore (LoadOrCreateKeyIn); this
// is for tools and tests that keep one in a file.
func LoadOrCreateKey(path string) (key *PrivateKey, created bool, err error) {
	k, err := loadFile(path)
	switch {
	case err == nil:
		return k, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, false, err
	}
	k, err = GenerateKey()
	if err != nil {
		return nil, false, fmt.Errorf("sealkey: generating key: %w", err)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		return nil, false, fmt.Errorf("sealkey: encoding key: %w", err)
	}
	if err := durable.WriteFile(path, b, 0o600); err != nil {
		return nil, false, fmt.Errorf("sealkey: storing key: %w", err)
	}
	return k, true, nil
}

// loadFile reads the key file at path (an error wrapping fs.ErrNotExist
// if there is none), refusing one readable by group or others.
func loadFile(path string) (*PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("sealkey: reading key %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sealkey: key %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("sealkey: key %s has mode %v; it must not be accessible to group or others (chmod 600)", path, st.Mode().Perm())
	}
	k, err := UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("sealkey: key %s: %w", path, err)
	}
	return k, nil
}

// LoadOrCreateKeyIn returns the aggregator key pair kept in db (the
// state directory's datastore, mode 0600), generating and storing a new
// one (durably, in one Update, before it is returned) if there is none.
// A key file of the former format at former ("" : none; key.bin) is
// imported first, once, with LoadOrCreateKey's checks (mode 0600, a
// valid key): put in the store, then made read-only and renamed
// former+ImportedSuffix. A crash between the two imports the same key
// again; a file holding another key than the store's is refused (the
// store's key is never replaced: the clients pinned its fingerprint).
func LoadOrCreateKeyIn(db *datastore.Store, former string) (key *PrivateKey, created bool, err error) {
	if former != "" {
		if err := importFile(db, former); err != nil {
			return nil, false, err
		}
	}
	var raw []byte
	if err := db.View(func(tx *datastore.ReadTx) error {
		b, _ := tx.Get(BucketKeys, KeyName)
		raw = bytes.Clone(b)
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("sealkey: %w", err)
	}
	if raw == nil {
		k, err := GenerateKey()
		if err == nil {
			raw, err = k.MarshalBinary()
		}
		if err != nil {
			return nil, false, fmt.Errorf("sealkey: generating key: %w", err)
		}
		err = db.Update(func(tx *datastore.Tx) error {
			if b, ok := tx.Get(BucketKeys, KeyName); ok { // stored by another caller first
				raw = bytes.Clone(b)
				return nil
			}
			tx.Put(BucketKeys, KeyName, raw)
			created = true
			return nil
		})
		if err != nil {
			return nil, false, fmt.Errorf("sealkey: storing key: %w", err)
		}
	}
	k, err := UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, false, fmt.Errorf("sealkey: the stored key: %w", err)
	}
	return k, created, nil
}

// importFile imports the key file at path into db (see LoadOrCreateKeyIn).
func importFile(db *datastore.Store, path string) error {
	k, err := loadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	raw, err := k.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sealkey: %w", err)
	}
	err = db.Update(func(tx *datastore.Tx) error {
		if old, ok := tx.Get(BucketKeys, KeyName); ok && !bytes.Equal(old, raw) {
			return fmt.Errorf("sealkey: %s holds another key than the store's; refusing to replace it", path)
		}
		tx.Put(BucketKeys, KeyName, raw)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sealkey: importing %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o400); err != nil {
		return fmt.Errorf("sealkey: keeping the imported %s: %w", path, err)
	}
	if err := os.Rename(path, path+ImportedSuffix); err != nil {
		return fmt.Errorf("sealkey: keeping the imported %s: %w", path, err)
	}
	return datastore.OS{}.SyncDir(filepath.Dir(path))
}
