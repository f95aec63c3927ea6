// Package durable writes files that survive a crash whole: a file is
// replaced by a temporary sibling, fsynced, renamed over it, and the
// directory fsynced, so after a crash it holds either its old or its new
// contents in full. The relay's helper key, the aggregator's key and its
// checkpoint use it.
package durable

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with mode perm, durably (see the
// package documentation). A leftover temporary file never carries the
// final name.
func WriteFile(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that a rename or create in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("durable: fsync %s: %w", dir, err)
	}
	return nil
}
