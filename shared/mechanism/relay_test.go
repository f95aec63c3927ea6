package mechanism

import (
	"errors"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

var markBlanket = markRandomizer{1}

func msg(idx ...uint32) Message {
	v := make([]float64, len(idx))
	for i := range v {
		v[i] = 10.5
	}
	return Message{Indices: idx, Values: v}
}

func TestNewRelayRejectsInvalid(t *testing.T) {
	ok := RelayConfig{D: 10, NP: 4, Width: 5, Blanket: markBlanket}
	if _, err := NewRelay(ok); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	cases := map[string]func(*RelayConfig){
		"zero D":           func(c *RelayConfig) { c.D = 0 },
		"zero NP":          func(c *RelayConfig) { c.NP = 0 },
		"negative NP":      func(c *RelayConfig) { c.NP = -2 },
		"zero width":       func(c *RelayConfig) { c.Width = 0 },
		"width > D":        func(c *RelayConfig) { c.Width = 11 },
		"not divisible":    func(c *RelayConfig) { c.Width = 3 }, // 10*4 = 40 not a multiple of 3
		"nil blanket":      func(c *RelayConfig) { c.Blanket = nil },
		"unknown overflow": func(c *RelayConfig) { c.Overflow = 7 },
	}
	for name, mod := range cases {
		cfg := ok
		mod(&cfg)
		if _, err := NewRelay(cfg); err == nil {
			t.Errorf("%s: accepted %+v", name, cfg)
		}
	}
	if got := FeasibleNP(10, 3, 4); got != 6 {
		t.Errorf("FeasibleNP(10, 3, 4) = %d, want 6", got)
	}
	if got := FeasibleNP(7850, 157, 333); got != 333 {
		t.Errorf("FeasibleNP(7850, 157, 333) = %d, want 333 (157 divides 7850)", got)
	}
}

func TestRelayRejectsMalformed(t *testing.T) {
	r, _ := NewRelay(RelayConfig{D: 6, NP: 4, Width: 2, Blanket: markBlanket})
	src := noise.NewSeeded(1)
	bad := map[string]Message{
		"wrong width":     msg(1, 2, 3),
		"repeated index":  msg(2, 2),
		"out of range":    msg(1, 6),
		"length mismatch": {Indices: []uint32{1, 2}, Values: []float64{1}},
		"empty":           {},
	}
	for name, m := range bad {
		_, err := r.Process([]Message{msg(0, 1), m}, src)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func checkPadded(t *testing.T, b Batch, width int) (dummies int) {
	t.Helper()
	counts := make([]int, b.D)
	stamp := make([]uint32, b.D)
	for mi, m := range b.Messages {
		// Every message, dummy or real, has the same shape.
		if err := validateMessage(m, b.D, width, stamp, uint32(mi+1)); err != nil {
			t.Fatalf("message %d: %v", mi, err)
		}
		isDummy := m.Values[0] == -1
		for _, v := range m.Values {
			if (v == -1) != isDummy {
				t.Fatalf("message %d mixes dummy and real values", mi)
			}
		}
		if isDummy {
			dummies++
		}
		for _, j := range m.Indices {
			counts[j]++
		}
	}
	for j, c := range counts {
		if c != b.NP {
			t.Fatalf("dimension %d appears %d times, want n_p=%d", j, c, b.NP)
		}
	}
	return dummies
}

func TestRelayPadsEveryDimensionToNP(t *testing.T) {
	src := noise.NewSeeded(2)
	for _, tc := range []struct{ d, k, n, np int }{
		{20, 4, 30, 10}, {20, 4, 30, 6}, {20, 1, 50, 5}, {7, 7, 3, 5}, {9, 3, 0, 4},
	} {
		cfg := FLAMEConfig{Protocol: SSDouble, D: tc.d, K: tc.k, EpsL: 1, C: 1, NewRandomizer: AffineFactory(markFactory)}
		enc, _ := NewEncoder(cfg)
		np := FeasibleNP(tc.d, tc.k, tc.np)
		r, err := NewRelay(RelayConfig{D: tc.d, NP: np, Width: tc.k, Blanket: enc.Randomizer(), Overflow: OverflowRaise})
		if err != nil {
			t.Fatal(err)
		}
		var real []Message
		for i := 0; i < tc.n; i++ {
			m, _ := enc.Encode(randomUpdate(tc.d, 1, src), src)
			real = append(real, m...)
		}
		b, err := r.Process(real, src)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		dummies := checkPadded(t, b, tc.k)
		st := b.Stats
		if st.RealMessages != tc.n || st.DummyMessages != dummies || len(b.Messages) != tc.n+dummies {
			t.Fatalf("%+v: stats %+v, %d dummies, %d messages", tc, st, dummies, len(b.Messages))
		}
		if st.RealEntries+st.DummyEntries != tc.d*b.NP {
			t.Fatalf("%+v: entries %d + %d != d*n_p", tc, st.RealEntries, st.DummyEntries)
		}
		if st.RealizedNP != b.NP || st.TargetNP != np || (b.NP != np) != st.Raised {
			t.Fatalf("%+v: n_p bookkeeping %+v, batch %d", tc, st, b.NP)
		}
		if st.MinCount > st.MaxCount || st.MeanCount != float64(tc.n*tc.k)/float64(tc.d) {
			t.Fatalf("%+v: count summary %+v", tc, st)
		}
	}
}

func TestRelayOverflowError(t *testing.T) {
	r, _ := NewRelay(RelayConfig{D: 4, NP: 2, Width: 2, Blanket: markBlanket})
	real := []Message{msg(0, 1), msg(0, 2), msg(0, 3), msg(1, 3), msg(1, 2)}
	b, err := r.Process(real, noise.NewSeeded(3))
	var oe *dimensionOverflowError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want *DimensionOverflowError", err)
	}
	if !slices.Equal(oe.Dims, []uint32{0, 1}) || !slices.Equal(oe.Counts, []int{3, 3}) || oe.NP != 2 {
		t.Fatalf("overflow error %+v, want dims [0 1] counts [3 3] n_p 2", oe)
	}
	if b.Messages != nil || b.NP != 0 {
		t.Fatalf("aborted round forwarded %d messages", len(b.Messages))
	}
	if oe.Error() == "" {
		t.Fatal("empty error text")
	}
}

func TestRelayOverflowRaise(t *testing.T) {
	r, _ := NewRelay(RelayConfig{D: 4, NP: 2, Width: 2, Blanket: markBlanket, Overflow: OverflowRaise})
	real := []Message{msg(0, 1), msg(0, 2), msg(0, 3), msg(1, 3), msg(1, 2)}
	b, err := r.Process(real, noise.NewSeeded(3))
	if err != nil {
		t.Fatal(err)
	}
	// counts (3,3,2,2): n_p = 3 gives deficits (0,0,1,1), M = 1 message {2,3}.
	if b.NP != 3 || !b.Stats.Raised || b.Stats.RealizedNP != 3 || b.Stats.TargetNP != 2 {
		t.Fatalf("realized n_p %d, stats %+v; want 3", b.NP, b.Stats)
	}
	if !slices.Equal(b.Stats.Overflowed, []uint32{0, 1}) {
		t.Fatalf("overflowed %v, want [0 1]", b.Stats.Overflowed)
	}
	checkPadded(t, b, 2)
}

// TestRelayInfeasiblePacking: counts (4,4,0) with width 2 and n_p 4 leave a
// deficit of 4 on dimension 2 but only M = 2 dummy messages.
func TestRelayInfeasiblePacking(t *testing.T) {
	real := []Message{msg(0, 1), msg(1, 0), msg(0, 1), msg(0, 1)}
	r, _ := NewRelay(RelayConfig{D: 3, NP: 4, Width: 2, Blanket: markBlanket})
	if _, err := r.Process(real, noise.NewSeeded(4)); !errors.Is(err, ErrInfeasiblePadding) {
		t.Fatalf("err = %v, want ErrInfeasiblePadding", err)
	}
	r, _ = NewRelay(RelayConfig{D: 3, NP: 4, Width: 2, Blanket: markBlanket, Overflow: OverflowRaise})
	b, err := r.Process(real, noise.NewSeeded(4))
	if err != nil {
		t.Fatal(err)
	}
	// n_p = 6: deficits (2,2,6), M = 5 < 6; n_p = 7: odd total; n_p = 8 works.
	if b.NP != 8 {
		t.Fatalf("realized n_p %d, want 8", b.NP)
	}
	checkPadded(t, b, 2)
}

// TestRaiseIsMinimal compares raiseNP with a brute-force search over random
// count vectors.
func TestRaiseIsMinimal(t *testing.T) {
	src := noise.NewSeeded(5)
	for trial := 0; trial < 2000; trial++ {
		d := 2 + noise.Intn(src, 8)
		width := 1 + noise.Intn(src, d-1) // width < d
		counts := make([]int, d)
		for j := range counts {
			counts[j] = noise.Intn(src, 12)
		}
		st := summarize(counts, 0, width)
		// Real entries come in whole messages: make the total a multiple
		// of width by topping up dimension 0.
		for st.RealEntries%width != 0 {
			counts[0]++
			st = summarize(counts, 0, width)
		}
		target := 1 + noise.Intn(src, 10)
		got, err := raiseNP(d, width, target, st)
		if err != nil {
			t.Fatalf("counts %v width %d: %v", counts, width, err)
		}
		want := max(target, st.MaxCount)
		for !packable(d, width, want, st) {
			want++
		}
		if got != want {
			t.Fatalf("counts %v width %d target %d: raised to %d, brute force %d", counts, width, target, got, want)
		}
		flat, err := planDummies(counts, got, width)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, counts, got, width, flat)
	}
}

func checkPlan(t *testing.T, counts []int, np, width int, flat []uint32) {
	t.Helper()
	cover := slices.Clone(counts)
	for m := 0; m < len(flat)/width; m++ {
		seen := map[uint32]bool{}
		for _, j := range flat[m*width : (m+1)*width] {
			if seen[j] {
				t.Fatalf("counts %v np %d width %d: dummy %d repeats %d", counts, np, width, m, j)
			}
			seen[j] = true
			cover[j]++
		}
	}
	for j, c := range cover {
		if c != np {
			t.Fatalf("counts %v np %d: dimension %d covered %d times", counts, np, j, c)
		}
	}
}

// TestPlanDummiesFeasibility checks the packing against its stated
// condition: feasible iff every deficit is at most M.
func TestPlanDummiesFeasibility(t *testing.T) {
	src := noise.NewSeeded(6)
	for trial := 0; trial < 3000; trial++ {
		d := 1 + noise.Intn(src, 9)
		width := 1 + noise.Intn(src, d)
		np := noise.Intn(src, 10)
		counts := make([]int, d)
		total, maxDef := 0, 0
		for j := range counts {
			counts[j] = noise.Intn(src, np+1)
			total += np - counts[j]
			maxDef = max(maxDef, np-counts[j])
		}
		flat, err := planDummies(counts, np, width)
		feasible := total%width == 0 && maxDef <= total/width
		if feasible != (err == nil) {
			t.Fatalf("counts %v np %d width %d: feasible=%v err=%v", counts, np, width, feasible, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInfeasiblePadding) {
				t.Fatalf("err %v does not wrap ErrInfeasiblePadding", err)
			}
			continue
		}
		checkPlan(t, counts, np, width, flat)
	}
	if _, err := planDummies([]int{3, 5}, 4, 1); err == nil {
		t.Error("count above n_p accepted")
	}
	if _, err := planDummies(nil, 4, 1); err == nil {
		t.Error("empty counts accepted")
	}
}

// TestRelayShuffleUniform: 3 real messages (counts (2,1) with width 1,
// n_p = 3) plus 3 dummies; each real message's output position must be
// uniform over 6 slots, and the joint positions of real messages A and B
// uniform over the 30 ordered pairs. 12000 rounds (2000 per position
// cell, 400 per pair cell); chi-square, false-failure probability 1e-4 per
// assertion (4 assertions).
func TestRelayShuffleUniform(t *testing.T) {
	r, _ := NewRelay(RelayConfig{D: 2, NP: 3, Width: 1, Blanket: markBlanket})
	src := noise.NewSeeded(7)
	const rounds = 12000
	pos := [3][]int{make([]int, 6), make([]int, 6), make([]int, 6)}
	pairs := make([]int, 36)
	for round := 0; round < rounds; round++ {
		real := []Message{
			{Indices: []uint32{0}, Values: []float64{100}},
			{Indices: []uint32{0}, Values: []float64{101}},
			{Indices: []uint32{1}, Values: []float64{102}},
		}
		b, err := r.Process(real, src)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) != 6 {
			t.Fatalf("%d messages, want 6", len(b.Messages))
		}
		var where [3]int
		for p, m := range b.Messages {
			if v := m.Values[0]; v >= 100 {
				where[int(v)-100] = p
				pos[int(v)-100][p]++
			}
		}
		pairs[where[0]*6+where[1]]++
	}
	for i := range pos {
		if p := chiSquarePValue(t, pos[i]); p < 1e-4 {
			t.Errorf("message %d positions not uniform: p=%v %v", i, p, pos[i])
		}
	}
	var off []int
	for a := 0; a < 6; a++ {
		for b := 0; b < 6; b++ {
			if a != b {
				off = append(off, pairs[a*6+b])
			} else if pairs[a*6+b] != 0 {
				t.Fatal("two messages at one position")
			}
		}
	}
	if p := chiSquarePValue(t, off); p < 1e-4 {
		t.Errorf("joint positions not uniform: p=%v", p)
	}
}

func TestCollectKeepsOrderWithoutPadding(t *testing.T) {
	real := []Message{msg(0, 1), msg(2), msg(1, 2, 3)}
	b, err := Collect(4, real)
	if err != nil {
		t.Fatal(err)
	}
	if b.NP != 0 || len(b.Messages) != 3 || &b.Messages[1].Indices[0] != &real[1].Indices[0] {
		t.Fatalf("collect changed the batch: %+v", b)
	}
	if b.Stats.MinCount != 1 || b.Stats.MaxCount != 2 || b.Stats.RealEntries != 6 {
		t.Fatalf("stats %+v", b.Stats)
	}
	if _, err := Collect(2, real); !errors.Is(err, ErrMalformed) {
		t.Fatalf("out-of-range index: %v", err)
	}
	if _, err := Collect(0, nil); err == nil {
		t.Fatal("zero dimension accepted")
	}
}
