package privacy

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy/amplify"
	"github.com/blanket-fl/blanket/shared/privacy/pld"
	"github.com/blanket-fl/blanket/shared/privacy/rdp"
)

// Session is an incremental accountant: the composed state of every
// method after the releases added so far, so that adding one more round
// costs one composition per method instead of recomputing the whole
// composition (Account). It reports the same kinds of rows as Account,
// with the same guarantees (each row is an upper bound on the central
// (ε, δ) of the adaptive composition of the added releases, against
// replacement of one user's data, at the session's δ); the numbers can
// differ slightly from Account's because the composition order and the
// grid differ:
//
//   - PLD rows hold the composed privacy loss distribution of the rounds
//     so far and convolve it with the new round's (Zhu-Dong-Wang 2022
//     Theorem 10: the product of dominating pairs dominates the adaptive
//     composition, in any order). The grid width h of a row is fixed by
//     the first release (h = clamp(L/256, 1e-6, 1e-2), as in Account);
//     every discretization is pessimistic (pld.ConnectDots dominates), the
//     truncated tails go to infinite loss and the FFT error bound is added
//     to δ, so a later round whose own L is smaller only makes the row
//     looser, never invalid. The per-round PLD of a release is cached, so
//     rounds with the same pair (e.g. padded rounds at the same n_p) cost
//     one convolution each.
//   - RDP rows hold the summed curve (Mironov 2017 Proposition 1) and
//     convert it at every report.
//   - Closed forms need every round's per-round bound at the round's δ.
//     With T rounds, the per-round δ is δ/S (basic composition) and
//     δ/(2S) (advanced) with S the power of two >= T instead of Account's
//     δ/T: the total δ stays within δ (T/S <= 1), and the per-round bounds
//     are cached per release and S, so they are recomputed only when T
//     crosses a power of two (amortized O(1) per round; the closed forms
//     are a few microseconds to a millisecond per distinct release).
//   - Shuffled check-in's Approach 2 splits δ by the summed check-in rate
//     of all rounds, so it is recomputed over the runs of identical
//     releases at every report (O(runs)); it is a comparison row.
//
// A row that fails (a composition exceeds the grid, a method stops
// applying to a later release) stays invalid for every later round: it
// never comes back with a number. A Session is immutable: With returns a
// new one and leaves the receiver unchanged, so a caller can ask what a
// round would cost (CanCharge) and discard the answer. It is safe for
// concurrent use.
type Session struct {
	delta  float64
	rounds int
	last   int
	runs   []run
	slots  []slot
	closed bool        // whether the first release enabled closed forms
	local  localTotals // the rows without amplification (account.go)
	lgauss localGauss  // the local Gaussian row (account_gaussian.go)
	report Report
	caches *sessionCaches
}

// NewSession returns an empty session accounting at total central
// δ = delta, 0 < delta < 1.
func NewSession(delta float64) (*Session, error) {
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return nil, err
	}
	return &Session{delta: delta, report: Report{Delta: delta, Tightest: -1, TightestAny: -1}, caches: newSessionCaches()}, nil
}

// Delta returns the session's total δ.
func (s *Session) Delta() float64 { return s.delta }

// Rounds returns how many releases were added.
func (s *Session) Rounds() int { return s.rounds }

// Report returns the rows after the releases added so far (Rounds = 0,
// no rows, Tightest = -1 when none was added).
func (s *Session) Report() Report {
	r := s.report
	r.Rows = slices.Clone(r.Rows)
	return r
}

// With returns the session after also composing rel, and its report; s
// is unchanged. rel must validate (Release.Validate) and its round must
// follow the last added round; otherwise the error wraps
// ErrInvalidParameter. Methods that fail are invalid rows of the report,
// not errors; Report.Tightest is -1 when no proven row is valid, and then
// nothing may be released on this report.
func (s *Session) With(rel Release) (*Session, Report, error) {
	return s.WithRounds(rel, 1)
}

