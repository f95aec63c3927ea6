package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/wsclient"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// referenceReport is the cohort's time per secure-summation report at the
// MNIST size (cohort.ReportCost: 2 x GOMAXPROCS volunteers preparing at
// once) on an idle two-core machine: one report is 60 to 125 ms of one
// core (shared/client BenchmarkRoundSecAgg, cpu-ns/op), two cores halve
// that. The tests' round timeouts and waits were chosen on such a
// machine with a margin of three to five.
const referenceReport = 60 * time.Millisecond

// slow is how much slower this machine is now than the reference: the
// measured cost of a volunteer's report (cohort.ReportCost, in TestMain)
// over referenceReport, at least 1. Every round timeout and wait of these
// tests goes through scaled, so that they hold on a loaded machine instead
// of failing by a fixed deadline.
var slow = 1.0

// measureSpeed sets slow.
func measureSpeed(ctx context.Context) error {
	digits, err := task.Digits() // ReportCost trains on the digits task's features
	if err != nil {
		return err
	}
	p, _, err := roundspec.Build(digits.D(), 400, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 1, MinBatch: 1})
	if err != nil {
		return err
	}
	per, err := cohort.ReportCost(ctx, cohort.Config{PerUser: 20, Seed: 1}, p)
	if err != nil {
		return err
	}
	slow = max(1, float64(per)/float64(referenceReport))
	fmt.Printf("e2e: a volunteer's report takes %v here: timeouts and waits x%.2f\n", per.Round(time.Millisecond), slow)
	return nil
}

// scaled is d on the reference machine, stretched by slow.
func scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * slow).Round(time.Second)
}

// silentVolunteer checks in to every round and never reports: the relay
// waits for its report until the round's deadline (it closes a round early
// only once every volunteer who checked in has reported), so a test can
// keep rounds open to their deadline.
func silentVolunteer(ctx context.Context, relay string, _ envelope.PublicKey) error {
	t, err := wsclient.Dial(ctx, relay, "")
	if err != nil {
		return err
	}
	defer t.Close()
	for {
		f, err := t.Recv(ctx)
		if err != nil {
			return err
		}
		if typ, r, err := wire.PeekRound(f); err == nil && typ == wire.TypeAnnouncement {
			ci, _ := (&wire.CheckIn{Round: r}).MarshalBinary()
			if err := t.Send(ctx, ci); err != nil {
				return err
			}
		}
	}
}
