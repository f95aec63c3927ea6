package privacy

import (
	"math"
	"testing"
)

// dgPMF returns the discrete Gaussian N_Z(0, σ²) on [-40σ-m, 40σ+m] (the
// mass beyond is below 1e-300) as probabilities with the offset of z = 0.
func dgPMF(sigma, m float64) ([]float64, int) {
	lo := int(math.Floor(-40*sigma - m))
	hi := int(math.Ceil(40*sigma + m))
	p := make([]float64, hi-lo+1)
	var s float64
	for z := lo; z <= hi; z++ {
		p[z-lo] = math.Exp(-float64(z) * float64(z) / (2 * sigma * sigma))
		s += p[z-lo]
	}
	for i := range p {
		p[i] /= s
	}
	return p, -lo
}

// jointLosses returns the privacy-loss distribution of the product of
// two one-dimensional discrete Gaussians (σ1, shift v1) and (σ2, shift
// v2): the exact outcomes' probabilities under both worlds, by a double
// sum over the lattice (independent of the accountant's code).
func jointDelta(s1, v1, s2, v2, eps float64) float64 {
	p1, o1 := dgPMF(s1, v1)
	p2, o2 := dgPMF(s2, v2)
	iv1, iv2 := int(v1), int(v2)
	ee := math.Exp(eps)
	var d float64
	for a := range p1 {
		qa := 0.0
		if b := a - iv1; b >= 0 && b < len(p1) {
			qa = p1[b]
		}
		_ = o1
		for c := range p2 {
			qc := 0.0
			if b := c - iv2; b >= 0 && b < len(p2) {
				qc = p2[b]
			}
			_ = o2
			d += max(0, p1[a]*p2[c]-ee*qa*qc)
		}
	}
	return d
}

// jointRenyi is D_α(P‖Q) of the same pair, exactly summed (α > 1).
func jointRenyi(s1, v1, s2, v2, a float64) float64 {
	one := func(s, v float64) float64 {
		p, _ := dgPMF(s, v)
		iv := int(v)
		var sum float64
		for i := range p {
			if b := i - iv; b >= 0 && b < len(p) && p[b] > 0 && p[i] > 0 {
				sum += math.Exp(a*math.Log(p[i]) + (1-a)*math.Log(p[b]))
			}
		}
		return math.Log(sum) / (a - 1)
	}
	return one(s1, v1) + one(s2, v2)
}