// WithRounds is With for count >= 1 identical rounds numbered rel.Round,
// rel.Round+1, ..., rel.Round+count-1 (composed by squaring: O(log count)
// convolutions per PLD row).
func (s *Session) WithRounds(rel Release, count int) (*Session, Report, error) {
	if err := check.Count(ErrInvalidParameter, "count", count, 1); err != nil {
		return nil, Report{}, err
	}
	if err := rel.Validate(); err != nil {
		return nil, Report{}, err
	}
	if s.rounds > 0 && rel.Round <= s.last {
		return nil, Report{}, invalid("round %d does not follow the last added round %d", rel.Round, s.last)
	}
	rel.PersonalEps = slices.Clone(rel.PersonalEps)
	n := &Session{delta: s.delta, rounds: s.rounds + count, last: rel.Round + count - 1, caches: s.caches, closed: s.closed, local: s.local, lgauss: s.lgauss}
	// Runs: copy-on-write (the receiver's slice is never written).
	n.runs = make([]run, len(s.runs), len(s.runs)+1)
	copy(n.runs, s.runs)
	if k := len(n.runs); k > 0 && sameRelease(n.runs[k-1].r, rel) {
		n.runs[k-1].count += count
	} else {
		n.runs = append(n.runs, run{r: rel, count: count})
	}
	if s.rounds == 0 {
		n.slots = newSlots(rel)
		n.closed = rel.Delta0 == 0
	} else {
		n.slots = slices.Clone(s.slots)
	}
	// Local model.
	n.lgauss = n.lgauss.add(rel, count)
	n.local = n.local.add(rel, count)
	// Compose the new round onto every slot, in parallel (each slot is
	// independent; the caches lock).
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i := range n.slots {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n.slots[i] = n.slots[i].add(n.caches, rel, count, n.rounds)
		}()
	}
	wg.Wait()
	n.report = n.buildReport()
	return n, n.Report(), nil
}

// WithAll returns the session after also composing rels (strictly
// increasing rounds, all after the last added round) in one step; s is
// unchanged. Releases whose contribution to a method is identical (for
// the shuffle pairs: the same pair, coordinates and rate, so padded rounds
// that differ only in n) are composed together by squaring, in any order
// (product composition does not depend on the order, Zhu-Dong-Wang 2022
// Theorem 10), so replaying T recorded rounds costs O(distinct · log T)
// convolutions per method instead of T. The rows are those of adding the
// releases one by one, up to the grid (TestSessionWithAllMatches).
func (s *Session) WithAll(rels []Release) (*Session, Report, error) {
	if len(rels) == 0 {
		return s, s.Report(), nil
	}
	last, any := s.last, s.rounds > 0
	for _, r := range rels {
		if err := r.Validate(); err != nil {
			return nil, Report{}, err
		}
		if any && r.Round <= last {
			return nil, Report{}, invalid("round %d does not follow round %d", r.Round, last)
		}
		last, any = r.Round, true
	}
	n := &Session{delta: s.delta, rounds: s.rounds + len(rels), last: last, caches: s.caches, closed: s.closed, local: s.local, lgauss: s.lgauss}
	n.runs = make([]run, len(s.runs), len(s.runs)+len(rels))
	copy(n.runs, s.runs)
	for _, r := range rels {
		r.PersonalEps = slices.Clone(r.PersonalEps)
		if k := len(n.runs); k > 0 && sameRelease(n.runs[k-1].r, r) {
			n.runs[k-1].count++
		} else {
			n.runs = append(n.runs, run{r: r, count: 1})
		}
		n.lgauss = n.lgauss.add(r, 1)
		n.local = n.local.add(r, 1)
	}
	if s.rounds == 0 {
		n.slots = newSlots(rels[0])
		n.closed = rels[0].Delta0 == 0
	} else {
		n.slots = slices.Clone(s.slots)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i := range n.slots {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for _, g := range groupFor(n.slots[i].kind, rels) {
				n.slots[i] = n.slots[i].add(n.caches, g.r, g.count, n.rounds)
			}
		}()
	}
	wg.Wait()
	n.report = n.buildReport()
	return n, n.Report(), nil
}

