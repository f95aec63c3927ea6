//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package ledger

import "os"

// lockFile is a no-op on platforms without flock: there a second process
// opening the same ledger is not detected, and the operator must ensure a
// single aggregator per ledger file.
func lockFile(*os.File) error { return nil }

// syncDir is a no-op where directories cannot be fsynced (Windows, wasm).
func syncDir(string) error { return nil }
