package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseStripsProcsSuffixAndQualifiesByPackage(t *testing.T) {
	in := `goos: linux
pkg: github.com/blanket-fl/blanket/shared/logreg
BenchmarkLocalEpoch/gonum-2     	     100	     12345 ns/op	       0 B/op
BenchmarkGradient               	      10	  99.5 ns/op
PASS
`
	got, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if v := got["logreg.BenchmarkLocalEpoch/gonum"]; v != 12345 {
		t.Errorf("LocalEpoch = %v, want 12345 (map %v)", v, got)
	}
	if v := got["logreg.BenchmarkGradient"]; v != 99.5 {
		t.Errorf("Gradient = %v, want 99.5", v)
	}
	if len(got) != 2 {
		t.Errorf("parsed %d benchmarks, want 2", len(got))
	}
}

func TestRepetitionsMedianAndCPURatio(t *testing.T) {
	dir := t.TempDir()
	nat := `pkg: x/envelope
BenchmarkSeal-2   	10	 100 ns/op	 90 cpu-ns/op	 5 B/op
BenchmarkSeal-2   	10	 300 ns/op	 110 cpu-ns/op	 5 B/op
BenchmarkSeal-2   	10	 200 ns/op	 100 cpu-ns/op	 5 B/op
BenchmarkOnlyNative-2   	10	 7 ns/op
`
	js := `pkg: x/envelope
BenchmarkSeal   	10	 1000 ns/op	 500 cpu-ns/op
BenchmarkSeal   	10	 1400 ns/op	 700 cpu-ns/op
`
	write := func(name, s string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var sb strings.Builder
	if err := run([]string{write("n.txt", nat), write("j.txt", js)}, &sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	// CPU medians 100 (90-110) and 600 (500-700): ratio 6.00; wall
	// medians 200 and 1200: 6.00.
	for _, want := range []string{"100 (90-110)", "600 (500-700)", "6.00      6.00", "envelope.BenchmarkOnlyNative"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	got, err := parse(strings.NewReader(nat))
	if err != nil || got["envelope.BenchmarkSeal"] != 200 {
		t.Errorf("parse median = %v (%v), want 200", got["envelope.BenchmarkSeal"], err)
	}
}