// groupFor groups rels by their contribution to a slot of the kind, in
// order of first appearance, with counts.
func groupFor(kind slotKind, rels []Release) []run {
	var out []run
	index := map[string]int{}
	for _, r := range rels {
		k := r
		k.Round = 0
		if (kind == slotPLD || kind == slotRDP) && (r.Protocol == ProtocolSSDouble || r.Protocol == ProtocolSSTopk) && r.K < r.D && r.NP >= 2 {
			// The padded shuffle's population is n_p (shuffleSetting):
			// n does not enter the pair.
			k.N = 0
		}
		key := fmt.Sprintf("%v", k)
		if i, ok := index[key]; ok {
			out[i].count++
			continue
		}
		index[key] = len(out)
		out = append(out, run{r: r, count: 1})
	}
	return out
}

// buildReport assembles the rows in Account's order.
func (s *Session) buildReport() Report {
	rep := Report{Delta: s.delta, Rounds: s.rounds}
	if s.closed {
		split := float64(uint64(1) << bits.Len64(uint64(s.rounds-1)))
		rep.Rows = append(rep.Rows, closedForms(s.runs, s.delta, split, s.caches.closedForm)...)
	}
	rows := make([]AccountRow, len(s.slots))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i := range s.slots {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rows[i] = s.slots[i].row(s)
		}()
	}
	wg.Wait()
	rep.Rows = append(rep.Rows, rows...)
	rep.Rows = append(rep.Rows, s.local.rows()...)
	if s.rounds > 0 {
		rep.Rows = append(rep.Rows, s.lgauss.rows(s.delta)...)
	}
	finishRows(rep.Rows)
	rep.Tightest, rep.TightestAny = tightest(rep.Rows, s.delta)
	return rep
}

// slotKind is the kind of an incremental row.
type slotKind int

const (
	slotPLD slotKind = iota
	slotRDP
	slotTheorem2
	slotApproach2
	slotGaussExact
	slotGaussPLD
	slotGaussRDP
	slotSecAgg
	slotSecAggReplace
	slotSecAggPair
)

// slot is the composed state of one row. Values are immutable once
// stored in a Session (add returns a modified copy; curves are copied).
type slot struct {
	kind   slotKind
	m      numericalMethod
	mode   subsampleMode
	h      float64 // grid of the per-coordinate pairs
	hr     float64 // grid of the composition over rounds (>= h)
	total  *pld.PLD
	curve  []float64
	curve2 []float64 // slotSecAggReplace: the 2Δ curve without check-in amplification
	// logKeep is slotSecAggPair's Σ ln(1−θ) (invMu2 its Σ μ²).
	logKeep float64
	caveat  string
	err     error // sticky: the row stays invalid
	// single is the first round's mixture when that round is a single
	// shuffle of one coordinate (exact ε for a one-round session).
	single  *amplify.Mixture
	invMu2  float64
	checkIn bool
	partial bool // secure aggregation: some round had check-in rate < 1
}

// newSlots lays out the rows the first release calls for, in Account's
// order: PLD pair rows, RDP pair rows, check-in rows, central Gaussian
// rows, secure-aggregation rows.
func newSlots(r Release) []slot {
	var out []slot
	runs := []run{{r: r, count: 1}}
	modes := numericalModes(runs)
	checkIn := r.Protocol == ProtocolCheckIn
	for _, m := range numericalMethods() {
		for _, mode := range modes {
			if _, _, _, applicable, _ := pairSetup(runs, m, mode); applicable {
				out = append(out, slot{kind: slotPLD, m: m, mode: mode, checkIn: checkIn})
			}
		}
	}
	for _, mode := range modes {
		for _, m := range numericalMethods() {
			if _, _, _, applicable, _ := pairSetup(runs, m, mode); applicable {
				out = append(out, slot{kind: slotRDP, m: m, mode: mode, checkIn: checkIn})
			}
		}
	}
	switch r.Protocol {
	case ProtocolCheckIn:
		out = append(out, slot{kind: slotTheorem2, caveat: theorem2Caveat}, slot{kind: slotApproach2})
	case ProtocolCentralGaussian:
		out = append(out, slot{kind: slotGaussRDP}, slot{kind: slotGaussExact}, slot{kind: slotGaussPLD})
	case ProtocolSecAgg:
		out = append(out, secaggSlots()...)
	}
	return out
}

