package audit

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Main is `aggregator audit`: it audits every announceable protocol and
// randomizer (or the ones named: each protocol with the named randomizers
// it announces, clip-laplace for APES and S-APES, the others for the FLAME
// protocols; secure summation with its discrete Gaussian) at a small scale
// and prints, for each (and for SS-Topk, each choice of neighbouring
// datasets; for secure summation one round and -secagg-rounds composed),
// the ε the ledger would charge, the largest lower bound the attacks
// prove (attack by attack with -v), the largest bound the run's trials
// could show (ceiling) and the smallest Gaussian-shaped leak it would have
// caught half the time (detectable, and its ratio to the charge; power.go).
// Secure summation is audited at the model dimension -d with σ calibrated
// as the aggregator does for -secagg-epsilon over -secagg-rounds (or
// -sigma), every volunteer checking in.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	protos := fs.String("protocols", "ss-simple,ss-double,ss-topk,apes,s-apes,secagg", "protocols to audit")
	rzs := fs.String("randomizers", "laplace,rgb,gaussian,clip-laplace", "randomizers to audit (each protocol with those it announces: clip-laplace for apes and s-apes, the others for the ss- protocols)")
	d := fs.Int("d", 24, "model dimension of the replica")
	k := fs.Int("k", 4, "perturbed coordinates (ss-double, ss-topk; s-apes: kept values b)")
	l := fs.Int("l", 2, "ss-topk groups")
	n := fs.Int("n", 30, "volunteers per round")
	np := fs.Int("np", 10, "padding per dimension (ss-simple: at least n)")
	epsL := fs.Float64("epsl", 4, "local budget of one report")
	trials := fs.Int("trials", 1000, "trials per hypothesis and phase")
	alpha := fs.Float64("alpha", 1e-4, "one-sided error of each Clopper-Pearson bound")
	delta := fs.Float64("delta", 1e-5, "delta of the bound and the charge")
	seed := fs.Uint64("seed", 1, "seed")
	realCrypto := fs.Bool("real-crypto", false, "seal and open every message with HPKE (slow)")
	asJSON := fs.Bool("json", false, "JSON output")
	verbose := fs.Bool("v", false, "every attack's rates and bound")
	saTrials := fs.Int("secagg-trials", 200_000, "secagg: trials per hypothesis and phase")
	detect := fs.Float64("detect", 0, "size each row's trials (overriding -trials and -secagg-trials) so that it catches, at least half the time, a Gaussian-shaped leak of this many times its charge (TrialsToDetect; 0: off)")
	maxTrials := fs.Int("max-trials", 256_000, "with -detect: the most trials per hypothesis and phase a row may take (a row that would need more runs at this count)")
	saRounds := fs.Int("secagg-rounds", 5, "secagg: rounds the budget covers (sigma's calibration) and the composed audit's releases")
	saEps := fs.Float64("secagg-epsilon", 4, "secagg: the budget of -secagg-rounds rounds at -delta that sigma is calibrated to (make run's)")
	saSigma := fs.Float64("sigma", 0, "secagg: each server's sigma in grid units (0: calibrated from -secagg-epsilon)")
	saBoth := fs.Bool("secagg-both", false, "secagg: also audit the release with both servers' noise (both honest; the ledger credits one)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	// With the default protocol list, a protocol that none of the named
	// randomizers applies to is skipped (-randomizers laplace audits the
	// ss- protocols); a protocol named explicitly must get one.
	protosSet := false
	fs.Visit(func(f *flag.Flag) { protosSet = protosSet || f.Name == "protocols" })
	var results []Result
	var saResults []SecAggResult
	for _, ps := range splitList(*protos) {
		proto, err := wire.ParseProtocol(ps)
		if err != nil {
			fmt.Fprintln(stderr, "audit:", err)
			return 2
		}
		if proto == wire.ProtocolSecAgg {
			rs, err := secAggCLI(ctx, *d, *n, *saRounds, *saTrials, *saEps, *saSigma, *alpha, *delta, *seed, *saBoth, *detect, *maxTrials)
			if err != nil {
				fmt.Fprintln(stderr, "audit: secagg:", err)
				return 1
			}
			saResults = append(saResults, rs...)
			continue
		}
		paired := 0
		for _, rs := range splitList(*rzs) {
			rz, err := wire.ParseRandomizer(rs)
			if err != nil {
				fmt.Fprintln(stderr, "audit:", err)
				return 2
			}
			if !announces(proto, rz) {
				continue
			}
			paired++
			if ctx.Err() != nil {
				return 1
			}
			o := roundspec.Options{Protocol: proto, Randomizer: rz, K: *k, NP: *np, EpsL: *epsL, Clip: 0.5, MinBatch: 1}
			if rz == wire.RandomizerRGB {
				o.Buckets = 4
			}
			if proto == wire.ProtocolSSTopk {
				o.L = *l
			}
			if proto == wire.ProtocolSSSimple {
				o.NP = max(*np, *n)
			}
			if proto == wire.ProtocolSAPES {
				o.NP = 0 // S-APES pads nothing (roundspec announces n_p = 1)
			}
			p, _, err := roundspec.Build(*d, *n, o)
			if err != nil {
				fmt.Fprintf(stderr, "audit: %v/%v: %v\n", proto, rz, err)
				return 1
			}
			spec, err := roundspec.New(p)
			if err != nil {
				fmt.Fprintf(stderr, "audit: %v/%v: %v\n", proto, rz, err)
				return 1
			}
			kinds := []Neighbours{NeighboursFlip}
			if proto == wire.ProtocolSSTopk {
				kinds = append(kinds, NeighboursIndexSet)
			}
			for _, kind := range kinds {
				tr := *trials
				if *detect > 0 {
					// The charge first (a short run), then the trials
					// that detect a detect-times under-charge.
					pre, err := RunContext(ctx, spec, Options{Volunteers: *n, Trials: 10, Alpha: *alpha, Delta: *delta, Seed: *seed, Neighbours: kind})
					if err != nil {
						fmt.Fprintf(stderr, "audit: %v/%v/%s: %v\n", proto, rz, kind, err)
						return 1
					}
					tr = trialsFor(*detect, pre.Charged, *alpha, *delta, *maxTrials)
				}
				res, err := RunContext(ctx, spec, Options{Volunteers: *n, Trials: tr, Alpha: *alpha, Delta: *delta, Seed: *seed, RealCrypto: *realCrypto, Neighbours: kind})
				if err != nil {
					fmt.Fprintf(stderr, "audit: %v/%v/%s: %v\n", proto, rz, kind, err)
					return 1
				}
				results = append(results, res)
			}
		}
		if paired == 0 && protosSet {
			fmt.Fprintf(stderr, "audit: %v: none of the randomizers %q applies (%v)\n", proto, *rzs, pairing(proto))
			return 2
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Shuffle []Result       `json:"shuffle"`
			SecAgg  []SecAggResult `json:"secagg"`
		}{results, saResults}); err != nil {
			return 1
		}
		return 0
	}
	trialsText := fmt.Sprintf("%d trials", *trials)
	if *detect > 0 {
		trialsText = fmt.Sprintf("trials sized per row to catch a %gx under-charge (at most %d; see the trials column)", *detect, *maxTrials)
	}
	fmt.Fprintf(stdout, "privacy audit: d = %d, k = %d, n = %d volunteers, n_p = %d, eps_l = %g, %s per hypothesis and phase, alpha = %g per bound, delta = %g\n", *d, *k, *n, *np, *epsL, trialsText, *alpha, *delta)
	for _, na := range []int{len(attacks), len(attacks) + len(apesAttacks)} {
		which := "ss- protocols"
		if na > len(attacks) {
			which = "apes, s-apes"
		}
		fmt.Fprintf(stdout, "%s: each row's lower bound holds with probability >= %.4g if the charge is right (%d attacks, two one-sided bounds each)\n", which, 1-2*float64(na)**alpha, na)
	}
	if len(saResults) > 0 {
		fmt.Fprintf(stdout, "secagg: d = %d, sigma = %.6g (each server), the relay's noise only (the ledger credits one server), canary +-C e_j (replace-one), %d trials per hypothesis and phase, one attack and the noise variance test: each row holds with probability >= %.4g\n", *d, saResults[0].Sigma, *saTrials, 1-3**alpha)
	}
	fmt.Fprintln(stdout, "ceiling: the largest bound the trials can show; detectable: the smallest true eps of a Gaussian-shaped leak the run shows above the charge with probability >= 1/2 (x the charge: the smallest under-charge the row could have caught; - if none: the charge is above the ceiling)")
	if len(saResults) > 0 {
		fmt.Fprintln(stdout, "secagg noise variance test: the relay's noise draws against the announced sigma; catches sigma/k: the smallest k whose noise it flags with probability >= 1/2")
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "protocol\trandomizer\tneighbours\tn_p\ttrials\tcharged eps\taudited lower bound\tceiling\tdetectable\tverdict")
	bad := false
	for _, r := range saResults {
		verdict := "ok"
		if r.EpsLower > r.Charged {
			verdict, bad = "LOWER BOUND ABOVE THE CHARGE", true
		}
		if r.Noise.Flagged {
			verdict, bad = "NOISE BELOW THE ANNOUNCED SIGMA", true
		}
		nb := string(NeighboursReplaceOne)
		if r.Rounds > 1 {
			nb = fmt.Sprintf("%s, %d rounds", nb, r.Rounds)
		}
		if r.Servers > 1 {
			nb += ", both servers' noise"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t-\t%d\t%.4g\t%.4g\t%.3g\t%s\t%s\n", wire.ProtocolSecAgg, wire.RandomizerDiscreteGaussian, nb, r.Trials, r.Charged, r.EpsLower, r.Ceiling, detectableText(r.Detectable, r.Charged), verdict)
		if *verbose {
			fmt.Fprintf(tw, "\t  %s\t\t\t\tTPR %.5f\tFPR %.5f\teps >= %.4g\n", SecAggAttack, r.TPR, r.FPR, r.EpsLower)
		}
		fmt.Fprintf(tw, "\t  %s\t\t\t%d draws\tvariance %.5fx\tz = %.2f\tcatches sigma/%.4g\t%s\n", "noise variance test", r.Noise.Draws, r.Noise.Ratio, r.Noise.Z, r.Noise.Factor,
			fmt.Sprintf("flags z < -%.2f (false alarm %g)", r.Noise.Threshold, r.Noise.Alpha))
	}
	for _, r := range results {
		verdict := "ok"
		if r.EpsLower > r.Charged {
			verdict, bad = "LOWER BOUND ABOVE THE CHARGE", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.4g\t%.4g\t%.3g\t%s\t%s\n", r.Protocol, r.Random, r.Neighbours, r.NP, r.Trials, r.Charged, r.EpsLower, r.Ceiling, detectableText(r.Detectable, r.Charged), verdict)
		if *verbose {
			for _, f := range r.Findings {
				fmt.Fprintf(tw, "\t  %s\t\t\t\tTPR %.4f\tFPR %.4f\teps >= %.4g\n", f.Attack, f.TPR, f.FPR, f.EpsLower)
			}
		}
	}
	tw.Flush()
	if bad {
		return 1
	}
	return 0
}

// trialsFor is TrialsToDetect, or maxTrials when that does not suffice.
func trialsFor(factor, charged, alpha, delta float64, maxTrials int) int {
	if t, ok := TrialsToDetect(factor, charged, alpha, delta, maxTrials); ok {
		return t
	}
	return maxTrials
}

// detectableText is a Detectable value and its ratio to the charge.
func detectableText(d, charged float64) string {
	if d == 0 || !(charged > 0) {
		return "-"
	}
	return fmt.Sprintf("%.3g (%.2gx)", d, d/charged)
}

// secAggCLI audits secure summation for Main: one round against the
// per-round charge and rounds rounds against the composed one (the latter
// only when rounds > 1); with both, each also with both servers' noise.
func secAggCLI(ctx context.Context, d, n, rounds, trials int, eps, sigma, alpha, delta float64, seed uint64, both bool, detect float64, maxTrials int) ([]SecAggResult, error) {
	if sigma == 0 {
		var err error
		if sigma, err = roundspec.CalibrateSigma(d, roundspec.Options{}, rounds, 1, eps, delta); err != nil {
			return nil, err
		}
	}
	p, _, err := roundspec.Build(d, n, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: sigma, CheckInP: 1})
	if err != nil {
		return nil, err
	}
	spec, err := roundspec.New(p)
	if err != nil {
		return nil, err
	}
	var out []SecAggResult
	servers := []bool{false}
	if both {
		servers = append(servers, true)
	}
	for _, b := range servers {
		for i, r := range []int{1, rounds} {
			if i > 0 && r <= 1 {
				continue
			}
			tr := trials
			if detect > 0 {
				charged, err := secAggCharge(spec, n, r, delta)
				if err != nil {
					return nil, err
				}
				tr = trialsFor(detect, charged, alpha, delta, maxTrials)
			}
			res, err := RunSecAgg(ctx, spec, SecAggOptions{Volunteers: n, Trials: tr, Rounds: r, Alpha: alpha, Delta: delta, Seed: seed, BothServers: b})
			if err != nil {
				return nil, err
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// announces reports whether proto is announced with rz: Clip-Laplace for
// APES and S-APES (roundspec's layout check), the others for the FLAME
// shuffle protocols.
func announces(proto wire.Protocol, rz wire.Randomizer) bool {
	if proto.IsAPES() {
		return rz == wire.RandomizerClipLaplace
	}
	return rz == wire.RandomizerLaplace || rz == wire.RandomizerRGB || rz == wire.RandomizerGaussian
}

// pairing names the randomizers proto is announced with.
func pairing(proto wire.Protocol) string {
	if proto.IsAPES() {
		return "it needs clip-laplace"
	}
	return "it takes laplace, rgb or gaussian"
}

func splitList(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
