package helperkey

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/blanket-fl/blanket/shared/durable"
)

// File is the name of the relay's secure-summation key in its
// state directory (docs/secagg.md, "Keys and secrets").
const File = "helper.key"

// LoadOrCreate returns the relay's helper key stored at path (the
// 32-byte X25519 scalar of Key.MarshalBinary), generating
// and storing a new one if the file does not exist. A new key is written
// atomically with mode 0600 (temporary file, fsync, rename, fsync of the
// directory), so a crash never leaves a truncated key behind. An existing
// file that is readable by group or others, or that does not hold exactly
// a key, is refused: the key opens every volunteer's helper share.
func LoadOrCreate(path string) (key *Key, created bool, err error) {
	f, err := os.Open(path)
	switch {
	case err == nil:
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, false, fmt.Errorf("helperkey: helper key %s: %w", path, err)
		}
		if !st.Mode().IsRegular() {
			return nil, false, fmt.Errorf("helperkey: helper key %s is not a regular file", path)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, false, fmt.Errorf("helperkey: helper key %s has mode %v; it must not be accessible to group or others (chmod 600)", path, st.Mode().Perm())
		}
		// One byte more than a key, so a longer file is refused too.
		b, err := io.ReadAll(io.LimitReader(f, 33))
		if err != nil {
			return nil, false, fmt.Errorf("helperkey: reading helper key %s: %w", path, err)
		}
		k, err := Unmarshal(b)
		if err != nil {
			return nil, false, fmt.Errorf("helperkey: helper key %s: %w", path, err)
		}
		return k, false, nil
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, false, fmt.Errorf("helperkey: reading helper key %s: %w", path, err)
	}
	k, err := Generate()
	if err != nil {
		return nil, false, fmt.Errorf("helperkey: generating helper key: %w", err)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		return nil, false, fmt.Errorf("helperkey: encoding helper key: %w", err)
	}
	if err := durable.WriteFile(path, b, 0o600); err != nil {
		return nil, false, fmt.Errorf("helperkey: storing helper key: %w", err)
	}
	return k, true, nil
}
