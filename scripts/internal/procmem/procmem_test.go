package procmem

import (
	"os"
	"runtime"
	"testing"
)

// TestReadSelf: this process's resident set is read, the peak is at least
// the current one, and touching 64 MB raises both by about that much.
func TestReadSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		if Read("self", Resident) != -1 {
			t.Fatal("a reading off Linux, want -1")
		}
		t.Skip("/proc/<pid>/status is Linux's")
	}
	before := Read("self", Resident)
	if before <= 0 {
		t.Fatalf("VmRSS of self = %d", before)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	now, peak := Read("self", Resident), Read("self", Peak)
	if now-before < 48<<20 {
		t.Errorf("resident grew by %d bytes after touching 64 MiB, want at least 48 MiB", now-before)
	}
	if peak < now {
		t.Errorf("peak %d < resident %d", peak, now)
	}
	runtime.KeepAlive(buf)
	if got := OfPID(os.Getpid(), Peak); got < peak {
		t.Errorf("OfPID(own pid) peak %d < %d read as self", got, peak)
	}
	if Read("self", "NoSuchField") != -1 || Read("0", Resident) != -1 {
		t.Error("a missing field or process read as a number, want -1")
	}
	if pid := PIDOf(os.Args[0]); pid != os.Getpid() {
		t.Errorf("PIDOf(%q) = %d, want this process %d", os.Args[0], pid, os.Getpid())
	}
	if MB(-1) != "?" || MB(1_499_999) != "1 MB" || MB(1_500_000) != "2 MB" {
		t.Errorf("MB: %q %q %q", MB(-1), MB(1_499_999), MB(1_500_000))
	}
}
