// Package dashboard is the view model of the teacher's pages (docs/web.md):
// it turns the aggregator's state — the round configuration, the round
// history, the operator's pending changes — into the plain data the web
// templates render (console.DashboardData, console.OperatorData and their parts).
// It holds no state and takes no lock: the server copies what it needs
// under its lock and calls these functions on the copy.
package dashboard

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web/console"
)

// Settings is the configuration of the rounds as the pages show it.
type Settings struct {
	Params    wire.Params
	ExpectedN int
	Timeout   time.Duration
	ServerLR  float64
	// ServerOptimizer is the server's step of the rounds ("sgd", or
	// "momentum": FedAvgM with β ServerMomentum), as announced with them
	// (rounds.Machine.ServerStep); "" is sgd.
	ServerOptimizer string
	ServerMomentum  float64
	// TargetEpsilon and TargetDelta are the ledger's target; Rounds the
	// rounds to run (0: until the budget).
	TargetEpsilon, TargetDelta float64
	Rounds                     int
}

// State names the round loop's state for the pages.
func State(stopped string, paused bool) string {
	switch {
	case stopped != "":
		return "stopped"
	case paused:
		return "paused"
	}
	return "running"
}

// Rounds is the round history as the dashboard lists it. Only the
// methods that apply, with a proven or caveated ε, are listed: a row the
// accountant reports not applicable (for example secure summation's
// add/remove row, which the released count of accepted reports voids;
// docs/secagg.md) is not shown at all.
func Rounds(history []checkpoint.RoundRecord) []console.RoundView {
	out := make([]console.RoundView, len(history))
	for i, r := range history {
		v := console.RoundView{Round: r.Round, Status: r.Status, Accuracy: r.Accuracy, Loss: r.Loss, N: r.N, NP: r.NP,
			CheckedIn: r.CheckedIn, Population: r.Population, CheckInRate: r.CheckInRate}
		for _, e := range r.Epsilon {
			if !e.Valid || e.Epsilon == nil {
				continue
			}
			v.Epsilon = append(v.Epsilon, console.EpsilonView{Method: e.Method, Epsilon: e.Epsilon, Tightest: e.Tightest, Caveated: e.Caveated})
		}
		out[i] = v
	}
	return out
}

// Form is the operator form showing the current configuration c, with
// every protocol's defaults (ProtocolDefaults).
func Form(c Settings, sigma func() (float64, error)) console.OperatorForm {
	p := c.Params
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	f := console.OperatorForm{Protocol: p.Protocol.String(), EpsL: g(p.EpsL), Clip: g(p.Clip), CheckInP: g(p.CheckInP),
		RoundTimeout: g(c.Timeout.Seconds()), MinBatch: strconv.Itoa(int(p.MinBatch)), ServerLR: g(c.ServerLR), D: int(p.D),
		Defaults: ProtocolDefaults(c, sigma)}
	if p.Protocol != wire.ProtocolSSSimple && p.NP > 0 {
		f.K = strconv.Itoa(int(p.K))
		f.NPRatio = g(float64(c.ExpectedN) / float64(p.NP))
	}
	return f
}

// Pending describes a configuration waiting for the open round to finish.
func Pending(p wire.Params, timeout time.Duration) string {
	if p.Protocol == wire.ProtocolSecAgg {
		return fmt.Sprintf("%s, σ = %.4g, %d bits, C = %g (L2), q = %g, min batch %d, quota %d, timeout %v",
			p.Protocol, p.Sigma, p.Bits, p.Clip, p.CheckInP, p.MinBatch, p.Quota, timeout)
	}
	return fmt.Sprintf("%s, k = %d, l = %d, n_p = %d, ε_l = %g, C = %g, p = %g, min batch %d, timeout %v",
		p.Protocol, p.K, p.L, p.NP, p.EpsL, p.Clip, p.CheckInP, p.MinBatch, timeout)
}

// ConfigItems lists the configuration as the dashboard shows it.
func ConfigItems(c Settings) []console.ConfigItem {
	p := c.Params
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	if p.Protocol == wire.ProtocolSecAgg {
		return secaggConfigItems(c)
	}
	items := []console.ConfigItem{
		{Name: "protocol", Value: p.Protocol.String()},
		{Name: "randomizer", Value: p.Randomizer.String()},
		{Name: "model dimension d", Value: u(p.D)},
		{Name: "coordinates per client k", Value: u(p.K)},
		{Name: "groups l", Value: u(p.L)},
		{Name: "entries per message", Value: u(p.Width)},
		{Name: "messages per client", Value: strconv.Itoa(p.Messages())},
		{Name: "padding n_p per dimension", Value: u(p.NP)},
		{Name: "local budget ε_l of one report", Value: g(p.EpsL)},
		{Name: "ε per reported coordinate", Value: g(p.PerCoordinateEpsilon())},
	}
	if p.Randomizer == wire.RandomizerGaussian {
		items = append(items, console.ConfigItem{Name: "local δ_l", Value: g(p.DeltaL)})
	}
	if p.Randomizer == wire.RandomizerRGB {
		items = append(items, console.ConfigItem{Name: "rgb buckets", Value: u(p.Buckets)})
	}
	items = append(items,
		console.ConfigItem{Name: "clipping bound C", Value: g(p.Clip)},
		console.ConfigItem{Name: "check-in probability p", Value: g(p.CheckInP)},
		console.ConfigItem{Name: "minimum batch", Value: u(p.MinBatch)},
		console.ConfigItem{Name: "quota (0: none)", Value: u(p.Quota)},
		console.ConfigItem{Name: "expected reports per round n", Value: strconv.Itoa(c.ExpectedN)},
		console.ConfigItem{Name: "round timeout", Value: c.Timeout.String()},
		console.ConfigItem{Name: "server optimiser", Value: ServerOptimizerWords(c.ServerOptimizer, c.ServerMomentum)},
		console.ConfigItem{Name: "server learning rate", Value: g(c.ServerLR)},
		console.ConfigItem{Name: "privacy target", Value: "ε = " + g(c.TargetEpsilon) + ", δ = " + g(c.TargetDelta)},
	)
	if c.Rounds > 0 {
		items = append(items, console.ConfigItem{Name: "rounds to run", Value: strconv.Itoa(c.Rounds)})
	}
	return items
}