// add composes count rounds of release r onto the slot; t is the
// session's number of rounds after them.
func (sl slot) add(c *sessionCaches, r Release, count, t int) slot {
	if sl.err != nil {
		return sl
	}
	var err error
	switch sl.kind {
	case slotPLD:
		err = sl.addPLD(c, r, count, t)
	case slotRDP:
		err = sl.addRDP(c, r, count)
	case slotTheorem2:
		err = sl.addTheorem2(c, r, count)
	case slotApproach2:
		if r.Protocol != ProtocolCheckIn {
			err = outside("round %d is not a check-in release", r.Round)
		}
	case slotGaussExact, slotGaussPLD, slotGaussRDP:
		err = sl.addGaussian(c, r, count)
	case slotSecAgg, slotSecAggReplace:
		err = sl.addSecAgg(r, count)
	case slotSecAggPair:
		err = sl.addSecAggPair(r, count)
	}
	if err != nil {
		sl.err = err
		sl.total, sl.curve, sl.curve2, sl.single = nil, nil, nil, nil
	}
	return sl
}

func (sl *slot) addPLD(c *sessionCaches, r Release, count, t int) error {
	runs := []run{{r: r, count: 1}}
	mixes, minLoss, caveat, applicable, err := pairSetup(runs, sl.m, sl.mode)
	if !applicable {
		return outside("method does not apply to round %d", r.Round)
	}
	if err != nil {
		return err
	}
	if caveat != "" {
		sl.caveat = caveat
	}
	if sl.h == 0 {
		sl.h = math.Min(1e-2, math.Max(1e-6, minLoss/defaultGridDivisor))
	}
	n, eps0, _ := shuffleSetting(r) // checked by pairSetup
	pair, err := c.pair(sl.m, r, n, eps0, mixes[0])
	if err != nil {
		return err
	}
	per, err := c.finalPLD(r, pair, sl.h, &sl.hr, sl.mode)
	if err != nil {
		return err
	}
	if count > 1 {
		if per, err = per.SelfCompose(count); err != nil {
			return fmt.Errorf("composing %d rounds: %w", count, err)
		}
	}
	sl.single = nil
	if t == 1 && coordinates(r) == 1 && sl.mode == noSubsampling {
		sl.single = mixes[0]
	}
	if sl.total == nil {
		sl.total = per
		return nil
	}
	if sl.total, err = sl.total.Compose(per); err != nil {
		return fmt.Errorf("composing round %d: %w", r.Round, err)
	}
	return nil
}

func (sl *slot) addRDP(c *sessionCaches, r Release, count int) error {
	runs := []run{{r: r, count: 1}}
	mixes, _, caveat, applicable, err := pairSetup(runs, sl.m, sl.mode)
	if !applicable {
		return outside("method does not apply to round %d", r.Round)
	}
	if err != nil {
		return err
	}
	if caveat != "" {
		sl.caveat = caveat
	}
	n, eps0, _ := shuffleSetting(r)
	pair, err := c.pair(sl.m, r, n, eps0, mixes[0])
	if err != nil {
		return err
	}
	cc, err := c.coordinateCurve(pair, r, sl.mode)
	if err != nil {
		return err
	}
	coords := coordinates(r)
	if sl.mode != noSubsampling {
		coords = subsampledCoordinates(r, sl.mode)
	}
	sl.curve = addCurve(sl.curve, cc.Eps, float64(coords)*float64(count))
	return nil
}

