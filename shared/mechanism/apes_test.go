package mechanism

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

func TestAPESConfigRejectsInvalid(t *testing.T) {
	ok := APESConfig{D: 5, C: 1, RangeRatio: 1}
	if _, err := NewAPESEncoder(ok); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*APESConfig){
		"zero D":     func(c *APESConfig) { c.D = 0 },
		"zero C":     func(c *APESConfig) { c.C = 0 },
		"NaN C":      func(c *APESConfig) { c.C = math.NaN() },
		"ratio < 1":  func(c *APESConfig) { c.RangeRatio = 0.5 },
		"NaN ratio":  func(c *APESConfig) { c.RangeRatio = math.NaN() },
		"Inf ratio":  func(c *APESConfig) { c.RangeRatio = math.Inf(1) },
		"huge ratio": func(c *APESConfig) { c.RangeRatio = 1e12 },
		"negative B": func(c *APESConfig) { c.B = -1 },
		"B > D":      func(c *APESConfig) { c.B = 6 },
	}
	for name, mod := range cases {
		cfg := ok
		mod(&cfg)
		if _, err := NewAPESEncoder(cfg); err == nil {
			t.Errorf("%s: encoder accepted %+v", name, cfg)
		}
		if _, err := NewAPESAnalyzer(cfg); err == nil {
			t.Errorf("%s: analyzer accepted %+v", name, cfg)
		}
	}
	enc, _ := NewAPESEncoder(ok)
	src := noise.NewSeeded(1)
	for _, eps := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := enc.Encode(make([]float64, 5), eps, src); err == nil {
			t.Errorf("budget %v accepted", eps)
		}
	}
	if _, err := enc.Encode(make([]float64, 4), 1, src); err == nil {
		t.Error("short update accepted")
	}
}

func TestAPESReportSizeConstant(t *testing.T) {
	for _, b := range []int{0, 3, 10} {
		enc, err := NewAPESEncoder(APESConfig{D: 10, C: 0.5, RangeRatio: 1.5, B: b})
		if err != nil {
			t.Fatal(err)
		}
		src := noise.NewSeeded(2)
		for _, x := range [][]float64{make([]float64, 10), slices.Repeat([]float64{9}, 10), randomUpdate(10, 1, src)} {
			for _, eps := range []float64{0.05, 1, 8} {
				rep, err := enc.Encode(x, eps, src)
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Values) != 10 || rep.Eps != eps {
					t.Fatalf("B=%d: report %d values, eps %v", b, len(rep.Values), rep.Eps)
				}
				for _, v := range rep.Values {
					if v < 0.5-0.75 || v > 0.5+0.75 {
						t.Fatalf("value %v outside Clip-Laplace range", v)
					}
				}
			}
		}
	}
}

// TestPostSparsify: the b entries farthest from the centre survive, the
// others become blanket draws.
func TestPostSparsify(t *testing.T) {
	y := []float64{0.5, 0.9, 0.1, 0.45, 0.55, 1.2, -0.3, 0.5}
	orig := slices.Clone(y)
	postSparsify(y, 3, markRandomizer{1}, noise.NewSeeded(3))
	// |y - 1/2|: 0, .4, .4, .05, .05, .7, .8, 0 -> keep 6, 5 and the tie
	// between 1 and 2 goes to the lower index 1.
	for j, v := range y {
		keep := j == 6 || j == 5 || j == 1
		if keep && v != orig[j] || !keep && v != -1 {
			t.Fatalf("entry %d: %v (orig %v), keep=%v", j, v, orig[j], keep)
		}
	}
}

// TestShuffleAPESIndependentPermutations: with n = 4 clients, the position
// of client 0's value in column 0, in column 1 and of its budget must be
// jointly uniform over 4^3 = 64 cells (independent permutations). 19200
// rounds, 300 per cell; chi-square, false-failure probability 1e-4.
func TestShuffleAPESIndependentPermutations(t *testing.T) {
	const n, rounds = 4, 19200
	reports := make([]APESReport, n)
	for i := range reports {
		reports[i] = APESReport{Eps: float64(i + 1), Values: []float64{float64(10 + i), float64(20 + i)}}
	}
	cells := make([]int, n*n*n)
	src := noise.NewSeeded(4)
	for r := 0; r < rounds; r++ {
		b, err := ShuffleAPES(reports, 2, src)
		if err != nil {
			t.Fatal(err)
		}
		p0 := slices.Index(b.Column(0), 10)
		p1 := slices.Index(b.Column(1), 20)
		pe := slices.Index(b.Eps, 1)
		if p0 < 0 || p1 < 0 || pe < 0 {
			t.Fatal("a value was lost")
		}
		cells[(p0*n+p1)*n+pe]++
		// The multisets are preserved.
		c0 := slices.Sorted(slices.Values(b.Column(0)))
		if !slices.Equal(c0, []float64{10, 11, 12, 13}) {
			t.Fatalf("column 0 = %v", c0)
		}
	}
	if p := chiSquarePValue(t, cells); p < 1e-4 {
		t.Errorf("positions not jointly uniform: p=%v", p)
	}
	// The input reports are untouched.
	if reports[0].Values[0] != 10 || reports[3].Eps != 4 {
		t.Fatal("ShuffleAPES modified its input")
	}
}

