package paper

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
)

func TestSAPESUserLevel(t *testing.T) {
	e, d, err := SAPESUserLevel(0.05, 1e-9, 100, 1e-6)
	we, wd, _ := privacy.AdvancedComposition(0.05, 1e-9, 200, 1e-6)
	if err != nil || e != we || d != wd {
		t.Errorf("got (%v, %v, %v), want (%v, %v)", e, d, err, we, wd)
	}
	if want := 0.05*math.Sqrt(400*math.Log(1e6)) + 200*0.05*math.Expm1(0.05); math.Abs(e-want) > 1e-12 {
		t.Errorf("eps_uc = %v, want Proposition 1's %v", e, want)
	}
	if _, _, err := SAPESUserLevel(0.05, 1e-9, 0, 1e-6); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Errorf("b = 0: %v", err)
	}
}

func TestBasicComposition(t *testing.T) {
	e, d, err := BasicComposition(0.1, 1e-6, 3)
	if err != nil || math.Abs(e-0.3) > 1e-15 || math.Abs(d-3e-6) > 1e-20 {
		t.Errorf("got (%v, %v, %v)", e, d, err)
	}
	if _, _, err := BasicComposition(0.1, 0.4, 3); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("t·delta >= 1: %v", err)
	}
	if _, _, err := BasicComposition(-1, 0, 3); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Errorf("negative eps: %v", err)
	}
	if _, _, err := BasicComposition(1, 0, 0); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Errorf("t = 0: %v", err)
	}
}

func TestFLAMETheorems2And3(t *testing.T) {
	// n_p = 10^6, β = 1/50, ε_lk = 0.5, b = 2, δ_cd = 1e-9.
	const epsLK, b, np, beta, dcd = 0.5, 2, 1000000, 0.02, 1e-9
	ck, cd, err := FLAMETheorem3(epsLK, b, np, beta, dcd)
	if err != nil {
		t.Fatal(err)
	}
	wantCK := math.Sqrt(14 * math.Log(2*beta/dcd) * (math.Exp(epsLK) + b - 1) / (np - 1))
	wantCD := math.Log(1 + beta*math.Expm1(wantCK))
	if math.Abs(ck-wantCK) > 1e-14 || math.Abs(cd-wantCD) > 1e-14 {
		t.Errorf("Theorem 3: (%v, %v), want eqs. (5)-(6) (%v, %v)", ck, cd, wantCK, wantCD)
	}
	if cd2, err := FLAMETheorem2(epsLK, b, np, beta, dcd); err != nil || cd2 != cd {
		t.Errorf("Theorem 2 with n_s = n_p: %v %v, want %v", cd2, err, cd)
	}
	// Double amplification: subsampling strictly helps.
	if !(cd < ck) {
		t.Errorf("eps_cd %v >= eps_ck %v", cd, ck)
	}
	for _, c := range []struct {
		name string
		beta float64
		dcd  float64
		np   int
		want error
	}{
		{"delta_cd >= beta", 0.02, 0.03, np, privacy.ErrOutsideValidity},
		{"Lemma 1 fails (n_p small)", 0.02, 1e-9, 100, privacy.ErrOutsideValidity},
		{"beta = 0", 0, 1e-9, np, privacy.ErrInvalidParameter},
		{"beta > 1", 1.5, 1e-9, np, privacy.ErrInvalidParameter},
	} {
		if _, _, err := FLAMETheorem3(epsLK, b, c.np, c.beta, c.dcd); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestFLAMECorollaryConditions(t *testing.T) {
	dc := 0.01 / math.Pow(1000, 1.1)
	if err := Corollary2Condition(78.5, 7850, 1000, dc); err != nil {
		t.Errorf("FLAME's SS-Simple setting: %v", err)
	}
	if err := Corollary2Condition(78.5*1000, 7850, 1000, dc); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("eps_l too large: %v", err)
	}
	if err := Corollary3Condition(78.5, 0.02, 7850, 333, dc); err != nil {
		t.Errorf("FLAME's SS-Double setting: %v", err)
	}
	if err := Corollary3Condition(78.5*10, 0.02, 7850, 333, dc); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("eps_l too large: %v", err)
	}
	if err := Corollary3Condition(78.5, 0, 7850, 333, dc); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Errorf("beta = 0: %v", err)
	}
}