func (sl *slot) addTheorem2(c *sessionCaches, r Release, count int) error {
	switch {
	case r.Protocol != ProtocolCheckIn:
		return outside("round %d is not a check-in release", r.Round)
	case r.Delta0 > 0:
		return outside("Theorem 2 needs a pure ε0-LDP randomizer (delta0 = %g)", r.Delta0)
	case r.Randomizer != RandomizerRGB && r.Randomizer != RandomizerGeneric:
		return outside("Theorem 2 is stated for discrete ε0-LDP randomizers; %q is continuous", r.Randomizer)
	case r.Population < 2 || !(r.CheckInRate > 0):
		return outside("check-in needs the population and the check-in rate")
	case (1-theorem2Delta)*float64(r.Population)*r.CheckInRate < 1:
		return outside("Theorem 2 needs (1-Δ)·n·p >= 1, got %g", (1-theorem2Delta)*float64(r.Population)*r.CheckInRate)
	}
	cc, err := c.theorem2(r)
	if err != nil {
		return fmt.Errorf("theorem 2: %w", err)
	}
	sl.curve = addCurve(sl.curve, cc.Eps, float64(count))
	return nil
}

func (sl *slot) addGaussian(c *sessionCaches, r Release, count int) error {
	if r.Protocol != ProtocolCentralGaussian {
		return outside("round %d is not a central Gaussian release", r.Round)
	}
	sigma := r.NoiseMultiplier
	switch sl.kind {
	case slotGaussExact:
		sl.invMu2 += float64(count) / (sigma * sigma)
	case slotGaussPLD:
		if sl.h == 0 {
			sl.h = math.Min(1e-3, math.Max(1e-6, 1/sigma/1000))
		}
		p, err := c.gaussianPLD(sigma, sl.h)
		if err == nil && count > 1 {
			p, err = p.SelfCompose(count)
		}
		if err != nil {
			return err
		}
		if sl.total == nil {
			sl.total = p
		} else if sl.total, err = sl.total.Compose(p); err != nil {
			return err
		}
	case slotGaussRDP:
		g, err := rdp.GaussianRDP(sigma, 1, rdpOrders())
		if err != nil {
			return err
		}
		sl.curve = addCurve(sl.curve, g.Eps, float64(count))
	}
	return nil
}

// roundGridBuckets is how many grid points a round's PLD keeps when it is
// regridded for the composition over rounds.
const roundGridBuckets = 1024

// roundGrid returns the grid width the composition over rounds uses: the
// first round's PLD (already composed over its coordinates on the fine
// grid h) spans W nats; with h_r = W/roundGridBuckets each round keeps
// about a thousand points and T rounds about a thousand times sqrt(T)
// (the truncated composition widens like its standard deviation), so a
// charge costs one small FFT per method whatever T is. Regridding is
// pessimistic (pld.PLD.Regrid, connect-the-dots: the composed δ(ε) is
// never below that of the fine grid); measured against the fine grid the
// composed ε moves by under 0.5% (TestRegridDominates,
// TestSessionMatchesAccount). Returns h when the round is already coarse
// enough or spans too many nats to regrid.
func roundGrid(per *pld.PLD, h float64) float64 {
	st := per.Stats()
	w := st.MaxLoss - st.MinLoss
	hr := math.Min(1, w/roundGridBuckets)
	if !(hr > 1.5*h) || w > 700 {
		return h
	}
	return hr
}

// addCurve returns a new slice holding a + w·b (a may be nil).
func addCurve(a, b []float64, w float64) []float64 {
	out := make([]float64, len(b))
	copy(out, a)
	for j := range out {
		out[j] += w * b[j]
	}
	return out
}

