package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The fuzz targets check that no input panics and that every accepted
// frame is canonical: re-encoding the decoded value gives back exactly the
// input bytes (so a frame has one encoding, and signatures over decoded
// announcements cover what was received).

func FuzzParseAnnouncement(f *testing.F) {
	for _, proto := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk} {
		b := mustMarshal(f, testAnnouncement(testParams(proto)))
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(bytes.Clone(b), 0))
	}
	sp := secAggParams()
	sp.Counts = NewCountList(CountBlock{Kind: CountEval, N: 100, Sigma: 9930.4}, CountBlock{Kind: CountQuestion, N: 3, Sigma: 3895})
	sa := testAnnouncement(sp)
	sa.RelayPub = [32]byte{4}
	b := mustMarshal(f, sa)
	f.Add(b)
	f.Add(b[:len(b)-1])
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAnnouncement(b, Limits{MaxD: 64})
		if err != nil {
			return
		}
		if err := a.Params.Validate(); err != nil {
			t.Fatalf("accepted invalid params: %v", err)
		}
		out, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("accepted announcement does not re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
		}
	})
}

func FuzzParseReport(f *testing.F) {
	p := testParams(ProtocolSSTopk)
	for seq := range uint16(2) {
		b := mustMarshal(f, testReport(p, seq))
		f.Add(b)
		f.Add(b[:len(b)-3])
		c := bytes.Clone(b)
		binary.BigEndian.PutUint32(c[repIndices+8:], binary.BigEndian.Uint32(c[repIndices:]))
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b, p)
		if err != nil {
			return
		}
		seen := map[uint32]bool{}
		for _, x := range r.Indices {
			if x >= p.D || seen[x] {
				t.Fatalf("accepted bad indices %v", r.Indices)
			}
			seen[x] = true
		}
		if len(b) != p.ReportFrameSize() || int(r.Count) != p.Messages() || r.Seq >= r.Count {
			t.Fatalf("accepted a frame of the wrong shape: %+v", r)
		}
		out, err := r.MarshalBinary()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

func FuzzParseBatch(f *testing.F) {
	p := testParams(ProtocolSSDouble)
	p.NP = 2 // 6 messages of width 2: small enough for the fuzzer to mutate meaningfully
	for _, np := range []uint32{2, 3} {
		b := mustMarshal(f, testBatch(p, np, 2))
		f.Add(b)
		f.Add(b[:len(b)-1])
		c := bytes.Clone(b)
		binary.BigEndian.PutUint32(c[batchHeader+4:], 2)
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bt, err := ParseBatch(b, p)
		if err != nil {
			return
		}
		counts := make([]uint32, p.D)
		for _, m := range bt.Messages {
			if len(m.Indices) != int(p.Width) {
				t.Fatal("message of the wrong width")
			}
			seen := map[uint32]bool{}
			for _, x := range m.Indices {
				if x >= p.D || seen[x] {
					t.Fatalf("accepted bad indices %v", m.Indices)
				}
				seen[x] = true
				counts[x]++
			}
		}
		for j, c := range counts {
			if c != bt.NP {
				t.Fatalf("dimension %d appears %d times, np %d", j, c, bt.NP)
			}
		}
		if bt.NP < p.NP || bt.Reports < p.MinBatch || bt.Reports > bt.CheckedIn {
			t.Fatalf("accepted bad header %+v", bt)
		}
		out, err := bt.MarshalBinary()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

// FuzzParseSmall covers the fixed-size frames, dispatched by PeekType.
func FuzzParseSmall(f *testing.F) {
	for _, m := range []interface{ MarshalBinary() ([]byte, error) }{
		&CheckIn{Round: 1}, &BatchReply{Round: 2, Accepted: 3, Status: BatchStatusRefused},
		&Abort{Round: 3, Reason: AbortRelayRestart, Reports: 1}, &Ack{Round: 0, Status: AckMalformed, Received: 2},
	} {
		b := mustMarshal(f, m)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{1, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := PeekType(b)
		if err != nil {
			return
		}
		var m interface{ MarshalBinary() ([]byte, error) }
		switch typ {
		case TypeCheckIn:
			m, err = ParseCheckIn(b)
		case TypeBatchReply:
			m, err = ParseBatchReply(b)
		case TypeAbort:
			m, err = ParseAbort(b)
		case TypeAck:
			m, err = ParseAck(b)
		default:
			return
		}
		if err != nil {
			return
		}
		out, err := m.MarshalBinary()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("%v: re-encoding differs (%v)", typ, err)
		}
	})
}
