package wire_test

import (
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The aggregator signs an announcement; a client decodes it and verifies it
// against the pinned key before sealing its report.
func ExampleParseAnnouncement() {
	agg, _ := envelopetest.DeriveKey([32]byte{42}) // the aggregator: aggregator/internal/sealkey.GenerateKey
	a := &wire.Announcement{
		Round:    1,
		Deadline: time.UnixMilli(1_700_000_000_000),
		Params: wire.Params{
			Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
			D: 4, K: 2, L: 1, Width: 1, NP: 10, MinBatch: 2,
			EpsL: 1, Clip: 1, CheckInP: 1,
		},
		HPKEPub: agg.Public().HPKE,
		Model:   []float64{0, 0, 0, 0},
	}
	if err := a.Sign(agg); err != nil {
		fmt.Println(err)
		return
	}
	frame, _ := a.MarshalBinary()

	got, err := wire.ParseAnnouncement(frame, wire.DefaultLimits())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.Verify(agg.Public()))
	fmt.Println(len(frame), got.Params.Messages(), got.Params.ReportFrameSize())
	// Output:
	// <nil>
	// 212 2 78
}
