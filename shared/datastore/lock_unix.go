//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package datastore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive, non-blocking advisory lock (flock) on
// dir's LockFile, so that a second process cannot open the same store (two
// writers would interleave frames in one log). The lock file is not the
// log itself: compaction replaces the log by a rename, which would leave a
// lock on the old file. The lock is released when the returned Closer is
// closed, or when the process dies.
func lockDir(dir string) (io.Closer, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("datastore: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("datastore: locking %s: %w", path, err)
	}
}