// row reports the slot's composed guarantee at the session's δ.
func (sl slot) row(s *Session) AccountRow {
	var row AccountRow
	suffix := ""
	if s.rounds > 1 {
		suffix = ", composed over rounds"
	}
	switch sl.kind {
	case slotPLD:
		method := "PLD " + sl.m.name
		cite := sl.m.cite + "; PLD/FFT composition (Koskela et al. 2020, connect-the-dots)"
		switch sl.mode {
		case poissonCoordinates:
			method += ", subsampled β, all d coordinates"
			cite += "; subsampled pair (Zhu-Dong-Wang 2022)"
		case flameCoordinates:
			method += ", subsampled β, 2k coordinates (FLAME-style)"
			cite += "; subsampled pair (Zhu-Dong-Wang 2022)"
		}
		method += suffix
		row.Family, row.Amplification, row.Composition = sl.m.family, amplificationOf(sl.mode, sl.checkIn), CompositionPLD
		var eps float64
		err := sl.err
		if err == nil && s.rounds == 1 && sl.single != nil {
			eps, err = sl.single.Epsilon(s.delta)
			cite = sl.m.cite + "; exact hockey-stick divergence of the pair"
			row.Composition = CompositionExact
		} else if err == nil {
			eps, err = sl.total.Epsilon(s.delta)
			if err == nil && math.IsInf(eps, 1) {
				err = outside("delta %g is below the PLD's infinite-loss mass", s.delta)
			}
		}
		row.Bound = makeBound(method, cite, eps, s.delta, err)
	case slotRDP:
		method := "RDP " + sl.m.name
		cite := sl.m.cite + "; exact Rényi divergence of the pair; " + rdpConversionCite
		switch sl.mode {
		case poissonCoordinates:
			method += ", subsampled β, all d coordinates"
			cite += "; subsampled pair (Zhu-Dong-Wang 2022), both orders"
		case flameCoordinates:
			method += ", subsampled β, 2k coordinates (FLAME-style)"
			cite += "; subsampled pair (Zhu-Dong-Wang 2022), both orders"
		}
		row.Family, row.Amplification, row.Composition = sl.m.family, amplificationOf(sl.mode, sl.checkIn), CompositionRDP
		row.Bound = sl.rdpBound(method+suffix, cite, rdpOrders(), s)
	case slotTheorem2:
		method := "RDP check-in Theorem 2 (discrete ε0-LDP, Δ = 1/2)" + suffix
		cite := "Liew-Hasegawa-Takahashi, shuffled check-in Thm 2 (Eq. 7, e^{ε0} reading of Lemma 4); " + rdpConversionCite
		row.Family, row.Amplification, row.Composition = FamilyCheckInThm2, AmplificationShuffleCheckIn, CompositionRDP
		row.Bound = sl.rdpBound(method, cite, rdpIntegerOrders(), s)
	case slotApproach2:
		if sl.err != nil {
			row.Bound = makeBound("RDP check-in Approach 2 (generic (ε0, δ0)-LDP)"+suffix, "Liew-Hasegawa-Takahashi Table 1 Approach 2", 0, 0, sl.err)
		} else {
			row = accountApproach2(s.runs, s.delta, rdpOrders())
		}
		row.Family, row.Amplification, row.Composition = FamilyCheckInApp2, AmplificationShuffleCheckIn, CompositionRDP
	case slotGaussExact:
		var eps float64
		err := sl.err
		if err == nil {
			eps, err = gaussianEpsilon(math.Sqrt(sl.invMu2), s.delta)
		}
		row.Bound = makeBound("central Gaussian, exact", "Balle-Wang ICML'18 Thm 8; Dong-Roth-Su 2022 Cor. 2", eps, s.delta, err)
		row.Family, row.Amplification, row.Composition = FamilyCentralGaussian, AmplificationNone, CompositionExact
	case slotGaussPLD:
		var eps float64
		err := sl.err
		if err == nil {
			eps, err = sl.total.Epsilon(s.delta)
			if err == nil && math.IsInf(eps, 1) {
				err = outside("delta %g below the PLD's infinite-loss mass", s.delta)
			}
		}
		row.Bound = makeBound("central Gaussian, PLD", "pld.Gaussian, PLD/FFT composition (Koskela et al. 2020)", eps, s.delta, err)
		row.Family, row.Amplification, row.Composition = FamilyCentralGaussian, AmplificationNone, CompositionPLD
	case slotGaussRDP:
		row.Bound = sl.rdpBound("central Gaussian, RDP", "Mironov 2017 Prop. 7; "+rdpConversionCite, rdpOrders(), s)
		row.Family, row.Amplification, row.Composition = FamilyCentralGaussian, AmplificationNone, CompositionRDP
	case slotSecAgg, slotSecAggReplace, slotSecAggPair:
		row = sl.secAggRow(s)
	}
	row.Caveat = sl.caveat
	return row
}

