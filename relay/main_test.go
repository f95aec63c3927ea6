package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// deps lists the packages a build of pkgs links (go list -deps), for the
// given GOOS/GOARCH (empty: the host's).
func deps(t *testing.T, goos, goarch string, pkgs ...string) map[string]bool {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not available")
	}
	cmd := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Env = os.Environ()
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH="+goarch)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	m := make(map[string]bool)
	for _, p := range strings.Fields(string(out)) {
		m[p] = true
	}
	// A sanity floor: each of these binaries links the public envelope.
	if !m[mod+"/shared/envelope"] {
		t.Fatalf("go list -deps %v: no shared/envelope among %d packages", pkgs, len(m))
	}
	return m
}

const mod = "github.com/blanket-fl/blanket"

// forbidden reports the packages of deps that are one of, or under one of,
// the prefixes.
func forbidden(deps map[string]bool, prefixes ...string) []string {
	var bad []string
	for p := range deps {
		for _, f := range prefixes {
			if p == f || strings.HasPrefix(p, f+"/") {
				bad = append(bad, p)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// TestTrustBoundaries: the import graph keeps each party's secrets to
// itself (docs/architecture.md). The relay binary links no aggregator
// package (so not its key, aggregator/internal/sealkey), not the test
// opener shared/envelope/envelopetest, and not what only the aggregator
// serves (web/console: dashboard, operator page, charts, the QR encoder
// rsc.io/qr); it holds its own helper key (relay/internal/helperkey),
// which opens helper shares only. The wasm client (GOOS=js GOARCH=wasm)
// links neither private key package, nor envelopetest, nor any relay or
// aggregator package. The aggregator binary links no relay/internal
// package (the helper key among them) and not envelopetest.
func TestTrustBoundaries(t *testing.T) {
	relay := deps(t, "", "", mod+"/relay")
	if !relay[mod+"/relay/internal/helperkey"] {
		t.Error("the relay does not link relay/internal/helperkey: is the dependency list complete?")
	}
	for _, p := range forbidden(relay, mod+"/aggregator", mod+"/shared/envelope/envelopetest", mod+"/web/console", "rsc.io/qr") {
		t.Errorf("the relay links %s", p)
	}
	wasm := deps(t, "js", "wasm", mod+"/wasm")
	for _, p := range forbidden(wasm, mod+"/aggregator", mod+"/relay", mod+"/shared/envelope/envelopetest", mod+"/web/console") {
		t.Errorf("the wasm client links %s", p)
	}
	agg := deps(t, "", "", mod+"/aggregator")
	if !agg[mod+"/aggregator/internal/sealkey"] {
		t.Error("the aggregator does not link aggregator/internal/sealkey: is the dependency list complete?")
	}
	for _, p := range forbidden(agg, mod+"/relay", mod+"/shared/envelope/envelopetest") {
		t.Errorf("the aggregator links %s", p)
	}
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{
		{},                                  // no token
		{"-token", "a", "-token-file", "x"}, // both
		{"-token", "a", "-aggregator", "ftp://x", "-state", t.TempDir()}, // bad URL
		{"-token", "a", "-origins", "not an origin", "-state", t.TempDir()},
		{"-bogus"},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

// TestRunConfigFile: -config sets the flags it names (the token and a
// warmup the relay refuses, before anything starts), and an unknown key
// is refused with its line.
func TestRunConfigFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "relay.conf")
	os.WriteFile(conf, []byte("# test\ntoken = a\nstate = "+dir+"\nwarmup = -1s\n"), 0o600)
	if err := run([]string{"-config", conf}); err == nil || !strings.Contains(err.Error(), "-warmup must not be negative") {
		t.Errorf("run with the file's token and warmup: %v", err)
	}
	os.WriteFile(conf, []byte("token = a\n\nlisten-address = :1\nwarmup = 1s\n"), 0o600)
	if err := run([]string{"-config", conf}); err == nil || !strings.Contains(err.Error(), conf+":3: unknown key \"listen-address\"") {
		t.Errorf("run with an unknown key: %v", err)
	}
}

// TestExampleConfig: docs/examples/relay.conf names only the relay's flags
// (an unknown key would fail first), and its values reach them: the
// command line's token and warmup win, and the run stops at the warmup
// it refuses, before opening anything.
func TestExampleConfig(t *testing.T) {
	err := run([]string{"-config", "../docs/examples/relay.conf", "-token", "a", "-token-file", "", "-warmup", "-1s"})
	if err == nil || !strings.Contains(err.Error(), "-warmup must not be negative") {
		t.Fatalf("run with the example: %v", err)
	}
}
