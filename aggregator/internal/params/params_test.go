package params

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/task"
)

func TestBuildParams(t *testing.T) {
	base := Choice{Protocol: "ss-topk", Randomizer: "laplace", EpsL: 78.5, Clip: 0.01, CheckIn: 1}
	p, lr, err := Build(7850, 200, base)
	if err != nil || p.K != 157 || p.L != 5 || p.NP != 20 || lr != 50 {
		t.Fatalf("ss-topk: %+v lr %v err %v", p, lr, err)
	}
	f := base
	f.Protocol = "ss-simple"
	if p, lr, err = Build(7850, 200, f); err != nil || p.K != 7850 || p.L != 1 || p.Width != 1 || p.NP != 200 || p.Quota != 200 || lr != 1 {
		t.Fatalf("ss-simple: %+v lr %v err %v", p, lr, err)
	}
	f = base
	f.Protocol, f.K = "ss-double", 785
	if p, _, err = Build(7850, 200, f); err != nil || p.K != 785 || p.L != 1 || p.Width != 1 || p.NP != 20 {
		t.Fatalf("ss-double: %+v err %v", p, err)
	}
	for name, f := range map[string]Choice{
		"protocol":   {Protocol: "ss-nope", Randomizer: "laplace", EpsL: 1, Clip: 1, CheckIn: 1},
		"epsl":       {Protocol: "ss-topk", Randomizer: "laplace", EpsL: -1, Clip: 1, CheckIn: 1},
		"checkin":    {Protocol: "ss-topk", Randomizer: "laplace", EpsL: 1, Clip: 1, CheckIn: 1.5},
		"width":      {Protocol: "ss-topk", Randomizer: "laplace", EpsL: 1, Clip: 1, CheckIn: 1, Width: 5},
		"rgb":        {Protocol: "ss-topk", Randomizer: "rgb", EpsL: 1, Clip: 1, CheckIn: 1},
		"negative k": {Protocol: "ss-topk", Randomizer: "laplace", EpsL: 1, Clip: 1, CheckIn: 1, K: -3},
	} {
		if _, _, err := Build(7850, 200, f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSecAggRecipe: without -clip and -server-lr secure summation takes
// the task's recipe (the digits: C = 0.3, server lr 2, d = 8,340 with
// scatter1), and the flags win when given; the round built carries the
// recipe's clip and the returned server lr is the recipe's.
func TestSecAggRecipe(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	c := Choice{Protocol: "secagg", Randomizer: "laplace", CheckIn: 1, Clip: DefaultClip}
	SecAggRecipe(&c, tk.Recipe(), false, false)
	if c.Clip != 0.3 || c.ServerLR != 2 {
		t.Fatalf("digits recipe: clip %v, server lr %v", c.Clip, c.ServerLR)
	}
	if c.Sigma, err = SecAggSigma(tk.D(), 400, c, 5, 4, 1e-5); err != nil {
		t.Fatal(err)
	}
	p, lr, err := Build(tk.D(), 400, c)
	if err != nil {
		t.Fatal(err)
	}
	if p.D != 8340 || p.Clip != 0.3 || lr != 2 {
		t.Fatalf("round d %d, clip %v, server lr %v", p.D, p.Clip, lr)
	}
	flags := Choice{Clip: 1, ServerLR: 5}
	SecAggRecipe(&flags, tk.Recipe(), true, true)
	if flags.Clip != 1 || flags.ServerLR != 5 {
		t.Fatalf("flags overridden: %+v", flags)
	}
}