func TestCollectAPESRejectsMalformed(t *testing.T) {
	good := APESReport{Eps: 1, Values: []float64{0.5, 0.5}}
	if _, err := collectAPES([]APESReport{good, {Eps: 1, Values: []float64{1}}}, 2); !errors.Is(err, ErrMalformed) {
		t.Errorf("short report: %v", err)
	}
	if _, err := collectAPES([]APESReport{good, {Eps: math.NaN(), Values: []float64{1, 1}}}, 2); err == nil {
		t.Error("NaN budget accepted")
	}
	if _, err := collectAPES(nil, 2); err == nil {
		t.Error("no reports accepted")
	}
	an, _ := NewAPESAnalyzer(APESConfig{D: 2, C: 1, RangeRatio: 1})
	if _, err := an.Estimate(ColumnBatch{D: 3, N: 1, Values: make([]float64, 3), Eps: []float64{1}}); err == nil {
		t.Error("dimension mismatch accepted")
	}
}

// TestAPESCalibrationRecoversMean: n = 20000 clients with personalized
// budgets eps_i uniform on {0.5, 1, ..., 4} (few distinct levels keep the
// calibrator cheap) share the same value per dimension (where eq.
// (1) calibration is exact in expectation). Per dimension the calibrated
// estimate must be within 5 standard errors of the truth, the standard
// error being the column's sample sd / sqrt(n) divided by the calibration
// slope F'(g) (delta method). Two-sided normal tail 5.7e-7 per dimension,
// 5 dimensions x 2 paths: false-failure probability below 1e-5. The
// negative control shows the uncalibrated mean C(2m - 1) is rejected, so
// the calibration is doing the work.
func TestAPESCalibrationRecoversMean(t *testing.T) {
	const d, n, c, ratio = 5, 20000, 0.5, 1.0
	truth := []float64{-0.5, -0.3, 0, 0.2, 0.45}
	cfg := APESConfig{D: d, C: c, RangeRatio: ratio}
	enc, _ := NewAPESEncoder(cfg)
	an, _ := NewAPESAnalyzer(cfg)
	src := noise.NewSeeded(5)
	reports := make([]APESReport, n)
	for i := range reports {
		eps := 0.5 * float64(1+noise.Intn(src, 8))
		var err error
		reports[i], err = enc.Encode(truth, eps, src)
		if err != nil {
			t.Fatal(err)
		}
	}
	shuffled, err := ShuffleAPES(reports, d, src)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := collectAPES(reports, d)
	cal, err := randomizer.NewClipLaplaceCalibrator(shuffled.Eps, ratio)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := newClipper(c)
	for name, b := range map[string]ColumnBatch{"shuffled": shuffled, "pldp": plain} {
		est, err := an.Estimate(b)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < d; j++ {
			col := b.Column(j)
			m, ss := 0.0, 0.0
			for _, v := range col {
				m += v
			}
			m /= n
			for _, v := range col {
				ss += (v - m) * (v - m)
			}
			seMean := math.Sqrt(ss / (n - 1) / n)
			g := cl.Normalize(truth[j])
			h := 1e-4
			slope := (cal.Mean(g+h) - cal.Mean(g-h)) / (2 * h)
			se := 2 * c * seMean / slope // in update units
			if z := math.Abs(est[j]-truth[j]) / se; z > 5 {
				t.Errorf("%s dim %d: estimate %v, truth %v, z=%.2f", name, j, est[j], truth[j], z)
			}
			if j == 0 || j == d-1 {
				naive := cl.Denormalize(m)
				if z := math.Abs(naive-truth[j]) / (2 * c * seMean); z < 5 {
					t.Errorf("%s dim %d: uncalibrated mean %v already within 5 se of %v", name, j, naive, truth[j])
				}
			}
		}
	}
}

// TestSAPESEncodesTopB: with a small range and a strong budget, S-APES
// keeps the perturbed large-magnitude coordinates; at eps -> large the kept
// set is the true top-b and the rest are centre draws.
func TestSAPESEncodesTopB(t *testing.T) {
	cfg := APESConfig{D: 8, C: 1, RangeRatio: 1, B: 2}
	enc, _ := NewAPESEncoder(cfg)
	x := []float64{0.01, -0.9, 0.02, 0.0, 0.95, -0.03, 0.01, 0.0}
	src := noise.NewSeeded(6)
	rep, err := enc.Encode(x, 200, src) // lambda = 1/200: noise ~ 0.005
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rep.Values[1]-0.05) > 0.05 || math.Abs(rep.Values[4]-0.975) > 0.05 {
		t.Fatalf("top-2 coordinates not kept: %v", rep.Values)
	}
	for _, j := range []int{0, 2, 3, 5, 6, 7} {
		if math.Abs(rep.Values[j]-0.5) > 0.1 {
			t.Fatalf("coordinate %d = %v, want a centre draw", j, rep.Values[j])
		}
	}
}
