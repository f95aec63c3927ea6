package params

import "testing"

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
