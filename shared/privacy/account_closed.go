package privacy

import (
	"math"
	"slices"
)

// perRoundRow is one closed-form method's guarantee for one round.
type perRoundRow struct {
	bound  Bound
	caveat string
	family Family
	amp    Amplification
}

// flameCaveat marks the rows of FLAME Theorems 3-4 (subsampling
// amplification per dimension, then composition over 2k dimensions).
const flameCaveat = "FLAME Theorems 3-4: per-dimension subsampling amplification (Lemma 4) combined with composition over only the 2k changed dimensions; conditioned on a dimension being one of them, the user is in it with probability 1, so the argument is not re-derived here"

// topkCaveat marks SS-Topk rows: the reported coordinates depend on the
// data, so coordinate subsampling is not data-independent (FLAME argues
// the guarantee is shared with SS-Double given n_p).
const topkCaveat = "; SS-Topk's coordinate choice is data-dependent, so subsampling amplification does not apply as stated (FLAME, after Proposition 2)"

// closedFormRound returns the per-round closed-form bounds of release r at
// central δ = deltaRound, in a fixed order for a given protocol and
// randomizer.
func closedFormRound(r Release, deltaRound float64) []perRoundRow {
	var out []perRoundRow
	switch r.Protocol {
	case ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk:
		cfg := FLAMEConfig{EpsLocal: r.Eps0 * float64(r.K), D: r.D, K: r.K, N: r.N, NPad: r.NP, DeltaC: deltaRound}
		var amps []Amplifier
		switch r.Randomizer {
		case RandomizerLaplace:
			amps = append(amps, BennettAmplifier{Mech: LaplaceMechanism()})
		case RandomizerRGB:
			if r.Buckets >= 2 {
				rr, _ := RRMechanism(r.Buckets) // Buckets >= 2 cannot fail
				amps = append(amps, RGBAmplifier{B: r.Buckets}, BennettAmplifier{Mech: rr})
			}
		}
		amps = append(amps, BennettAmplifier{Mech: GenericMechanism()})
		if r.Protocol == ProtocolSSSimple {
			cfg.K = cfg.D
			cfg.EpsLocal = r.Eps0 * float64(r.D)
			for _, a := range amps {
				b, _ := SSSimple(cfg, a)
				out = append(out, perRoundRow{bound: b, family: FamilyFLAMEClosedForm, amp: AmplificationShuffle})
			}
			break
		}
		if cfg.K == cfg.D {
			// Every coordinate is sampled: FLAMEConfig reads K == D as
			// SS-Simple, and SS-Double degenerates to it.
			for _, a := range amps {
				b, _ := SSSimple(cfg, a)
				out = append(out, perRoundRow{bound: b, family: FamilyFLAMEClosedForm, amp: AmplificationShuffle})
			}
			break
		}
		cav := flameCaveat
		if r.Protocol == ProtocolSSTopk {
			cav += topkCaveat
		}
		for _, a := range amps {
			b, _ := SSDouble(cfg, a)
			out = append(out, perRoundRow{bound: b, caveat: cav, family: FamilyFLAMEClosedForm, amp: AmplificationShuffleFLAME2K})
		}
		for _, a := range amps {
			b, _ := SSDoubleShuffleOnly(cfg, a)
			if r.Protocol == ProtocolSSTopk && r.L > 1 {
				b = makeBound(b.Method, b.Citation, 0, 0, outside("SS-Topk with l = %d groups changes up to 2lk coordinates; Theorem 4 composes over 2k", r.L))
			}
			out = append(out, perRoundRow{bound: b, family: FamilyFLAMEClosedForm, amp: AmplificationShuffle})
		}
	case ProtocolAPES, ProtocolSAPES:
		// APES's bounds are per dimension; compose them over the
		// coordinates a replacement changes (d for APES, 2b for S-APES:
		// APES Proposition 1) by FLAME Theorem 1's min of basic and
		// advanced composition with δ_cd = δ_round/(c+1).
		c := coordinates(r)
		deltaCD := deltaRound
		if c > 1 {
			deltaCD = deltaRound / float64(c+1)
		}
		for _, b := range CompareAPES(r.PersonalEps, deltaCD)[1:] { // [0] is the no-shuffle row, covered by the local baseline
			if b.Valid && c > 1 {
				e, d, err := flameTheorem1(b.Epsilon, deltaCD, c)
				b = makeBound(b.Method, b.Citation+" + FLAME Theorem 1 over coordinates", e, d, err)
			}
			out = append(out, perRoundRow{bound: b, family: FamilyAPESClosedForm, amp: AmplificationShuffle})
		}
	}
	return out
}

