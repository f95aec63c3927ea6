package sumvec

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNotInTheProduct: neither the relay, the aggregator nor the browser
// client (GOOS=js GOARCH=wasm) links this package or circl's Prio3 SumVec
// (`go list -deps`); only circl's Field64 arithmetic, which shared/pine
// uses, may remain.
func TestNotInTheProduct(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the product's binaries")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH: %v", err)
	}
	const mod = "github.com/blanket-fl/blanket/"
	for _, c := range []struct {
		pkg string
		env []string
	}{
		{mod + "aggregator", nil},
		{mod + "relay", nil},
		{mod + "wasm", []string{"GOOS=js", "GOARCH=wasm"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, goBin, "list", "-deps", c.pkg)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c.pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages", c.pkg, len(deps))
		}
		for _, d := range deps {
			if d == mod+"aggregator/lab/sumvec" || strings.HasPrefix(d, "github.com/cloudflare/circl/vdaf/prio3/") &&
				!strings.HasPrefix(d, "github.com/cloudflare/circl/vdaf/prio3/arith") {
				t.Errorf("%s %v links %s", c.pkg, c.env, d)
			}
		}
	}
}
