// Command benchratio prints two `go test -bench` outputs side by side (for
// example the native and the GOOS=js run of the same benchmarks) with the
// ratio of their CPU time per op (cpu-ns/op, shared/internal/benchclock:
// the benchmark thread's CPU time natively, the Node process's under js),
// so that figures measured in one run are reported as ratios rather than
// as absolute times, and as CPU time, which the load of a shared machine
// barely moves (time spent descheduled is not counted), where wall time
// gave ratios from 0.03 to 8,834. The wall-time ratio follows for
// reference. With -count > 1 each side is the median of its repetitions
// and the columns show the range (min-max) too. A benchmark without
// cpu-ns/op on both sides shows "-" in the CPU columns.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: benchratio BASE.txt OTHER.txt")
	}
	base, err := parseFile(args[0])
	if err != nil {
		return err
	}
	other, err := parseFile(args[1])
	if err != nil {
		return err
	}
	names := make([]string, 0, len(base))
	for name := range base {
		if _, ok := base[name]["ns/op"]; ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-60s %24s %24s %9s %9s\n", "benchmark", "native cpu-ns/op", "js cpu-ns/op", "cpu js/n", "wall js/n")
	for _, name := range names {
		b := base[name]["ns/op"]
		o, ok := other[name]["ns/op"]
		bc, bok := base[name]["cpu-ns/op"]
		oc, ook := other[name]["cpu-ns/op"]
		nat, js, cpu, wall := "-", "-", "-", "-"
		if bok {
			nat = cell(bc)
		}
		if ook && ok {
			js = cell(oc)
		}
		if ok {
			wall = fmt.Sprintf("%.2f", median(o)/median(b))
		}
		if bok && ook && ok && median(bc) > 0 {
			cpu = fmt.Sprintf("%.2f", median(oc)/median(bc))
		}
		fmt.Fprintf(w, "%-60s %24s %24s %9s %9s\n", name, nat, js, cpu, wall)
	}
	return nil
}

// cell formats the median of vs, and its range when there are several.
func cell(vs []float64) string {
	if len(vs) == 1 {
		return fmt.Sprintf("%.0f", vs[0])
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", median(vs), slices.Min(vs), slices.Max(vs))
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func parseFile(path string) (map[string]map[string][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open benchmark output: %w", err)
	}
	defer f.Close()
	return parseAll(f)
}

// parse reads `go test -bench` output and returns ns/op by package-qualified
// benchmark name (the -N GOMAXPROCS suffix removed so both targets match),
// the median over repetitions.
func parse(r io.Reader) (map[string]float64, error) {
	all, err := parseAll(r)
	if err != nil {
		return nil, err
	}
	res := make(map[string]float64)
	for name, m := range all {
		if vs, ok := m["ns/op"]; ok {
			res[name] = median(vs)
		}
	}
	return res, nil
}

// parseAll reads `go test -bench` output and returns, by package-qualified
// benchmark name, every value of every unit (ns/op, cpu-ns/op, ...) in the
// order the repetitions printed them.
func parseAll(r io.Reader) (map[string]map[string][]float64, error) {
	res := make(map[string]map[string][]float64)
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(rest)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		name := fields[0]
		if j := strings.LastIndex(name, "-"); j > 0 {
			if _, err := strconv.Atoi(name[j+1:]); err == nil {
				name = name[:j]
			}
		}
		short := pkg[strings.LastIndex(pkg, "/")+1:]
		name = short + "." + name
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("parse %q: %w", line, err)
			}
			if res[name] == nil {
				res[name] = make(map[string][]float64)
			}
			res[name][fields[i+1]] = append(res[name][fields[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	return res, nil
}
