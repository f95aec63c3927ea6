// Package privacycli implements `aggregator privacy`, a command-line front
// end to privacy.Account in the spirit of Google's dp_accounting: for one
// configuration it prints every applicable accountant's central (ε, δ)
// side by side and marks the tightest valid one.
package privacycli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/blanket-fl/blanket/aggregator/internal/experiment"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// config is one accounting request: a release repeated for Rounds rounds at
// total central Delta.
type config struct {
	Release privacy.Release
	Rounds  int
	Delta   float64
	// Paper lists the values the source paper prints for this preset, for
	// the comparison column; empty for custom configurations.
	Paper string
	// ReplaceOne is, for secure summation, the replace-one guarantee
	// (the rows state add/remove).
	ReplaceOne *replaceOne
}

// replaceOne is secure summation's guarantee for replacing one
// volunteer's data, derived from the add/remove accounting
// (experiment.SecAggReplaceOne).
type replaceOne struct {
	Epsilon float64 `json:"epsilon"`
	Delta   float64 `json:"delta"`
	Route   string  `json:"route"`
}

// presets are the papers' experimental settings.
var presets = map[string]func() config{
	// FLAME (AAAI'21) SS-Simple: ε_l = 78.5 split over d = 7850, n = 1000,
	// δ_c = 5e-6; the paper prints ε_c = 0.91 per epoch.
	"flame-simple": func() config {
		return config{Release: privacy.Release{Round: 1, Protocol: privacy.ProtocolSSSimple, Randomizer: privacy.RandomizerLaplace,
			Eps0: 0.01, D: 7850, K: 7850, N: 1000}, Rounds: 1, Delta: 5e-6, Paper: "FLAME prints ε_c = 0.91 (SS-Simple, δ_c = 5e-6)"}
	},
	// FLAME SS-Double: ε_lk = 0.5, β = 1/50 (k = 157), n_p = 333; the
	// paper prints 0.24 (and 20.53 with shuffling only).
	"flame-double": func() config {
		return config{Release: privacy.Release{Round: 1, Protocol: privacy.ProtocolSSDouble, Randomizer: privacy.RandomizerLaplace,
			Eps0: 0.5, D: 7850, K: 157, N: 1000, NP: 333}, Rounds: 1, Delta: 5e-6, Paper: "FLAME prints ε_c = 0.24 (20.53 shuffling only), δ_c = 5e-6"}
	},
	"flame-topk": func() config {
		return config{Release: privacy.Release{Round: 1, Protocol: privacy.ProtocolSSTopk, Randomizer: privacy.RandomizerLaplace,
			Eps0: 0.5, D: 7850, K: 157, N: 1000, NP: 333}, Rounds: 1, Delta: 5e-6, Paper: "FLAME prints ε_c = 0.24 (20.53 shuffling only), δ_c = 5e-6"}
	},
	// APES (AAAI'23) Table 3, Uniform2 budgets, n = 10000, δ_s = 1e-8,
	// one dimension (the paper's bounds are dimension-level).
	"apes": func() config {
		return config{Release: privacy.Release{Round: 1, Protocol: privacy.ProtocolAPES, Randomizer: privacy.RandomizerClipLaplace,
			D: 1, K: 1, N: 10000, PersonalEps: privacy.Uniform2Budgets(10000)}, Rounds: 1, Delta: 1e-8,
			Paper: "APES Table 3 prints EoN 0.057, UniS 0.069 (dimension level, δ_s = 1e-8)"}
	},
	// Shuffled check-in (Liew et al.): ε0 = 2, 60000 clients, rate 0.1;
	// the whole report is one ε0-LDP vector randomizer.
	// Secure summation (PINE, the product's) at the experiment runner's
	// defaults, which are make run's (experiment.MakeRunSecAgg: 400
	// volunteers, every one in every round, 5 rounds, C = 0.3), with the
	// round spec the aggregator derives for them: PINE's parameters
	// (secagg.NewPineParams) and the per-server σ the aggregator
	// calibrates (params.SecAggSigma: replace-one ε = 4 at δ = 1e-5), and
	// the release the ledger charges for each round (roundspec.Spec.Release).
	// The replace-one line under the table is the ledger's charge.
	"secagg": func() config {
		l, err := experiment.MakeRunSecAgg()
		if err != nil {
			// Fixed constants; cannot fail unless the calibration breaks,
			// which the package's tests catch. Fall back to an invalid
			// release so Main reports it.
			return config{Release: privacy.Release{Protocol: privacy.ProtocolSecAgg}, Rounds: 1, Delta: 1e-5, Paper: err.Error()}
		}
		pp := l.Params
		return config{Release: l.Spec.Release(1, l.Population, 0), Rounds: l.Rounds, Delta: l.Delta,
			Paper: fmt.Sprintf("make run's secure summation, PINE: %d volunteers, check-in q = %g, %d rounds, L2 clip C = %g (scale %.6g fixed-point units per model unit, norm bound %d units), per-server sigma %.6g units, server learning rate %g; target replace-one eps %g",
				l.Population, l.Q, l.Rounds, l.Clip, pp.Scale, pp.NormBound, pp.Sigma, l.ServerLR, l.Eps)}
	},
	"checkin": func() config {
		return config{Release: privacy.Release{Round: 1, Protocol: privacy.ProtocolCheckIn, Randomizer: privacy.RandomizerGeneric,
			Eps0: 2, D: 1, K: 1, N: 6000, Population: 60000, CheckInRate: 0.1}, Rounds: 6800, Delta: 1e-5}
	},
}

