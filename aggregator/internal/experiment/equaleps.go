package experiment

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/logreg"
)

// tableEqualEps compares the protocols at one proven ε over the whole run.
const tableEqualEps = "equal-eps"

// equalEpsIDs are the equal-epsilon table's rows in print order.
var equalEpsIDs = []string{"secagg", "dp-fl", "secagg-tuned", "secagg-tuned-one", "dp-fl-tuned", "ss-topk", "ss-double", "ss-simple", "apes"}

// equalEpsMethods builds the rows of the equal-epsilon table: every
// protocol on the same users (n per round in disjoint groups, FLAME's
// schedule; with n = every user, every user every round) for the same
// number of rounds, each with its noise calibrated so that
// privacy.Account's tightest proven ε over the whole run, for replacing
// one volunteer, is at most eps at δ = delta:
//
//   - secagg (PINE, the product's): per-server σ by the aggregator's
//     params.SecAggSigma (replace-one, secaggSpec), check-in rate
//     n/population, DP-FL's clip and server learning rate;
//   - DP-FL: the central Gaussian's noise multiplier σ/(2C);
//   - secagg-tuned-one: secagg-tuned with one server's noise (the same σ
//     once), the trusted-aggregator counterfactual; not the protocol
//   - the tuned rows (secagg-tuned, dp-fl-tuned): the same two at clip o.TunedClip and server learning rate o.TunedLR
//     (secure summation's defaults, 0.3 and 8), so that DP-FL is tuned
//     as carefully as secure summation;
//   - SS-Topk, SS-Double, SS-Simple: the local budget ε_l of one report;
//   - APES: a common factor on Table 2's Uniform2 personalized budgets.
//
// Each knob is searched by bracketing and bisection on the method's own
// claim function evaluated on a nominal run (n participants every round,
// the nominal padding), so the calibration and the table's ε come from
// the same code; the table then prints the claim of the actual run (a
// raised n_p can only lower it).
func equalEpsMethods(w *world, d, n int, o Options, eps, delta float64) (map[string]*method, error) {
	pop := len(w.users)
	rounds := o.Rounds
	fp := defaultFLAMEParams()
	fp.Delta = delta
	if o.Beta > 0 {
		fp.Beta = o.Beta
	}
	if o.NPRatio > 0 {
		fp.NPRatio = o.NPRatio
	}
	np := int(math.Ceil(float64(n)/fp.NPRatio - 1e-9))
	train := logreg.FLAMEConfig(10, 0.1)
	flame := func(id string, p flameParams) (*method, error) {
		ms, err := flameMethods(p, d, n, train)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.id == id {
				return m, nil
			}
		}
		return nil, fmt.Errorf("no method %q", id)
	}
	nominal := func(m *method, np int) float64 {
		run := &runResult{Users: n, Pop: pop}
		for r := 1; r <= rounds; r++ {
			run.Rounds = append(run.Rounds, roundRecord{Round: r, Participants: n, NP: np})
		}
		c := m.claim(run)
		if math.IsNaN(c.Total) {
			return math.Inf(1)
		}
		return c.Total
	}
	out := map[string]*method{}

	// Secure summation with DP-FL's clip and server learning rate, so
	// that the two rows differ only in the mechanism (PINE's fixed point,
	// two servers' discrete noise, RDP accounting) and the schedule's coins.
	sp := o.SecAgg.withDefaults()
	sp.Pop, sp.Q, sp.Rounds, sp.Eps, sp.Delta, sp.Sigma = pop, float64(n)/float64(pop), rounds, eps, delta, 0
	sp.Clip, sp.ServerLR = fp.DPClip, 1
	sa, err := secaggMethod(sp, d, pop, tableEqualEps)
	if err != nil {
		return nil, err
	}
	out["secagg"] = sa
	tuned := sp
	tuned.Clip, tuned.ServerLR = o.TunedClip, o.TunedLR
	if !(tuned.Clip > 0 && tuned.ServerLR > 0) {
		return nil, fmt.Errorf("tuned rows need a clip and a server learning rate > 0, got %v and %v", tuned.Clip, tuned.ServerLR)
	}
	st, err := secaggMethod(tuned, d, pop, tableEqualEps)
	if err != nil {
		return nil, err
	}
	st.id = "secagg-tuned"
	st.name += fmt.Sprintf(" (C %g, lr %g)", tuned.Clip, tuned.ServerLR)
	out["secagg-tuned"] = st
	// The counterfactual of the tuned row with one server's noise (the
	// same σ once: what a trusted aggregator would add; not the protocol,
	// and the accounting is the same, which never counts the second
	// share), so that the table shows what distributing trust costs.
	one := tuned
	one.NoiseShares = 1
	so, err := secaggMethod(one, d, pop, tableEqualEps)
	if err != nil {
		return nil, err
	}
	so.id = "secagg-tuned-one"
	so.name += fmt.Sprintf(" (C %g, lr %g), one server's noise", tuned.Clip, tuned.ServerLR)
	out["secagg-tuned-one"] = so

	// DP-FL: the smallest multiplier meeting eps (ε falls as it grows).
	mult, err := calibrateKnob(func(x float64) (float64, error) {
		p := fp
		p.DPMultiplier = x
		m, err := flame("dp-fl", p)
		if err != nil {
			return 0, err
		}
		return nominal(m, 0), nil
	}, eps, 1, false)
	if err != nil {
		return nil, fmt.Errorf("dp-fl: %w", err)
	}
	p := fp
	p.DPMultiplier = mult
	if out["dp-fl"], err = flame("dp-fl", p); err != nil {
		return nil, err
	}
	// Tuned DP-FL: the same multiplier (its ε depends on σ/(2C) only) at
	// the tuned clip, with the tuned server learning rate.
	p.DPClip = o.TunedClip
	dt, err := flame("dp-fl", p)
	if err != nil {
		return nil, err
	}
	if e := nominal(dt, 0); e > eps*(1+1e-9) {
		return nil, fmt.Errorf("dp-fl tuned: eps %v above %v", e, eps)
	}
	dt.id, dt.serverLR = "dp-fl-tuned", o.TunedLR
	dt.name += fmt.Sprintf(" (C %g, lr %g)", o.TunedClip, o.TunedLR)
	dt.note += fmt.Sprintf(", server lr %g", o.TunedLR)
	out["dp-fl-tuned"] = dt

	// The shuffle protocols: the largest eps_l meeting eps.
	for _, c := range []struct {
		id string
		np int
	}{{"ss-topk", np}, {"ss-double", np}, {"ss-simple", n}} {
		epsL, err := calibrateKnob(func(x float64) (float64, error) {
			p := fp
			p.EpsL = x
			m, err := flame(c.id, p)
			if err != nil {
				return 0, err
			}
			return nominal(m, c.np), nil
		}, eps, fp.EpsL, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.id, err)
		}
		p := fp
		p.EpsL = epsL
		m, err := flame(c.id, p)
		if err != nil {
			return nil, err
		}
		m.note = fmt.Sprintf("eps_l = %.4g; ", epsL) + m.note
		out[c.id] = m
	}

	// APES: the largest factor on the personalized budgets meeting eps.
	ap := defaultAPESParams()
	ap.DeltaUC = delta
	apes := func(scale float64) (*method, error) {
		a := ap
		a.Scale = scale
		ms, err := apesMethods(a, w, d, n, o.Seed)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.id == "apes" {
				return m, nil
			}
		}
		return nil, fmt.Errorf("no apes method")
	}
	scale, err := calibrateKnob(func(x float64) (float64, error) {
		m, err := apes(x)
		if err != nil {
			return 0, err
		}
		return nominal(m, 0), nil
	}, eps, 1, true)
	if err != nil {
		return nil, fmt.Errorf("apes: %w", err)
	}
	if out["apes"], err = apes(scale); err != nil {
		return nil, err
	}
	out["apes"].note = fmt.Sprintf("budgets U(0.05, 1) x %.4g per dimension; ", scale) + out["apes"].note
	for _, m := range out {
		m.table = tableEqualEps
	}
	return out, nil
}