// TestFLAMEIndexPrivacy reproduces "ν = 3.125 with l = 16" (FLAME
// §Evaluations: Theorem 5 at n/n_p = 3, β = 1/50) and Proposition 2's range.
func TestFLAMEIndexPrivacy(t *testing.T) {
	nu, l, err := StrongestIndexPrivacy(333, 1000, 1.0/50)
	if err != nil || l != 16 || math.Abs(nu-3.125) > 1e-12 {
		t.Errorf("Theorem 5: nu = %v, l = %d, err = %v; want 3.125, 16", nu, l, err)
	}
	lMin, lMax, err := IndexLayers(3.125, 1.0/50)
	if err != nil || lMin != 16 || lMax != 50 {
		t.Errorf("IndexLayers(3.125): [%d, %d] %v, want [16, 50]", lMin, lMax, err)
	}
	// Proposition 2: ν = 1 at l = ⌈1/β⌉, and ν decreases as l grows.
	prev := math.Inf(1)
	for l := 2; l <= 50; l++ {
		nu, err := IndexPrivacyNu(l, 1.0/50)
		if err != nil {
			t.Fatal(err)
		}
		if !(nu <= prev) || nu < 1 || nu > 50 {
			t.Errorf("l = %d: nu = %v (previous %v)", l, nu, prev)
		}
		prev = nu
		// Round trip: l is in the range that gives ν.
		if lo, hi, err := IndexLayers(nu, 1.0/50); err != nil || l < lo || l > hi {
			t.Errorf("l = %d, nu = %v: IndexLayers = [%d, %d] %v", l, nu, lo, hi, err)
		}
	}
	if nu, _ := IndexPrivacyNu(50, 1.0/50); nu != 1 {
		t.Errorf("nu at l = 1/beta = %v, want 1", nu)
	}
	if _, err := IndexPrivacyNu(1, 1.0/50); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("l = 1: %v", err)
	}
	if _, _, err := IndexLayers(60, 1.0/50); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("nu > 1/beta: %v", err)
	}
	if _, _, err := StrongestIndexPrivacy(30, 1000, 1.0/50); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("n_p < 2nβ: %v", err)
	}
	if _, _, err := StrongestIndexPrivacy(333, 1000, 0); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Errorf("beta = 0: %v", err)
	}
}

func TestCompareFLAME(t *testing.T) {
	dc := 0.01 / math.Pow(1000, 1.1)
	double := CompareFLAME(privacy.FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 157, N: 1000, NPad: 333, DeltaC: dc}, 2)
	if len(double) != 6 {
		t.Fatalf("SS-Double rows: %d, want 6: %v", len(double), double)
	}
	byMethod := map[string]privacy.Bound{}
	for _, b := range double {
		byMethod[b.Method] = b
		if b.Citation == "" || b.Method == "" {
			t.Errorf("row without method or citation: %+v", b)
		}
		if b.Valid && (b.Epsilon <= 0 || b.Epsilon > 78.5 || b.Reason != "") {
			t.Errorf("implausible valid row %+v", b)
		}
		if !b.Valid && b.Reason == "" {
			t.Errorf("invalid row without reason %+v", b)
		}
	}
	lap := byMethod["FLAME SS-Double/SS-Topk, Bennett (Laplace)"]
	if !lap.Valid || math.Abs(lap.Epsilon-0.30451) > 1e-4 {
		t.Errorf("Laplace row: %+v", lap)
	}
	if local := byMethod["local model (no shuffler)"]; !local.Valid || local.Epsilon != 78.5 || local.Delta != 0 {
		t.Errorf("local row: %+v", local)
	}
	simple := CompareFLAME(privacy.FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 7850, N: 1000, DeltaC: dc}, 0)
	if len(simple) != 3 || !simple[0].Valid || math.Abs(simple[0].Epsilon-0.92781) > 1e-4 {
		t.Errorf("SS-Simple rows: %v", simple)
	}
}