func presetNames() []string {
	var out []string
	for k := range presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Main runs `aggregator privacy` and returns the exit code: 0 on success,
// 2 for invalid flags or configurations, 1 if accounting fails.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("privacy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: aggregator privacy -preset NAME [overrides] | -protocol P [flags]\n\n"+
			"Prints every applicable accountant's central (epsilon, delta) for a release repeated\n"+
			"over -rounds rounds; '*' marks the tightest valid method, '+' a tighter one that rests\n"+
			"on an argument not re-derived (see its caveat).\n\npresets: %s\n\nflags:\n", strings.Join(presetNames(), ", "))
		fs.PrintDefaults()
	}
	preset := fs.String("preset", "", "paper setting: "+strings.Join(presetNames(), ", "))
	protocol := fs.String("protocol", "", "ss-simple, ss-double, ss-topk, apes, s-apes, checkin, dp-gaussian, secagg or ldp")
	randomizer := fs.String("randomizer", "", "laplace, rgb, clip-laplace, gaussian, duchi-l2, discrete-gaussian or generic")
	eps0 := fs.Float64("eps0", 0, "local epsilon per perturbed coordinate (APES: all budgets equal to it)")
	n := fs.Int("n", 0, "real reports per round")
	d := fs.Int("d", 0, "model dimension")
	k := fs.Int("k", 0, "coordinates each client perturbs (default d)")
	l := fs.Int("l", 0, "SS-Topk index groups")
	np := fs.Int("np", 0, "padded messages per coordinate (SS-Double/SS-Topk)")
	b := fs.Int("b", 0, "buckets b of R_{gamma,b} (randomizer rgb)")
	population := fs.Int("population", 0, "check-in population")
	rate := fs.Float64("rate", 0, "check-in rate")
	sigma := fs.Float64("sigma", 0, "noise multiplier of dp-gaussian; per-server sigma (PINE fixed-point units) of secagg")
	sensitivity := fs.Float64("sensitivity", 0, "secagg: L2 sensitivity (PINE fixed-point units, secagg.Params.Sensitivity: the norm bound)")
	delta := fs.Float64("delta", 0, "total central delta")
	nRounds := fs.Int("rounds", 0, "number of identical rounds")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aggregator privacy: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var cfg config
	switch {
	case *preset != "":
		p, ok := presets[*preset]
		if !ok {
			fmt.Fprintf(stderr, "aggregator privacy: unknown preset %q (want one of %s)\n", *preset, strings.Join(presetNames(), ", "))
			return 2
		}
		cfg = p()
	case *protocol != "":
		cfg = config{Release: privacy.Release{Round: 1, Randomizer: privacy.RandomizerGeneric}, Rounds: 1, Delta: 1e-6}
	default:
		fmt.Fprintln(stderr, "aggregator privacy: give -preset or -protocol")
		fs.Usage()
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name := range set {
		if name != "preset" && name != "json" {
			cfg.Paper = "" // overridden: the paper's numbers no longer apply
		}
	}
	r := &cfg.Release
	if set["protocol"] {
		r.Protocol = *protocol
	}
	if set["randomizer"] {
		r.Randomizer = *randomizer
	}
	if set["n"] {
		r.N = *n
		if r.Protocol == privacy.ProtocolAPES || r.Protocol == privacy.ProtocolSAPES {
			if !set["eps0"] && len(r.PersonalEps) > 0 {
				r.PersonalEps = privacy.Uniform2Budgets(max(*n, 0))
			}
		}
	}
	if set["eps0"] {
		r.Eps0 = *eps0
		if r.Protocol == privacy.ProtocolAPES || r.Protocol == privacy.ProtocolSAPES {
			r.PersonalEps = make([]float64, max(r.N, 0))
			for i := range r.PersonalEps {
				r.PersonalEps[i] = *eps0
			}
		}
	}
	if set["d"] {
		r.D = *d
		if !set["k"] && (r.K > r.D || r.Protocol == privacy.ProtocolSSSimple || r.Protocol == privacy.ProtocolAPES) {
			r.K = r.D
		}
	}
	if set["k"] {
		r.K = *k
	} else if r.K == 0 {
		r.K = r.D
	}
	if set["l"] {
		r.L = *l
	}
	if set["np"] {
		r.NP = *np
	}
	if set["b"] {
		r.Buckets = *b
	}
	if set["population"] {
		r.Population = *population
	}
	if set["rate"] {
		r.CheckInRate = *rate
	}
	if set["sigma"] {
		if r.Protocol == privacy.ProtocolSecAgg {
			r.SecAggSigma = *sigma
		} else {
			r.NoiseMultiplier = *sigma
		}
	}
	if set["sensitivity"] {
		r.SecAggSensitivity = *sensitivity
	}
	if set["delta"] {
		cfg.Delta = *delta
	}
	if set["rounds"] {
		cfg.Rounds = *nRounds
	}
	if (r.Protocol == privacy.ProtocolAPES || r.Protocol == privacy.ProtocolSAPES) && len(r.PersonalEps) == 0 && r.N > 0 {
		r.PersonalEps = privacy.Uniform2Budgets(r.N)
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "aggregator privacy: %v\n", err)
		return 2
	}
	if err := ctx.Err(); err != nil {
		fmt.Fprintf(stderr, "aggregator privacy: %v\n", err)
		return 1
	}
	rep, err := privacy.Account(cfg.releases(), cfg.Delta)
	if err != nil {
		fmt.Fprintf(stderr, "aggregator privacy: %v\n", err)
		if errors.Is(err, privacy.ErrInvalidParameter) {
			return 2
		}
		return 1
	}
	if cfg.Release.Protocol == privacy.ProtocolSecAgg {
		// The ledger's charge: replace-one (the relation of every other
		// protocol), experiment.SecAggReplaceOne (the tightest row).
		e, route, err := experiment.SecAggReplaceOne(cfg.releases(), cfg.Delta)
		if err != nil {
			fmt.Fprintf(stderr, "aggregator privacy: replace-one: %v\n", err)
			return 1
		}
		cfg.ReplaceOne = &replaceOne{Epsilon: e, Delta: cfg.Delta, Route: route}
	}
	if *asJSON {
		err = writeJSON(stdout, cfg, rep)
	} else {
		err = writeTable(stdout, cfg, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "aggregator privacy: %v\n", err)
		return 1
	}
	return 0
}

