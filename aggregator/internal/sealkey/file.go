package sealkey

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/blanket-fl/blanket/shared/durable"
)

// LoadOrCreateKey returns the aggregator key pair stored at path
// (PrivateKey.MarshalBinary bytes), generating and storing a new
// one if the file does not exist. A new key is written atomically with mode
// 0600 (temporary file, fsync, rename, fsync of the directory), so a crash
// never leaves a truncated key behind. An existing key file that is
// readable by group or others is refused: the key decrypts every value.
func LoadOrCreateKey(path string) (key *PrivateKey, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		st, err := os.Stat(path)
		if err != nil {
			return nil, false, fmt.Errorf("sealkey: key %s: %w", path, err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, false, fmt.Errorf("sealkey: key %s has mode %v; it must not be accessible to group or others (chmod 600)", path, st.Mode().Perm())
		}
		k, err := UnmarshalPrivateKey(b)
		if err != nil {
			return nil, false, fmt.Errorf("sealkey: key %s: %w", path, err)
		}
		return k, false, nil
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, false, fmt.Errorf("sealkey: reading key %s: %w", path, err)
	}
	k, err := GenerateKey()
	if err != nil {
		return nil, false, fmt.Errorf("sealkey: generating key: %w", err)
	}
	b, err = k.MarshalBinary()
	if err != nil {
		return nil, false, fmt.Errorf("sealkey: encoding key: %w", err)
	}
	if err := durable.WriteFile(path, b, 0o600); err != nil {
		return nil, false, fmt.Errorf("sealkey: storing key: %w", err)
	}
	return k, true, nil
}
