//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package datastore

import "io"

// lockDir is a no-op where flock is unavailable (js/wasm, Windows): there
// the operator must run one server per state directory.
func lockDir(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