// maxRounds bounds -rounds: composition is O(log T), but T is also the
// size of the release list.
const maxRounds = 1_000_000

func (c config) validate() error {
	if c.Rounds < 1 || c.Rounds > maxRounds {
		return fmt.Errorf("-rounds = %d, want 1..%d", c.Rounds, maxRounds)
	}
	if !(c.Delta > 0 && c.Delta < 1) {
		return fmt.Errorf("-delta = %v, want 0 < delta < 1", c.Delta)
	}
	if err := c.Release.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}

func (c config) releases() []privacy.Release {
	out := make([]privacy.Release, c.Rounds)
	for i := range out {
		out[i] = c.Release
		out[i].Round = i + 1
	}
	return out
}

// marker returns "*" for the tightest valid row, "+" for a tighter
// caveated one.
func marker(rep privacy.Report, i int) string {
	switch {
	case i == rep.Tightest:
		return "*"
	case i == rep.TightestAny:
		return "+"
	}
	return ""
}

func describe(c config) string {
	r := c.Release
	var b strings.Builder
	fmt.Fprintf(&b, "protocol %s, randomizer %s", r.Protocol, r.Randomizer)
	switch r.Protocol {
	case privacy.ProtocolAPES, privacy.ProtocolSAPES:
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, e := range r.PersonalEps {
			lo, hi = math.Min(lo, e), math.Max(hi, e)
		}
		fmt.Fprintf(&b, ", budgets in [%.4g, %.4g]", lo, hi)
	case privacy.ProtocolCentralGaussian:
		fmt.Fprintf(&b, ", noise multiplier %g", r.NoiseMultiplier)
	case privacy.ProtocolSecAgg:
		fmt.Fprintf(&b, ", per-server sigma %.6g, sensitivity %.6g (integer units), check-in rate %g", r.SecAggSigma, r.SecAggSensitivity, r.CheckInRate)
	default:
		fmt.Fprintf(&b, ", eps0 %g", r.Eps0)
	}
	fmt.Fprintf(&b, ", n %d, d %d, k %d", r.N, r.D, r.K)
	if r.L > 1 {
		fmt.Fprintf(&b, ", l %d", r.L)
	}
	if r.NP > 0 {
		fmt.Fprintf(&b, ", n_p %d", r.NP)
	}
	if r.Buckets > 0 {
		fmt.Fprintf(&b, ", b %d", r.Buckets)
	}
	if r.Population > 0 {
		fmt.Fprintf(&b, ", population %d, rate %g", r.Population, r.CheckInRate)
	}
	fmt.Fprintf(&b, "; %d round(s), delta %g", c.Rounds, c.Delta)
	return b.String()
}