// TestFLAMECodeAssertions: FLAME's counters assert Corollary 1's condition
// ε < ln(n/ln(1/δ))/2 on the per-dimension budget before amplifying; all
// printed settings pass it.
func TestFLAMECodeAssertions(t *testing.T) {
	dc := flameDeltaC(1000)
	if err := Corollary1Condition(0.01, 1000, dc/7851); err != nil {
		t.Errorf("SS-Simple: %v", err)
	}
	for _, c := range []struct {
		epsLK  float64
		k, np  int
		beta   float64
		reason string
	}{{0.5, 157, 333, 1.0 / 50, "beta=1/50"}, {0.5, 785, 666, 1.0 / 10, "beta=1/10"}} {
		dcd := dc / float64(2*c.k+1)
		if err := Corollary1Condition(c.epsLK, c.np, dcd/c.beta); err != nil {
			t.Errorf("%s: %v", c.reason, err)
		}
	}
}

func flameDeltaC(n int) float64 { return 0.01 / math.Pow(float64(n), 1.1) }

func TestBlanketGamma(t *testing.T) {
	if g, _ := LaplaceBlanketGamma(2); math.Abs(g-math.Exp(-1)) > 1e-15 {
		t.Errorf("LaplaceBlanketGamma(2) = %v", g)
	}
	if _, err := LaplaceBlanketGamma(math.NaN()); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Errorf("LaplaceBlanketGamma(NaN): %v", err)
	}
}

// TestReproduceAPESUserLevelPLDP is the PLDP row of APES's user-level
// table (privacy's TestReproduceAPESUserLevel has the others): 1-DP per
// dimension, basic composition over d = 7850, printed 7850.
func TestReproduceAPESUserLevelPLDP(t *testing.T) {
	const d = 7850
	e, dl, err := BasicComposition(1, 0, d)
	if err != nil || e < 7850-1e-12 || e >= 7850.1 || dl != 0 {
		t.Errorf("PLDP: (%v, %v, %v), want printed 7850 at delta 0", e, dl, err)
	}
}

// TestCorollary1Refusals: BBGN'19 Corollary 1's condition fails for a
// large ε_l and for n < ln(1/δ), and holds at a valid point.
func TestCorollary1Refusals(t *testing.T) {
	if err := Corollary1Condition(5, 1000, 1e-6); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("Corollary 1: err = %v, want %v", err, privacy.ErrOutsideValidity)
	}
	if err := Corollary1Condition(0.1, 10, 1e-6); !errors.Is(err, privacy.ErrOutsideValidity) {
		t.Errorf("Corollary 1 n < ln(1/delta): err = %v, want %v", err, privacy.ErrOutsideValidity)
	}
	if err := Corollary1Condition(1, 100000, 1e-6); err != nil {
		t.Errorf("Corollary 1 at a valid point: %v", err)
	}
}

// TestSSDoubleWithLemma1MatchesTheorems checks that the generic pipeline
// with the R_{γ,b} closed form is exactly Theorems 3 and 4.
func TestSSDoubleWithLemma1MatchesTheorems(t *testing.T) {
	cfg := privacy.FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 157, N: 1000000, NPad: 1000000, DeltaC: 1e-6}
	got, err := privacy.SSDouble(cfg, privacy.RGBAmplifier{B: 2})
	if err != nil {
		t.Fatal(err)
	}
	dcd := cfg.DeltaC / float64(2*cfg.K+1)
	_, cd, err := FLAMETheorem3(0.5, 2, cfg.NPad, cfg.Beta(), dcd)
	if err != nil {
		t.Fatal(err)
	}
	e, d, _ := privacy.FLAMETheorem4(cd, dcd, cfg.K)
	if math.Abs(got.Epsilon-e) > 1e-12 || math.Abs(got.Delta-d) > 1e-20 || math.Abs(d-cfg.DeltaC) > 1e-18 {
		t.Errorf("SSDouble = (%v, %v), Theorems 3-4 give (%v, %v)", got.Epsilon, got.Delta, e, d)
	}
}
