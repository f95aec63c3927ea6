//go:build !js

package browser

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// goListDeps returns `go list -deps pkg` under env.
func goListDeps(t *testing.T, pkg string, env ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "list", "-deps", pkg)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s %v: %v", pkg, env, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s %v listed %d packages", pkg, env, len(deps))
	}
	return deps
}

// TestNoHPKEInTheBrowser: the browser client (GOOS=js GOARCH=wasm) does
// not link crypto/hpke, whose KEM table would bring the NIST curves' DHKEMs
// and ML-KEM into the module; it seals with shared/envelope/webhpke
// (WebCrypto, or RFC 9180's schedule over crypto/ecdh and crypto/aes
// where WebCrypto lacks X25519). The native servers still seal and open
// with crypto/hpke.
func TestNoHPKEInTheBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the product's binaries")
	}
	const mod = "github.com/blanket-fl/blanket/"
	deps := goListDeps(t, mod+"wasm", "GOOS=js", "GOARCH=wasm")
	for _, d := range deps {
		if d == "crypto/hpke" || d == "crypto/mlkem" || strings.HasPrefix(d, "crypto/internal/fips140/mlkem") {
			t.Errorf("the browser client links %s", d)
		}
	}
	if !slices.Contains(deps, mod+"shared/envelope/webhpke") {
		t.Errorf("the browser client does not link shared/envelope/webhpke: it cannot seal")
	}
	for _, pkg := range []string{"relay", "aggregator"} {
		if !slices.Contains(goListDeps(t, mod+pkg), "crypto/hpke") {
			t.Errorf("the native %s no longer links crypto/hpke", pkg)
		}
	}
}
