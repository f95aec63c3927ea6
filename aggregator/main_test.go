package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/blanket-fl/blanket/"

// researchPackages must not be linked into the production aggregator: they
// run simulations and print accountant tables, not rounds
// (go run ./aggregator/lab).
var researchPackages = []string{module + "aggregator/internal/experiment", module + "aggregator/internal/privacycli"}

func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not available")
	}
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	m := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		m[d] = true
	}
	return m
}

// TestNoResearchToolsLinked: the production binary's dependency graph
// excludes the research packages, which aggregator/lab does link (so the
// check would see them if they were imported).
func TestNoResearchToolsLinked(t *testing.T) {
	prod, lab := deps(t, module+"aggregator"), deps(t, module+"aggregator/lab")
	if !prod[module+"aggregator/internal/server"] || !prod[module+"aggregator/internal/audit"] {
		t.Fatalf("the aggregator's dependencies miss its own server or audit: %d packages", len(prod))
	}
	for _, p := range researchPackages {
		if prod[p] {
			t.Errorf("the aggregator links %s", p)
		}
		if !lab[p] {
			t.Errorf("aggregator/lab does not link %s", p)
		}
	}
}

// TestDispatch: help, the subcommands moved to the lab, unknown ones and
// bad serve flags exit as documented, without starting a server.
func TestDispatch(t *testing.T) {
	dir := t.TempDir()
	conf := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := conf("unknown.conf", "# aggregator\nrounds = 3\nround_timeout = 10s\n")
	loud := conf("loud.conf", "log-level = loud\n")
	both := conf("both.conf", "log-level = loud\ntoken = 0123456789abcdef\ntoken-file = x\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help"}, 0, "aggregator [serve] [flags]"},
		{[]string{"-h"}, 0, "-relay"},
		{[]string{"serve", "-h"}, 0, "-relay"},
		{[]string{"simulate"}, 2, "go run ./aggregator/lab simulate"},
		{[]string{"privacy", "-preset", "secagg"}, 2, "go run ./aggregator/lab privacy"},
		{[]string{"nonsense"}, 2, `unknown subcommand "nonsense"`},
		{[]string{"-no-such-flag"}, 2, "-no-such-flag"},
		{[]string{"serve", "extra"}, 2, "unexpected arguments"},
		{[]string{"-log-level", "loud"}, 2, "-log-level"},
		{[]string{"-token", "0123456789abcdef", "-token-file", "x"}, 2, "not both"},
		{[]string{"prep-worker"}, 2, "usage: aggregator prep-worker -store postgres://"},
		{[]string{"prep-worker", "-store", "mysql://x"}, 2, "postgres"},
		{[]string{"-prep-jobs", "-state", filepath.Join(dir, "state")}, 2, "-prep-jobs needs the PostgreSQL store"},
		// -config: an unknown key is refused with its line; the file's
		// flags apply unless the command line gives them.
		{[]string{"-config", unknown}, 2, unknown + `:3: unknown key "round_timeout"`},
		{[]string{"-config", loud}, 2, "-log-level"},
		{[]string{"-config", both, "-log-level", "info"}, 2, "not both"},
		// The example of docs/deploy.md names only the aggregator's flags.
		{[]string{"serve", "-config", "../docs/examples/aggregator.conf", "-log-level", "loud"}, 2, "-log-level"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("aggregator %q: exit %d, want %d with %q; output:\n%s%s", c.args, code, c.code, c.want, out.String(), errb.String())
		}
	}
}

// TestStateMachinesWithoutHTTP: the round state machines and their
// persistence order (the aggregator's rounds, the relay's round machine)
// link no HTTP: the servers' HTTP layers only move bytes to them
// (issue 24). The API package, which does link net/http, is what carries
// the rounds' outcomes as status codes.
func TestStateMachinesWithoutHTTP(t *testing.T) {
	if api := deps(t, module+"aggregator/internal/api"); !api["net/http"] {
		t.Fatal("the check would not see net/http: the API package does not link it")
	}
	for _, pkg := range []string{"aggregator/internal/rounds", "aggregator/internal/outcome", "relay/internal/round"} {
		if d := deps(t, module+pkg); d["net/http"] {
			t.Errorf("%s links net/http", pkg)
		}
	}
}