func writeTable(w io.Writer, c config, rep privacy.Report) error {
	fmt.Fprintln(w, describe(c))
	if c.Paper != "" {
		fmt.Fprintln(w, c.Paper)
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tmethod\tepsilon\tdelta\tnote")
	var caveats []string
	for i, row := range rep.Rows {
		note := ""
		if row.Caveat != "" {
			j := slices.Index(caveats, row.Caveat)
			if j < 0 {
				caveats = append(caveats, row.Caveat)
				j = len(caveats) - 1
			}
			note = fmt.Sprintf("caveat [%d]", j+1)
		}
		if !row.Valid {
			fmt.Fprintf(tw, "%s\t%s\tn/a\t\t%s\n", marker(rep, i), row.Method, oneLine(row.Reason))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.3g\t%s\n", marker(rep, i), row.Method, row.Epsilon, row.Delta, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	for i, cv := range caveats {
		fmt.Fprintf(w, "[%d] %s\n", i+1, cv)
	}
	if rep.Tightest < 0 {
		_, err := fmt.Fprintln(w, "no valid method")
		return err
	}
	_, err := fmt.Fprintf(w, "tightest valid: %s (%.4g, %.3g)\n", rep.Rows[rep.Tightest].Method, rep.Rows[rep.Tightest].Epsilon, rep.Rows[rep.Tightest].Delta)
	if err == nil && c.ReplaceOne != nil {
		_, err = fmt.Fprintf(w, "the ledger charges replace-one: (%.4g, %.3g) by %s\n", c.ReplaceOne.Epsilon, c.ReplaceOne.Delta, c.ReplaceOne.Route)
	}
	return err
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

// jsonRow is a Report row; Epsilon and Delta are omitted when not valid.
type jsonRow struct {
	Method   string   `json:"method"`
	Epsilon  *float64 `json:"epsilon,omitempty"`
	Delta    *float64 `json:"delta,omitempty"`
	Valid    bool     `json:"valid"`
	Reason   string   `json:"reason,omitempty"`
	Citation string   `json:"citation"`
	Caveat   string   `json:"caveat,omitempty"`
	Tightest bool     `json:"tightest,omitempty"`
}

type jsonReport struct {
	Release     privacy.Release `json:"release"`
	Rounds      int             `json:"rounds"`
	Delta       float64         `json:"delta"`
	Paper       string          `json:"paper,omitempty"`
	Rows        []jsonRow       `json:"rows"`
	Tightest    int             `json:"tightest"`
	TightestAny int             `json:"tightest_any"`
	ReplaceOne  *replaceOne     `json:"replace_one,omitempty"`
}

func writeJSON(w io.Writer, c config, rep privacy.Report) error {
	out := jsonReport{Release: c.Release, Rounds: c.Rounds, Delta: c.Delta, Paper: c.Paper, Tightest: rep.Tightest, TightestAny: rep.TightestAny, ReplaceOne: c.ReplaceOne}
	for i, row := range rep.Rows {
		jr := jsonRow{Method: row.Method, Valid: row.Valid, Reason: row.Reason, Citation: row.Citation, Caveat: row.Caveat, Tightest: i == rep.Tightest}
		if row.Valid {
			e, d := row.Epsilon, row.Delta
			jr.Epsilon, jr.Delta = &e, &d
		}
		out.Rows = append(out.Rows, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
