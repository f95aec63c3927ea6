// Package procmem reads a process's resident memory from Linux's
// /proc/<pid>/status, for the runners and load tests that report what
// Blanket's processes cost. On other systems every reading is -1
// ("unknown"), never an error that stops a run.
package procmem

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Field names of /proc/<pid>/status.
const (
	// Resident is the resident set now (VmRSS).
	Resident = "VmRSS"
	// Peak is the highest resident set the process has had (VmHWM).
	Peak = "VmHWM"
)

// Read returns field (Resident or Peak) of process pid ("self" for this
// process) in bytes, or -1 when it cannot be read.
func Read(pid, field string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		// "   123456 kB"
		fs := strings.Fields(v)
		if len(fs) != 2 || fs[1] != "kB" {
			return -1
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil || kb < 0 {
			return -1
		}
		return kb << 10
	}
	return -1
}

// OfPID is Read for a numeric process id.
func OfPID(pid int, field string) int64 { return Read(strconv.Itoa(pid), field) }

// PIDOf returns the id of a running process whose argv[0] is bin, or 0.
func PIDOf(bin string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if arg0, _, _ := bytes.Cut(cmd, []byte{0}); string(arg0) == bin {
			return pid
		}
	}
	return 0
}

// MB formats bytes as whole megabytes (10^6), or "?" for -1.
func MB(b int64) string {
	if b < 0 {
		return "?"
	}
	return strconv.FormatInt((b+500_000)/1_000_000, 10) + " MB"
}