// TestSecAggJointAgainstExactPair: a round releasing a one-coordinate
// update (σ = 6, Δ = 3) and a one-coordinate count (σ = 5, Δ = 2) at
// small σ, where the exact privacy curve of the product of the two
// discrete Gaussians can be summed over the lattice. Replace-one moves
// them by 2Δ = 6 and 4. (1) The exact Rényi divergences at α = 2, 4, 8
// are at most the joint RDP α·Σ(2Δ_j)²/(2σ_j²) that SecAggJoint's Release
// carries, and above 99% of it (the bound is tight). (2) At the charged
// ε (SecAggJointReplaceOneEpsilon, δ = 1e-5, 1 round, q = 1) the exact δ
// of the pair is at most 1e-5; at 0.9 times that ε it is above 1e-5
// (the charge is within 10% of exact). Exact sums, no sampling.
func TestSecAggJointAgainstExactPair(t *testing.T) {
	parts := []SecAggPart{{Sigma: 6, Sensitivity: 3, D: 1}, {Sigma: 5, Sensitivity: 2, D: 1}}
	sigma, sens, d, err := SecAggJoint(parts)
	if err != nil {
		t.Fatal(err)
	}
	if d != 2 || sigma != 6 {
		t.Fatalf("joint release sigma %v d %d", sigma, d)
	}
	rho := 4 * sens * sens / (2 * sigma * sigma) // replace-one, per α
	want := 36.0/72 + 16.0/50
	// At least the RDP sum, at most the pair row's Σ(2Δ_j)²/(2τ_j²),
	// τ_j² = σ_j² − 4.
	if hi := 36.0/(2*32) + 16.0/(2*21); rho < want || rho > hi*(1+1e-12) {
		t.Errorf("joint replace-one rho %v outside [%v, %v]", rho, want, hi)
	}
	for _, a := range []float64{2, 4, 8} {
		exact := jointRenyi(6, 6, 5, 4, a)
		t.Logf("alpha %v: exact D %.6f, charged curve %.6f", a, exact, a*rho)
		if exact > a*rho*(1+1e-9) || exact < 0.99*a*want {
			t.Errorf("alpha %v: exact Renyi %v vs bound %v", a, exact, a*rho)
		}
	}
	eps, err := SecAggJointReplaceOneEpsilon(parts, 1, 1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	dl := jointDelta(6, 6, 5, 4, eps)
	dl9 := jointDelta(6, 6, 5, 4, 0.9*eps)
	t.Logf("charged eps %.4f: exact delta %.3g (target 1e-5); at 0.9 eps: %.3g", eps, dl, dl9)
	if dl > 1e-5 {
		t.Errorf("exact delta %v at the charged eps %v exceeds 1e-5", dl, eps)
	}
	if dl9 <= 1e-5 {
		t.Errorf("the charge %v is more than 10%% above the exact epsilon", eps)
	}
	// The joint charge exceeds each part's alone.
	for j, p := range parts {
		e1, err := SecAggReplaceOneEpsilon(p.Sigma, p.Sensitivity, 1, 1, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if !(e1 < eps) {
			t.Errorf("part %d alone charges %v, joint %v", j, e1, eps)
		}
	}
}

// TestSecAggJointAccount: the Release that SecAggJoint describes is
// charged by the ledger's accountant (Account) exactly what
// SecAggJointReplaceOneEpsilon states, and a single part reproduces the
// plain secure-summation charge.
func TestSecAggJointAccount(t *testing.T) {
	parts := []SecAggPart{{Sigma: 190344, Sensitivity: 32814, D: 7850}, {Sigma: 800, Sensitivity: 283, D: 2}, {Sigma: 300, Sensitivity: 111, D: 3}}
	sigma, sens, d, err := SecAggJoint(parts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := SecAggJointReplaceOneEpsilon(parts, 1, 5, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Release
	for r := 1; r <= 5; r++ {
		rs = append(rs, Release{Round: r, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: d, N: 100,
			SecAggSigma: sigma, SecAggSensitivity: sens, CheckInRate: 1})
	}
	rep, err := Account(rs, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tightest < 0 {
		t.Fatal("no valid row")
	}
	got := rep.Rows[rep.Tightest].Epsilon
	t.Logf("5 joint rounds: ledger %.6f, SecAggJointReplaceOneEpsilon %.6f", got, want)
	if math.Abs(got-want) > 1e-9*want {
		t.Errorf("ledger charges %v, want %v", got, want)
	}
	s1, d1, _, err := SecAggJoint(parts[:1])
	if err != nil || s1 != parts[0].Sigma || d1 < parts[0].Sensitivity || d1 > parts[0].Sensitivity*(1+1e-9) {
		t.Errorf("single part: sigma %v sensitivity %v err %v", s1, d1, err)
	}
	if _, _, _, err := SecAggJoint([]SecAggPart{parts[0], {Sigma: 3, Sensitivity: 1, D: 1}}); err == nil {
		t.Error("sigma 3 accepted")
	}
}

// TestCalibrateSecAggExtra: the calibrated multiplier spends at most the
// extra ε on top of the update's charge, and 0.1% less noise would spend
// more (the smallest, to the bisection's 1e-6 plus the charge's slope).
func TestCalibrateSecAggExtra(t *testing.T) {
	update := SecAggPart{Sigma: 190344, Sensitivity: 32814, D: 7850}
	extra := []SecAggPart{{Sensitivity: 283, D: 2}, {Sensitivity: 111, D: 3}}
	base, err := SecAggReplaceOneEpsilon(update.Sigma, update.Sensitivity, 1, 5, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []float64{0.1, 0.5} {
		m, sigmas, err := CalibrateSecAggExtra(update, extra, 1, 5, 1e-5, x)
		if err != nil {
			t.Fatal(err)
		}
		eval := func(f float64) float64 {
			parts := []SecAggPart{update}
			for j, p := range extra {
				parts = append(parts, SecAggPart{Sigma: sigmas[j] * f, Sensitivity: p.Sensitivity, D: p.D})
			}
			e, err := SecAggJointReplaceOneEpsilon(parts, 1, 5, 1e-5)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		e := eval(1)
		t.Logf("extra %v: update alone %.5f, multiplier %.4f, sigmas %.1f, joint %.5f", x, base, m, sigmas, e)
		if e > base+x {
			t.Errorf("extra %v: joint charge %v above %v", x, e, base+x)
		}
		if eval(0.999) <= base+x {
			t.Errorf("extra %v: 0.1%% less noise still fits: not the smallest", x)
		}
	}
}
