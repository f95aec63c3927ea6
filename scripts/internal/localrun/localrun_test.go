package localrun

import (
	"context"
	"strings"
	"testing"
)

// TestLaunchQuotesOutputOnFailure: a server that exits during start is
// reported with the last lines of its output, even when the caller
// discards the output (make run without -v).
func TestLaunchQuotesOutputOnFailure(t *testing.T) {
	c := &Cluster{}
	script := `for i in $(seq 1 400); do echo "noise line $i" >&2; done; echo "aggregator serve: expected n must be >= 1, got 0" >&2; exit 2`
	_, err := c.launch(context.Background(), "/bin/sh", []string{"-c", script}, "http://127.0.0.1:1/healthz")
	if err == nil {
		t.Fatal("a server that exits during start was not reported")
	}
	msg := err.Error()
	if !strings.Contains(msg, "expected n must be >= 1, got 0") || !strings.Contains(msg, "exit status 2") {
		t.Errorf("error does not quote the cause: %v", err)
	}
	if strings.Contains(msg, "noise line 1\n") || len(msg) > 5<<10 {
		t.Errorf("error quotes more than the tail (%d bytes)", len(msg))
	}
}

func TestTailWriter(t *testing.T) {
	w := &tailWriter{max: 16}
	if w.String() != "(no output)" {
		t.Errorf("empty: %q", w.String())
	}
	w.Write([]byte("first line\nsecond line\nthird\n"))
	if got := w.String(); got != "third" {
		t.Errorf("tail %q, want the last whole line", got)
	}
}

// TestFreeAddrOnHost: the servers bind the host they are given (a
// classroom's network address; here 127.0.0.2, which the test owns).
func TestFreeAddrOnHost(t *testing.T) {
	a, err := freeAddr("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, "127.0.0.2:") {
		t.Errorf("address %s, want one on 127.0.0.2", a)
	}
}