// ServerOptimizerWords names the server's step for the configuration
// list: "sgd" ("" too), or "momentum (FedAvgM), β = 0.9".
func ServerOptimizerWords(kind string, beta float64) string {
	if kind == "" || kind == "sgd" {
		return "sgd"
	}
	if kind == "momentum" {
		return "momentum (FedAvgM), β = " + strconv.FormatFloat(beta, 'g', -1, 64)
	}
	return kind
}

// secaggConfigItems lists a secure-summation configuration as the
// dashboard shows it (no local budget, padding or messages: the servers'
// noise σ and the field's sizes instead).
func secaggConfigItems(c Settings) []console.ConfigItem {
	p := c.Params
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	items := []console.ConfigItem{
		{Name: "protocol", Value: p.Protocol.String() + " (secure summation, docs/secagg.md)"},
		{Name: "noise", Value: p.Randomizer.String() + ", added by each server"},
		{Name: "model dimension d", Value: u(p.D)},
		{Name: "each server's σ (grid units)", Value: g(p.Sigma)},
		{Name: "bits per quantized entry", Value: u(p.Bits)},
		{Name: "L2 clip C of an update", Value: g(p.Clip)},
		{Name: "check-in rate q", Value: g(p.CheckInP)},
		{Name: "minimum batch", Value: u(p.MinBatch)},
		{Name: "quota (largest batch)", Value: u(p.Quota)},
		{Name: "expected reports per round n", Value: strconv.Itoa(c.ExpectedN)},
		{Name: "round timeout", Value: c.Timeout.String()},
		{Name: "server optimiser", Value: ServerOptimizerWords(c.ServerOptimizer, c.ServerMomentum)},
		{Name: "server learning rate", Value: g(c.ServerLR)},
		{Name: "privacy target", Value: "ε = " + g(c.TargetEpsilon) + ", δ = " + g(c.TargetDelta) + " (replacing one volunteer's data)"},
	}
	if c.Rounds > 0 {
		items = append(items, console.ConfigItem{Name: "rounds to run", Value: strconv.Itoa(c.Rounds)})
	}
	return items
}

// ProtocolDefaults are the form values each protocol starts from for the
// current model, expected n and local budget (params.Build with the
// protocol's own defaults; secure summation with the σ sigma returns,
// omitted if it fails).
func ProtocolDefaults(c Settings, sigma func() (float64, error)) []console.ProtocolDefaults {
	p := c.Params
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out []console.ProtocolDefaults
	for _, name := range console.Protocols {
		f := params.Choice{Protocol: name, Randomizer: p.Randomizer.String(), Buckets: int(p.Buckets), MinBatch: int(p.MinBatch),
			EpsL: p.EpsL, DeltaL: p.DeltaL, Clip: p.Clip, CheckIn: p.CheckInP}
		if (name == wire.ProtocolSecAgg.String()) != (p.Protocol == wire.ProtocolSecAgg) {
			f.Clip = 0 // the other kind of clip: its default
		}
		if p.Protocol == wire.ProtocolSecAgg {
			f.Randomizer, f.EpsL = wire.RandomizerLaplace.String(), 0
		}
		// APES and S-APES use clip-laplace, the FLAME protocols never.
		if proto, err := wire.ParseProtocol(name); err == nil && proto != wire.ProtocolSecAgg && proto.IsAPES() != p.Protocol.IsAPES() {
			f.Randomizer = wire.RandomizerLaplace.String()
			if proto.IsAPES() {
				f.Randomizer = wire.RandomizerClipLaplace.String()
			}
		}
		if name == wire.ProtocolSecAgg.String() {
			sigma, err := sigma()
			if err != nil {
				continue
			}
			f.Sigma, f.Bits = sigma, int(p.Bits)
		}
		np, lr, err := params.Build(int(p.D), c.ExpectedN, f)
		if err != nil {
			continue
		}
		def := console.ProtocolDefaults{Protocol: name, ServerLR: g(lr)}
		if np.Protocol != wire.ProtocolSSSimple && np.NP > 0 {
			def.K = strconv.Itoa(int(np.K))
			def.NPRatio = g(float64(c.ExpectedN) / float64(np.NP))
		}
		out = append(out, def)
	}
	return out
}

// FormFromPost shows the operator's posted form again (after an error).
func FormFromPost(f url.Values, d int) console.OperatorForm {
	return console.OperatorForm{Protocol: f.Get("protocol"), EpsL: f.Get("eps_l"), Clip: f.Get("clip"), K: f.Get("k"),
		Beta: f.Get("beta"), NPRatio: f.Get("np_ratio"), CheckInP: f.Get("check_in_p"), RoundTimeout: f.Get("round_timeout"),
		MinBatch: f.Get("min_batch"), ServerLR: f.Get("server_lr"), D: d}
}
