package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPrivateKeyAccess: the relay never holds the aggregator's private
// key. Its dependency graph excludes the aggregator, and no non-test source
// of the relay names envelope's private-key API (PrivateKey, GenerateKey,
// DeriveKey, UnmarshalPrivateKey, OpenValues, OpenEach, OpenLeaderShare):
// it seals values (SealValues, SealedLen) and, for secure summation, holds
// its own HelperKey, which opens helper shares only.
func TestNoPrivateKeyAccess(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not available")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/blanket-fl/blanket/relay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/blanket-fl/blanket/aggregator" || strings.HasPrefix(dep, "github.com/blanket-fl/blanket/aggregator/") {
			t.Errorf("relay depends on %s", dep)
		}
	}
	forbidden := map[string]bool{"PrivateKey": true, "GenerateKey": true, "DeriveKey": true,
		"UnmarshalPrivateKey": true, "OpenValues": true, "OpenEach": true, "OpenLeaderShare": true}
	files := 0
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && forbidden[sel.Sel.Name] {
				t.Errorf("%s: uses %s", path, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("scanned only %d files", files)
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