// calibrateKnob returns the knob x at which eps(x) <= target, as close to
// the target as 0.5% of x allows: the largest such x when eps increases
// with x (a local budget), the smallest when it decreases (a noise
// multiplier). It brackets by doubling or halving from start and then
// bisects on a log scale; the returned x was evaluated and meets the
// target.
func calibrateKnob(eps func(float64) (float64, error), target, start float64, increasing bool) (float64, error) {
	ok := func(x float64) (bool, error) {
		e, err := eps(x)
		if err != nil {
			return false, err
		}
		return e <= target, nil
	}
	// good meets the target, bad does not.
	good, bad := math.NaN(), math.NaN()
	x := start
	for range 60 {
		fits, err := ok(x)
		if err != nil {
			return 0, err
		}
		if fits {
			good = x
		} else {
			bad = x
		}
		if !math.IsNaN(good) && !math.IsNaN(bad) {
			break
		}
		// Move towards the missing side.
		if fits == increasing {
			x *= 2
		} else {
			x /= 2
		}
	}
	if math.IsNaN(good) {
		return 0, fmt.Errorf("no value of the knob meets epsilon %g", target)
	}
	if math.IsNaN(bad) {
		return good, nil
	}
	for math.Abs(math.Log(bad/good)) > 0.005 {
		mid := math.Sqrt(good * bad)
		fits, err := ok(mid)
		if err != nil {
			return 0, err
		}
		if fits {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, nil
}
