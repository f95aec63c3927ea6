package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestPeekRound: every frame type carries its round at the same offset,
// and PeekRound returns the round its parser decodes.
func TestPeekRound(t *testing.T) {
	p := testParams(ProtocolSSDouble)
	ann := testAnnouncement(p)
	ann.Round = 1<<40 + 3
	rep := &Report{Round: 1<<33 + 1, Seq: 0, Count: 2, Indices: []uint32{0, 1}, Sealed: fakeSealed(2, 9)}
	bat := testBatch(p, p.NP, 1)
	bat.Round = 77
	frames := []struct {
		t     Type
		round uint64
		b     []byte
	}{
		{TypeAnnouncement, ann.Round, mustMarshal(t, ann)},
		{TypeCheckIn, 1 << 50, mustMarshal(t, &CheckIn{Round: 1 << 50})},
		{TypeReport, rep.Round, mustMarshal(t, rep)},
		{TypeBatch, 77, mustMarshal(t, bat)},
		{TypeBatchReply, 5, mustMarshal(t, &BatchReply{Round: 5})},
		{TypeAbort, 6, mustMarshal(t, &Abort{Round: 6, Reason: AbortRelayRestart})},
		{TypeAck, 0, mustMarshal(t, &Ack{Round: 0, Status: AckMalformed})},
	}
	for _, f := range frames {
		typ, round, err := PeekRound(f.b)
		if err != nil || typ != f.t || round != f.round {
			t.Errorf("%v: PeekRound = %v, %d, %v; want %v, %d", f.t, typ, round, err, f.t, f.round)
		}
		// Only the first 10 bytes matter.
		if _, r2, err := PeekRound(f.b[:10]); err != nil || r2 != f.round {
			t.Errorf("%v: header and round only: %d, %v", f.t, r2, err)
		}
		if _, _, err := PeekRound(f.b[:9]); !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%v: 9 bytes: err %v, want truncated", f.t, err)
		}
	}
	bad := mutate(frames[1].b, func(c []byte) []byte { c[0] = 2; return c })
	if _, _, err := PeekRound(bad); !errors.Is(err, ErrVersion) {
		t.Errorf("bad version: %v", err)
	}
	bad = mutate(frames[1].b, func(c []byte) []byte { c[1] = 0x7f; return c })
	if _, _, err := PeekRound(bad); !errors.Is(err, ErrType) {
		t.Errorf("bad type: %v", err)
	}
}

// TestReportEnc: Enc is the first EncSize bytes of the sealed part, as
// parsed from the frame.
func TestReportEnc(t *testing.T) {
	p := testParams(ProtocolSSDouble)
	rep := &Report{Round: 1, Seq: 0, Count: uint16(p.Messages()), Indices: []uint32{0, 1}, Sealed: fakeSealed(int(p.Width), 40)}
	b := mustMarshal(t, rep)
	got, err := ParseReport(b, p)
	if err != nil {
		t.Fatal(err)
	}
	enc := got.Enc()
	if !bytes.Equal(enc[:], rep.Sealed[:EncSize]) {
		t.Fatalf("enc %x, want %x", enc, rep.Sealed[:EncSize])
	}
	other := &Report{Sealed: fakeSealed(int(p.Width), 41)}
	if other.Enc() == enc {
		t.Fatal("different sealed parts gave the same enc")
	}
	if (&Report{Sealed: []byte{1, 2}}).Enc() != [EncSize]byte{} {
		t.Fatal("short sealed part: enc not zero")
	}
}
