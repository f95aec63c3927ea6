package acklog

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/wire"
)

func params() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: 8, K: 4, L: 1, Width: 1, NP: 6, MinBatch: 2, EpsL: 2, Clip: 1, CheckInP: 1}
}

func marker(t *testing.T, num uint64, p wire.Params, pop uint32) []byte {
	t.Helper()
	key, err := envelopetest.DeriveKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	a := wire.Announcement{Round: num, Deadline: time.Unix(2e9, 0), Params: p, HPKEPub: key.Public().HPKE, Model: make([]float64, p.D)}
	if p.Protocol == wire.ProtocolSecAgg {
		a.RelayPub = [32]byte{1}
	}
	if err := a.Sign(key); err != nil {
		t.Fatal(err)
	}
	ann, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m, err := MarshalMarker(Marker{Ann: ann, Population: pop})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reportFrame(t *testing.T, num uint64, p wire.Params, seq int, idx uint32) []byte {
	t.Helper()
	r := wire.Report{Round: num, Seq: uint16(seq), Count: uint16(p.Messages()), Indices: []uint32{idx},
		Sealed: bytes.Repeat([]byte{byte(seq + 1)}, envelope.SealedLen(int(p.Width)))}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRebuild: the round a restart finds is exactly the acknowledged one:
// the marker's population and parameters, every check-in, every complete
// report's messages (and no partial one's: counted discarded), in a
// closed round the relay forwards like any other (Plan: a batch at the
// minimum batch, an abort below it).
func TestRebuild(t *testing.T) {
	p := params()
	m := p.Messages()
	frames := map[uint64]map[string][]byte{}
	for conn := uint64(1); conn <= 4; conn++ {
		recs := map[string][]byte{CheckInKey: []byte("check-in")}
		n := m
		if conn == 3 {
			n = m - 1 // partial
		}
		if conn == 4 {
			n = 0 // checked in only
		}
		for seq := range n {
			recs[ReportKey(seq)] = reportFrame(t, 5, p, seq, uint32(seq))
		}
		frames[conn] = recs
	}
	c, err := Rebuild(5, marker(t, 5, p, 7), frames, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Num != 5 || c.Population != 7 || c.CheckedIn != 4 || c.Reports != 2 || c.Discarded != 1 || len(c.Real) != 2*m ||
		c.Params != p || c.Floor != 1 || c.SecAgg != nil {
		t.Fatalf("rebuilt %+v", c)
	}
	if plan := c.Plan(); plan.Abort {
		t.Errorf("two complete reports at minimum batch 2: %+v", plan)
	}
	delete(frames, 2)
	c, err = Rebuild(5, marker(t, 5, p, 7), frames, 1)
	if err != nil || c.Reports != 1 || !c.Plan().Abort || c.Plan().Reason != wire.AbortBelowMinBatch {
		t.Errorf("one report: %+v, %v", c, err)
	}
	// A frame of another round in the records is not a report of this one.
	frames[2] = map[string][]byte{CheckInKey: nil}
	for seq := range m {
		frames[2][ReportKey(seq)] = reportFrame(t, 6, p, seq, 0)
	}
	if c, _ := Rebuild(5, marker(t, 5, p, 7), frames, 1); c.Reports != 1 {
		t.Errorf("another round's frames counted: %d reports", c.Reports)
	}
}

// TestRebuildNeedsAMarker: a marker of the former (empty) format, of
// another round or of a secure-summation round rebuilds nothing.
func TestRebuildNeedsAMarker(t *testing.T) {
	p := params()
	sa := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 20000, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 16}
	for name, mk := range map[string][]byte{"empty": nil, "other round": marker(t, 6, p, 3), "junk": []byte("{"), "secure summation": marker(t, 5, sa, 3)} {
		if _, err := Rebuild(5, mk, nil, 1); !errors.Is(err, ErrNoMarker) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