// sessionOptimalWindow is the session's search window for the optimal
// RDP conversion: one order each side of Balle's minimiser (Account uses
// optimalWindow = 4; the session's RDP rows can only be looser by the
// difference, measured below 0.1% in TestSessionMatchesAccount's cases,
// and stay valid). It keeps the conversion of the RDP rows within the
// per-charge budget.
const sessionOptimalWindow = 1

func (sl slot) rdpBound(method, cite string, orders []float64, s *Session) Bound {
	if sl.err != nil {
		return makeBound(method, cite, 0, 0, sl.err)
	}
	eps, err := rdpEpsilonWindow(rdp.Curve{Orders: orders, Eps: slices.Clone(sl.curve)}, s.delta, sessionOptimalWindow)
	return makeBound(method, cite, eps, s.delta, err)
}

// sessionCaches hold what sessions derived from one NewSession share:
// enumerated pairs, per-round PLDs and RDP curves, and per-round closed
// forms. Each is bounded (oldest entries evicted first).
type sessionCaches struct {
	mu      sync.Mutex
	pairs   *pairCache
	rc      *rdpCache
	plds    map[roundKey]*pld.PLD
	pldKeys []roundKey
	regrid  map[regridKey]*pld.PLD
	t2      map[[3]float64]rdp.Curve
	gauss   map[[2]float64]*pld.PLD
	closed  map[float64]map[string][]perRoundRow
	closedK []float64
}

// sessionCacheSize bounds each cache (entries).
const sessionCacheSize = 64

func newSessionCaches() *sessionCaches {
	pc := newPairCache()
	return &sessionCaches{
		pairs:  pc,
		rc:     &rdpCache{pairs: pc, curves: map[curveKey]rdp.Curve{}},
		plds:   map[roundKey]*pld.PLD{},
		regrid: map[regridKey]*pld.PLD{},
		t2:     map[[3]float64]rdp.Curve{},
		gauss:  map[[2]float64]*pld.PLD{},
		closed: map[float64]map[string][]perRoundRow{},
	}
}

// roundKey identifies one round's PLD for one method.
type roundKey struct {
	pair          *amplify.Pair
	h             float64
	mode          subsampleMode
	coords, subCo int
	rate          float64
}

func (c *sessionCaches) pair(m numericalMethod, r Release, n int, eps0 float64, mix *amplify.Mixture) (*amplify.Pair, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pairs.pairs) > sessionCacheSize {
		clear(c.pairs.pairs)
		clear(c.rc.curves)
	}
	return c.pairs.get(m, r, n, eps0, mix)
}

func (c *sessionCaches) roundPLD(r Release, pair *amplify.Pair, h float64, mode subsampleMode) (*pld.PLD, error) {
	k := roundKey{pair: pair, h: h, mode: mode, coords: coordinates(r)}
	if mode != noSubsampling {
		k.subCo, k.rate = subsampledCoordinates(r, mode), coordinateRate(r)
	}
	c.mu.Lock()
	p, ok := c.plds[k]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	// Built outside the lock (the expensive part); two goroutines may
	// build the same PLD, which is harmless.
	p, err := runPLD(r, pair, h, mode, 1)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.plds[k]; !ok {
		c.plds[k] = p
		c.pldKeys = append(c.pldKeys, k)
		if len(c.pldKeys) > sessionCacheSize {
			delete(c.plds, c.pldKeys[0])
			c.pldKeys = c.pldKeys[1:]
		}
	}
	return p, nil
}