// accountClosedForms composes the per-round closed forms over the rounds:
// by basic composition (each round at δ/T; Dwork and Roth 2014, Theorem
// 3.16) and, for T > 1, by advanced composition at the largest per-round
// ε (each round at δ/(2T), slack δ' = δ/2; Dwork, Rothblum, Vadhan 2010;
// FLAME Lemma 3). A method applies only if every run has it.
func accountClosedForms(runs []run, delta float64) []AccountRow {
	T := totalRounds(runs)
	return closedForms(runs, delta, float64(T), closedFormRound)
}

// closedForms is accountClosedForms with the per-round δ split over
// split >= T rounds (each round at δ/split for basic composition, at
// δ/(2·split) for advanced; with split >= T the totals stay within δ) and
// the per-round bounds taken from perRound (a cache in Session).
func closedForms(runs []run, delta, split float64, perRound func(Release, float64) []perRoundRow) []AccountRow {
	T := totalRounds(runs)
	for _, u := range runs {
		if u.r.Delta0 > 0 {
			return nil // the amplification theorems assume pure ε0-LDP reports
		}
	}
	type agg struct {
		row         AccountRow
		eps, del    float64
		maxEps      float64
		n           int
		invalid     error
		firstReason string
	}
	compose := func(deltaRound float64, advanced bool) []AccountRow {
		var order []string
		byName := map[string]*agg{}
		for _, u := range runs {
			for _, pr := range perRound(u.r, deltaRound) {
				a, ok := byName[pr.bound.Method]
				if !ok {
					a = &agg{row: AccountRow{Bound: pr.bound, Caveat: pr.caveat, Family: pr.family, Amplification: pr.amp, Composition: CompositionBasic}}
					byName[pr.bound.Method] = a
					order = append(order, pr.bound.Method)
				}
				a.n += u.count
				if !pr.bound.Valid {
					if a.firstReason == "" {
						a.firstReason = pr.bound.Reason
					}
					continue
				}
				if pr.caveat != "" {
					a.row.Caveat = pr.caveat
				}
				a.eps += float64(u.count) * pr.bound.Epsilon
				a.del += float64(u.count) * pr.bound.Delta
				a.maxEps = math.Max(a.maxEps, pr.bound.Epsilon)
			}
		}
		var out []AccountRow
		for _, name := range order {
			a := byName[name]
			row := a.row
			switch {
			case a.firstReason != "":
				row.Bound = makeBound(name, row.Citation, 0, 0, errString("%s", a.firstReason))
			case a.n != T:
				row.Bound = makeBound(name, row.Citation, 0, 0, outside("method does not apply to every round"))
			case advanced:
				e, d, err := AdvancedComposition(a.maxEps, deltaRound, T, delta/2)
				row.Bound = makeBound(name, row.Citation, e, d, err)
			default:
				row.Bound = makeBound(name, row.Citation, a.eps, a.del, nil)
			}
			if advanced {
				row.Composition = CompositionAdvanced
			}
			if T > 1 {
				if advanced {
					row.Method += ", advanced composition over rounds"
					row.Citation += "; Dwork-Rothblum-Vadhan advanced composition"
				} else {
					row.Method += ", basic composition over rounds"
					row.Citation += "; basic composition"
				}
			}
			out = append(out, row)
		}
		return out
	}
	out := compose(delta/split, false)
	if T > 1 {
		out = append(out, compose(delta/(2*split), true)...)
	}
	return slices.Clip(out)
}
