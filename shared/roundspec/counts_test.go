package roundspec

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestCountsRelease: a secure-summation round with an evaluation block
// and a question calibrated for an extra ε of 0.3 over 5 rounds: every
// party's spec has the blocks (the shares grow by their sizes); the
// ledger's Release is exactly privacy.SecAggJoint of the update and the
// blocks (σ, sensitivity, d) with the parts recorded; 5 such releases
// charge at most the update alone plus 0.3 (and more than the update
// alone); the volunteer's own release (LocalRelease) is the same Release
// at n = 1, so the ε the device computes is the ledger's.
func TestCountsRelease(t *testing.T) {
	const d, rounds, delta, extra = 40, 5, 1e-5, 0.3
	p, _, err := Build(d, 50, Options{Protocol: wire.ProtocolSecAgg, Sigma: 150000, Clip: 0.5, CheckInP: 1})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := CalibrateCounts(p, []wire.CountBlock{{Kind: wire.CountEval, N: 50}, {Kind: wire.CountQuestion, N: 3}}, rounds, delta, extra)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(pc)
	if err != nil {
		t.Fatal(err)
	}
	cs, sigmas := s.Counts()
	if cs == nil || len(sigmas) != 2 || sigmas[0] != pc.Counts.At(0).Sigma {
		t.Fatalf("counts %v, sigmas %v", cs, sigmas)
	}
	l0, h0, _ := plain.SharesSizes()
	l1, h1, _ := s.SharesSizes()
	bl := cs.Blocks()
	wantL := l0 + bl[0].Pine().PublicShareSize() + bl[0].Pine().LeaderShareSize() + bl[1].Pine().PublicShareSize() + bl[1].Pine().LeaderShareSize()
	wantH := h0 + bl[0].Pine().PublicShareSize() + bl[0].Pine().HelperShareSize() + bl[1].Pine().PublicShareSize() + bl[1].Pine().HelperShareSize()
	if l1 != wantL || h1 != wantH {
		t.Fatalf("sealed shares %d and %d, want %d and %d", l1, h1, wantL, wantH)
	}

	sa, _ := plain.SecAgg()
	parts := []privacy.SecAggPart{{Sigma: sa.Sigma, Sensitivity: sa.Sensitivity(), D: d},
		{Sigma: sigmas[0], Sensitivity: bl[0].Sensitivity(), D: bl[0].Dim()},
		{Sigma: sigmas[1], Sensitivity: bl[1].Sensitivity(), D: bl[1].Dim()}}
	sigma, sens, dim, err := privacy.SecAggJoint(parts)
	if err != nil {
		t.Fatal(err)
	}
	rel := s.Release(3, 50, 0)
	if rel.SecAggSigma != sigma || rel.SecAggSensitivity != sens || rel.D != dim || rel.K != dim || len(rel.SecAggParts) != 3 || rel.SecAggParts[2] != parts[2] {
		t.Fatalf("release %+v, want sigma %v sensitivity %v d %d", rel, sigma, sens, dim)
	}
	if err := rel.Validate(); err != nil {
		t.Fatal(err)
	}
	charge := func(s *Spec) float64 {
		rels := make([]privacy.Release, rounds)
		for i := range rels {
			rels[i] = s.Release(i+1, 50, 0)
		}
		rep, err := privacy.Account(rels, delta)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Rows[rep.Tightest].Epsilon
	}
	alone, joint := charge(plain), charge(s)
	if !(joint > alone && joint <= alone+extra*(1+1e-9)) {
		t.Fatalf("joint charge %v, update alone %v, extra %v", joint, alone, extra)
	}
	want, err := privacy.SecAggJointReplaceOneEpsilon(parts, 1, rounds, delta)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("update alone %.5f, joint %.5f (SecAggJointReplaceOneEpsilon %.5f), sigmas %.1f", alone, joint, want, sigmas)
	local := s.LocalRelease(0)
	if local.SecAggSigma != rel.SecAggSigma || local.SecAggSensitivity != rel.SecAggSensitivity || local.D != rel.D {
		t.Fatalf("the volunteer's release %+v differs from the ledger's %+v", local, rel)
	}
	if _, err := CalibrateCounts(pc, []wire.CountBlock{{Kind: wire.CountQuestion, N: 2}}, rounds, delta, extra); err == nil {
		t.Fatal("blocks calibrated twice")
	}
	if math.IsInf(rel.SecAggSensitivity, 0) {
		t.Fatal("infinite sensitivity")
	}
}