// regridKey identifies a round's PLD on the rounds' grid hr.
type regridKey struct {
	round roundKey
	hr    float64
}

// regridCacheSize bounds the cache of per-round PLDs on the rounds' grid
// (about a thousand points each, so a few tens of MB at most): every
// method times every distinct n_p of a long run stays cached.
const regridCacheSize = 1024

// finalPLD returns the PLD of one round of r for a PLD row: built on the
// pairs' grid h (roundPLD), then regridded to the rounds' grid *hr
// (chosen from this round by roundGrid when *hr is 0). Cached per round
// key and hr.
func (c *sessionCaches) finalPLD(r Release, pair *amplify.Pair, h float64, hr *float64, mode subsampleMode) (*pld.PLD, error) {
	rk := roundKey{pair: pair, h: h, mode: mode, coords: coordinates(r)}
	if mode != noSubsampling {
		rk.subCo, rk.rate = subsampledCoordinates(r, mode), coordinateRate(r)
	}
	if *hr != 0 {
		c.mu.Lock()
		q, ok := c.regrid[regridKey{rk, *hr}]
		c.mu.Unlock()
		if ok {
			return q, nil
		}
	}
	per, err := c.roundPLD(r, pair, h, mode)
	if err != nil {
		return nil, err
	}
	if *hr == 0 {
		*hr = roundGrid(per, h)
	}
	if *hr == h {
		return per, nil
	}
	q, err := per.Regrid(*hr)
	if err != nil {
		return nil, fmt.Errorf("regridding round %d: %w", r.Round, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.regrid) >= regridCacheSize {
		clear(c.regrid)
	}
	c.regrid[regridKey{rk, *hr}] = q
	return q, nil
}

func (c *sessionCaches) coordinateCurve(pair *amplify.Pair, r Release, mode subsampleMode) (rdp.Curve, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rc.coordinateCurve(pair, r, mode, rdpOrders())
}

func (c *sessionCaches) theorem2(r Release) (rdp.Curve, error) {
	k := [3]float64{float64(r.Population), r.CheckInRate, r.Eps0}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.t2[k]; ok {
		return cc, nil
	}
	cc, err := rdp.Theorem2Curve(r.Population, r.CheckInRate, r.Eps0, rdpIntegerOrders(), theorem2Delta)
	if err != nil {
		return rdp.Curve{}, err
	}
	if len(c.t2) > sessionCacheSize {
		clear(c.t2)
	}
	c.t2[k] = cc
	return cc, nil
}

func (c *sessionCaches) gaussianPLD(sigma, h float64) (*pld.PLD, error) {
	k := [2]float64{sigma, h}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.gauss[k]; ok {
		return p, nil
	}
	p, err := pld.Gaussian(sigma, 1, pld.Options{Width: h, Method: pld.ConnectDots})
	if err != nil {
		return nil, err
	}
	if len(c.gauss) > sessionCacheSize {
		clear(c.gauss)
	}
	c.gauss[k] = p
	return p, nil
}

// closedForm is closedFormRound cached per release (round number
// ignored) and per-round δ; only the last few δ values are kept.
func (c *sessionCaches) closedForm(r Release, deltaRound float64) []perRoundRow {
	r.Round = 0
	key := fmt.Sprintf("%v", r)
	c.mu.Lock()
	m, ok := c.closed[deltaRound]
	if ok {
		if rows, ok := m[key]; ok {
			c.mu.Unlock()
			return rows
		}
	}
	c.mu.Unlock()
	rows := closedFormRound(r, deltaRound)
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok = c.closed[deltaRound]
	if !ok {
		m = map[string][]perRoundRow{}
		c.closed[deltaRound] = m
		c.closedK = append(c.closedK, deltaRound)
		if len(c.closedK) > 4 {
			delete(c.closed, c.closedK[0])
			c.closedK = c.closedK[1:]
		}
	}
	m[key] = rows
	return rows
}
