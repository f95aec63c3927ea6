// Package experiment is Blanket's experiment runner: it trains the global
// model in-process with simulated users, one method per row, and prints the
// comparison tables of FLAME (Figure 5), APES (Table 3) and shuffled check-in
// with the accuracy each method reaches and the central epsilon it claims.
package experiment

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
)

// Table names.
const (
	tableFLAME   = "flame"
	tableAPES    = "apes"
	tableCheckIn = "checkin"
)

// roundRecord is one round of one run.
type roundRecord struct {
	Round        int     `json:"round"`
	Participants int     `json:"participants"`
	CheckInRate  float64 `json:"check_in_rate,omitempty"`
	NP           int     `json:"n_p,omitempty"`
	Raised       bool    `json:"n_p_raised,omitempty"`
	Truncated    int     `json:"truncated,omitempty"`
	// Rejected counts the reports the servers rejected.
	Rejected int     `json:"rejected,omitempty"`
	Accuracy float64 `json:"accuracy"`
	Loss     float64 `json:"loss"`
	Seconds  float64 `json:"seconds"`
}

// runResult is one method's run.
type runResult struct {
	ID       string        `json:"id"`
	Method   string        `json:"method"`
	Table    string        `json:"table"`
	Note     string        `json:"note"`
	Users    int           `json:"users_per_round"`
	Pop      int           `json:"population"`
	Rounds   []roundRecord `json:"rounds"`
	Final    float64       `json:"final_accuracy"`
	Best     float64       `json:"best_accuracy"`
	Epochs   float64       `json:"epochs"`
	Claim    claimResult   `json:"privacy"`
	Duration float64       `json:"seconds"`
	// Rejected is the total of the rounds' Rejected, by reason.
	Rejected map[string]int `json:"rejected,omitempty"`
}

// run trains one method for rounds rounds and records every round.
func run(ctx context.Context, w *world, m *method, usersPerRound, rounds int, progress func(*runResult, roundRecord)) (*runResult, error) {
	start := time.Now()
	global := make([]float64, w.shape.NumParams())
	pop := len(w.users)
	if m.pop > 0 {
		pop = m.pop
	}
	if pop > len(w.users) && !m.replicate {
		return nil, fmt.Errorf("%s: %d volunteers but the training part has %d rows, %d shards of %d: each row would be trained by several volunteers, and the ε would then be per volunteer, not per row; "+
			"lower -secagg-pop to %d (or -secagg-per-user to %d), or pass -secagg-replicate to deal the shards to several volunteers on purpose",
			m.name, pop, w.trainLen, len(w.users), w.perUser, len(w.users), max(1, w.trainLen/pop))
	}
	if m.checkInP > 0 {
		usersPerRound = pop
	}
	res := &runResult{ID: m.id, Method: m.name, Table: m.table, Note: m.note, Users: usersPerRound, Pop: pop}
	var checkIn mechanism.CheckIn
	if m.checkInP > 0 {
		var err error
		if checkIn, err = mechanism.NewCheckIn(m.checkInP); err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
	}
	groups := pop / usersPerRound
	if groups < 1 {
		return nil, fmt.Errorf("%s: %d users per round but only %d users", m.name, usersPerRound, pop)
	}
	step := func(g, delta []float64) {
		for j, v := range delta {
			g[j] += m.serverLR * v
		}
	}
	if m.newStep != nil {
		step = m.newStep()
	}
	participations := 0
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		rec := roundRecord{Round: r + 1}
		var users []int
		if m.checkInP > 0 {
			// Every user flips its own coin (Shuffled check-in, Algorithm 1).
			users = users[:0]
			for u := 0; u < pop; u++ {
				if checkIn.Decide(noise.NewSeeded(mix(w.seed, tagCheckIn, uint64(r), uint64(u)))) {
					users = append(users, u)
				}
			}
			rec.CheckInRate = float64(len(users)) / float64(pop)
			if len(users) == 0 {
				return nil, fmt.Errorf("%s: round %d: no user checked in", m.name, r+1)
			}
		} else {
			// Disjoint groups in turn, as FLAME's code: an epoch is
			// pop/usersPerRound rounds.
			g := r % groups
			users = make([]int, usersPerRound)
			for i := range users {
				users[i] = g*usersPerRound + i
			}
		}
		rec.Participants = len(users)
		participations += len(users)
		updates, err := w.localUpdates(ctx, global, users, m.train, r, tagTrain)
		if err != nil {
			return nil, fmt.Errorf("%s: round %d: %w", m.name, r+1, err)
		}
		out, err := m.aggregate(ctx, w, roundInput{round: r, users: users, updates: updates})
		if err != nil {
			return nil, fmt.Errorf("%s: round %d: %w", m.name, r+1, err)
		}
		step(global, out.delta)
		rec.NP, rec.Raised, rec.Truncated = out.np, out.raised, out.truncated
		if len(out.rejected) > 0 {
			if res.Rejected == nil {
				res.Rejected = map[string]int{}
			}
			for k, v := range out.rejected {
				rec.Rejected += v
				res.Rejected[k] += v
			}
		}
		if rec.Accuracy, err = logreg.Accuracy(global, w.test); err != nil {
			return nil, fmt.Errorf("%s: evaluate: %w", m.name, err)
		}
		if rec.Loss, err = logreg.Loss(global, w.test, 0); err != nil {
			return nil, fmt.Errorf("%s: evaluate: %w", m.name, err)
		}
		rec.Seconds = time.Since(t0).Seconds()
		res.Rounds = append(res.Rounds, rec)
		if progress != nil {
			progress(res, rec)
		}
	}
	res.Final = res.Rounds[len(res.Rounds)-1].Accuracy
	for _, rec := range res.Rounds {
		res.Best = math.Max(res.Best, rec.Accuracy)
	}
	res.Epochs = float64(participations) / float64(pop)
	res.Claim = m.claim(res)
	res.Duration = time.Since(start).Seconds()
	return res, nil
}

// printTable writes one comparison table as aligned text.
func printTable(out io.Writer, title string, rows []*runResult) {
	fmt.Fprintf(out, "\n%s\n", title)
	fmt.Fprintf(out, "%-22s %9s %9s %14s %14s %10s  %s\n", "method", "final acc", "best acc", "eps/epoch", "eps (run)", "delta", "accountant")
	for _, r := range rows {
		fmt.Fprintf(out, "%-22s %8.2f%% %8.2f%% %14s %14s %10s  %s\n", r.Method, 100*r.Final, 100*r.Best,
			fmtEps(r.Claim.PerEpoch), fmtEps(r.Claim.Total), fmtDelta(r.Claim.Delta), r.Claim.Accountant)
	}
	fmt.Fprintln(out)
	for _, r := range rows {
		note := r.Note
		if len(r.Rejected) > 0 {
			note += "; REJECTED over the run: " + fmtReasons(r.Rejected)
		}
		fmt.Fprintf(out, "  %-20s %s\n", r.Method+":", note)
	}
}

func fmtEps(e float64) string {
	switch {
	case math.IsNaN(e):
		return "-"
	case math.IsInf(e, 1):
		return "inf"
	case e >= 100:
		return fmt.Sprintf("%.1f", e)
	default:
		return fmt.Sprintf("%.4g", e)
	}
}

func fmtDelta(d float64) string {
	if math.IsNaN(d) {
		return "-"
	}
	if d == 0 {
		return "0"
	}
	return fmt.Sprintf("%.1e", d)
}
