package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
)

func TestPeekType(t *testing.T) {
	cases := []struct {
		in   []byte
		want Type
		err  error
	}{
		{nil, 0, ErrTruncated},
		{[]byte{1}, 0, ErrTruncated},
		{[]byte{2, 1}, 0, ErrVersion},
		{[]byte{0, 1}, 0, ErrVersion},
		{[]byte{1, 0}, 0, ErrType},
		{[]byte{1, 0x10}, 0, ErrType},
		{[]byte{1, 0x0F}, TypeSecAggResume, nil},
		{[]byte{1, 0x0C}, TypeSecAggChunk, nil},
		{[]byte{1, 8, 9}, TypeShares, nil},
		{[]byte{1, 1}, TypeAnnouncement, nil},
		{[]byte{1, 7, 9, 9}, TypeAck, nil},
	}
	for _, c := range cases {
		got, err := PeekType(c.in)
		if c.err != nil {
			if !errors.Is(err, c.err) || !errors.Is(err, ErrMalformed) {
				t.Errorf("%x: err = %v, want %v", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%x: got %v, %v", c.in, got, err)
		}
	}
}

// ---- Announcement ----

func TestAnnouncementRoundTrip(t *testing.T) {
	k, err := envelopetest.DeriveKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk} {
		a := testAnnouncement(testParams(proto))
		a.HPKEPub = k.Public().HPKE
		if err := a.Sign(k); err != nil {
			t.Fatal(err)
		}
		b := mustMarshal(t, a)
		if len(b) != announcementSize(int(a.Params.D)) {
			t.Fatalf("size %d, want %d", len(b), announcementSize(int(a.Params.D)))
		}
		got, err := ParseAnnouncement(b, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if got.Round != a.Round || !got.Deadline.Equal(a.Deadline) || got.Params != a.Params || got.HPKEPub != a.HPKEPub || got.Signature != a.Signature {
			t.Fatalf("%v: header fields changed: %+v", proto, got)
		}
		for i := range a.Model {
			if math.Float64bits(got.Model[i]) != math.Float64bits(a.Model[i]) {
				t.Fatalf("model[%d] = %v, want %v", i, got.Model[i], a.Model[i])
			}
		}
		if !bytes.Equal(mustMarshal(t, got), b) {
			t.Fatal("re-encoding differs")
		}
		if err := got.Verify(k.Public()); err != nil {
			t.Fatalf("verify: %v", err)
		}
		signed, _ := got.SignedBytes()
		if !bytes.Equal(signed, b[:len(b)-64]) {
			t.Fatal("SignedBytes is not the frame without its signature")
		}
	}
}

func TestAnnouncementDeadlineMillis(t *testing.T) {
	a := testAnnouncement(testParams(ProtocolSSSimple))
	a.Deadline = time.Unix(1_700_000_000, 123_456_789)
	got, err := ParseAnnouncement(mustMarshal(t, a), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.UnixMilli(1_700_000_000_123); !got.Deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", got.Deadline, want)
	}
}

// TestAnnouncementSignatureCoversEveryByte flips each bit position of each
// byte of a signed frame: the result either fails to decode or fails
// verification.
func TestAnnouncementSignatureCoversEveryByte(t *testing.T) {
	k, _ := envelopetest.DeriveKey([32]byte{7})
	other, _ := envelopetest.DeriveKey([32]byte{8})
	a := testAnnouncement(testParams(ProtocolSSTopk))
	a.HPKEPub = k.Public().HPKE
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	b := mustMarshal(t, a)
	for i := range b {
		for _, m := range []byte{0x01, 0x80} {
			c := mutate(b, func(c []byte) []byte { c[i] ^= m; return c })
			got, err := ParseAnnouncement(c, DefaultLimits())
			if err != nil {
				continue
			}
			if err := got.Verify(k.Public()); !errors.Is(err, ErrSignature) {
				t.Fatalf("byte %d ^ %#x: verify err = %v", i, m, err)
			}
		}
	}
	got, _ := ParseAnnouncement(b, DefaultLimits())
	if err := got.Verify(other.Public()); !errors.Is(err, ErrSignature) {
		t.Fatalf("other key: %v", err)
	}
	// Signed by the right key but announcing another HPKE key.
	a.HPKEPub = other.Public().HPKE
	_ = a.Sign(k)
	if err := a.Verify(k.Public()); !errors.Is(err, ErrSignature) {
		t.Fatalf("foreign hpke key: %v", err)
	}
}

func TestParseAnnouncementErrors(t *testing.T) {
	p := testParams(ProtocolSSSimple)
	good := mustMarshal(t, testAnnouncement(p))
	setU32 := func(off int, v uint32) func([]byte) []byte {
		return func(c []byte) []byte { binary.BigEndian.PutUint32(c[off:], v); return c }
	}
	setF64 := func(off int, v float64) func([]byte) []byte {
		return func(c []byte) []byte { binary.BigEndian.PutUint64(c[off:], math.Float64bits(v)); return c }
	}
	cases := []struct {
		name string
		in   []byte
		lim  Limits
		err  error
	}{
		{"empty", nil, Limits{}, ErrTruncated},
		{"header only", good[:2], Limits{}, ErrTruncated},
		{"fixed part short", good[:annModel+63], Limits{}, ErrTruncated},
		{"one byte short", good[:len(good)-1], Limits{}, ErrTruncated},
		{"trailing", append(bytes.Clone(good), 0), Limits{}, ErrTrailing},
		{"version", mutate(good, func(c []byte) []byte { c[0] = 2; return c }), Limits{}, ErrVersion},
		{"type", mutate(good, func(c []byte) []byte { c[1] = byte(TypeReport); return c }), Limits{}, ErrType},
		{"round 0", mutate(good, func(c []byte) []byte { clear(c[2:10]); return c }), Limits{}, ErrValue},
		{"protocol", mutate(good, func(c []byte) []byte { c[18] = 9; return c }), Limits{}, ErrParams},
		{"d above limit", good, Limits{MaxD: 5}, ErrLimit},
		{"d huge", mutate(good, setU32(20, 1<<31)), Limits{}, ErrLimit},
		{"d disagrees with length", mutate(mutate(good, setU32(20, 5)), setU32(24, 5)), Limits{}, ErrParams}, // width 2 !| 5
		{"d larger than frame", mutate(mutate(good, setU32(20, 8)), setU32(24, 8)), Limits{}, ErrTruncated},
		{"epsL NaN", mutate(good, setF64(52, math.NaN())), Limits{}, ErrParams},
		{"model NaN", mutate(good, setF64(annModel+8, math.NaN())), Limits{}, ErrValue},
		{"model -Inf", mutate(good, setF64(annModel, math.Inf(-1))), Limits{}, ErrValue},
		{"bad limits", good, Limits{MaxD: -1}, nil},
	}
	for _, c := range cases {
		_, err := ParseAnnouncement(c.in, c.lim)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if c.err != nil && (!errors.Is(err, c.err) || !errors.Is(err, ErrMalformed)) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
	if _, err := ParseAnnouncement(good, Limits{MaxD: 6}); err != nil {
		t.Errorf("d = MaxD accepted: %v", err)
	}
}

func TestAnnouncementMarshalRejects(t *testing.T) {
	for name, f := range map[string]func(a *Announcement){
		"round 0":      func(a *Announcement) { a.Round = 0 },
		"params":       func(a *Announcement) { a.Params.EpsL = 0 },
		"model length": func(a *Announcement) { a.Model = a.Model[:5] },
		"model NaN":    func(a *Announcement) { a.Model[0] = math.NaN() },
	} {
		a := testAnnouncement(testParams(ProtocolSSSimple))
		f(a)
		if _, err := a.MarshalBinary(); err == nil {
			t.Errorf("%s: marshaled", name)
		}
		if _, err := a.SignedBytes(); err == nil {
			t.Errorf("%s: SignedBytes", name)
		}
	}
}

// ---- Report ----

func testReport(p Params, seq uint16) *Report {
	idx := make([]uint32, p.Width)
	for i := range idx {
		idx[i] = (uint32(seq)*p.Width + uint32(i)) % p.D
	}
	return &Report{Round: 4, Seq: seq, Count: uint16(p.Messages()), Indices: idx, Sealed: fakeSealed(int(p.Width), byte(seq))}
}

func TestReportRoundTrip(t *testing.T) {
	k, _ := envelopetest.DeriveKey([32]byte{1})
	for _, proto := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk} {
		p := testParams(proto)
		for seq := range uint16(p.Messages()) {
			r := testReport(p, seq)
			vals := make([]float64, p.Width)
			for i := range vals {
				vals[i] = float64(seq) + float64(i)/10
			}
			var err error
			if r.Sealed, err = envelope.SealValues(k.Public().HPKE, r.Round, vals); err != nil {
				t.Fatal(err)
			}
			b := mustMarshal(t, r)
			if len(b) != p.ReportFrameSize() {
				t.Fatalf("%v: frame %d bytes, ReportFrameSize %d", proto, len(b), p.ReportFrameSize())
			}
			got, err := ParseReport(b, p)
			if err != nil {
				t.Fatalf("%v seq %d: %v", proto, seq, err)
			}
			if got.Round != r.Round || got.Seq != r.Seq || got.Count != r.Count || !equalU32(got.Indices, r.Indices) || !bytes.Equal(got.Sealed, r.Sealed) {
				t.Fatalf("%v: round trip changed the report: %+v", proto, got)
			}
			open, err := k.OpenValues(got.Round, got.Sealed, nil)
			if err != nil || open[len(open)-1] != vals[len(vals)-1] {
				t.Fatalf("sealed part does not open after the round trip: %v", err)
			}
			app, err := r.AppendBinary([]byte("prefix"))
			if err != nil || !bytes.Equal(app[6:], b) || string(app[:6]) != "prefix" {
				t.Fatal("AppendBinary differs from MarshalBinary")
			}
		}
	}
}

// TestReportFrameSizeIndependentOfData: frames of one round have one size
// whatever the indices, values and position.
func TestReportFrameSizeIndependentOfData(t *testing.T) {
	k, _ := envelopetest.DeriveKey([32]byte{1})
	p := testParams(ProtocolSSTopk)
	sizes := map[int]bool{}
	for i, vals := range [][]float64{{0, 0, 0}, {1, -1, 0.5}, {math.MaxFloat64, math.SmallestNonzeroFloat64, -0.0}, {1e-300, 1e300, 42}} {
		sealed, err := envelope.SealValues(k.Public().HPKE, 1, vals)
		if err != nil {
			t.Fatal(err)
		}
		r := &Report{Round: uint64(1 + i*1000), Seq: uint16(i % 2), Count: 2, Indices: []uint32{uint32(i), 5, uint32(i + 1)}, Sealed: sealed}
		sizes[len(mustMarshal(t, r))] = true
	}
	if len(sizes) != 1 || !sizes[p.ReportFrameSize()] {
		t.Fatalf("frame sizes %v, want only %d", sizes, p.ReportFrameSize())
	}
}

func TestParseReportErrors(t *testing.T) {
	p := testParams(ProtocolSSTopk) // d 6, width 3, M 2
	good := mustMarshal(t, testReport(p, 1))
	idx := func(pos int, v uint32) func([]byte) []byte {
		return func(c []byte) []byte { binary.BigEndian.PutUint32(c[repIndices+4*pos:], v); return c }
	}
	cases := []struct {
		name string
		in   []byte
		p    Params
		err  error
	}{
		{"empty", nil, p, ErrTruncated},
		{"header", good[:2], p, ErrTruncated},
		{"fixed part", good[:17], p, ErrTruncated},
		{"short", good[:len(good)-1], p, ErrTruncated},
		{"trailing", append(bytes.Clone(good), 1), p, ErrTrailing},
		{"version", mutate(good, func(c []byte) []byte { c[0] = 0; return c }), p, ErrVersion},
		{"type", mutate(good, func(c []byte) []byte { c[1] = byte(TypeCheckIn); return c }), p, ErrType},
		{"round 0", mutate(good, func(c []byte) []byte { clear(c[2:10]); return c }), p, ErrValue},
		{"seq = count", mutate(good, func(c []byte) []byte { c[11] = 2; return c }), p, ErrValue},
		{"count", mutate(good, func(c []byte) []byte { c[13] = 3; return c }), p, ErrValue},
		{"width", mutate(good, func(c []byte) []byte { c[17] = 2; return c }), p, ErrValue},
		{"width huge", mutate(good, func(c []byte) []byte { c[14] = 0xff; return c }), p, ErrValue},
		{"index = d", mutate(good, idx(2, 6)), p, ErrIndex},
		{"index max", mutate(good, idx(0, math.MaxUint32)), p, ErrIndex},
		{"duplicate", mutate(good, idx(2, binary.BigEndian.Uint32(good[repIndices:]))), p, ErrIndex},
		{"invalid params", good, Params{}, ErrParams},
		{"other round shape", good, testParams(ProtocolSSSimple), ErrValue},
	}
	for _, c := range cases {
		_, err := ParseReport(c.in, c.p)
		if !errors.Is(err, c.err) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
}

// TestDistinctWide exercises the bitset path (width > smallWidth).
func TestDistinctWide(t *testing.T) {
	p := Params{Protocol: ProtocolSSSimple, Randomizer: RandomizerLaplace, D: 200, K: 200, L: 1, Width: 100, NP: 1, MinBatch: 1, EpsL: 1, Clip: 1, CheckInP: 1}
	r := &Report{Round: 1, Seq: 1, Count: 2, Indices: make([]uint32, 100), Sealed: fakeSealed(100, 0)}
	for i := range r.Indices {
		r.Indices[i] = uint32(199 - 2*i)
	}
	b := mustMarshal(t, r)
	if _, err := ParseReport(b, p); err != nil {
		t.Fatal(err)
	}
	r.Indices[77] = r.Indices[3]
	if _, err := r.MarshalBinary(); !errors.Is(err, ErrIndex) {
		t.Fatalf("marshal of duplicate: %v", err)
	}
	binary.BigEndian.PutUint32(b[repIndices+4*77:], r.Indices[3])
	if _, err := ParseReport(b, p); !errors.Is(err, ErrIndex) {
		t.Fatalf("wide duplicate: %v", err)
	}
	// The scratch bitset is left clean: a duplicate-free list after a
	// failing one still passes with the same scratch.
	scratch := make([]uint64, 4)
	if err := distinct([]uint32{1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33}, 200, scratch); err == nil {
		t.Fatal("duplicate not found")
	}
	for _, w := range scratch {
		if w != 0 {
			t.Fatal("scratch not cleared")
		}
	}
}

func TestReportMarshalRejects(t *testing.T) {
	p := testParams(ProtocolSSTopk)
	for name, f := range map[string]func(r *Report){
		"round 0":     func(r *Report) { r.Round = 0 },
		"count 0":     func(r *Report) { r.Count, r.Seq = 0, 0 },
		"seq = count": func(r *Report) { r.Seq = r.Count },
		"no indices":  func(r *Report) { r.Indices = nil },
		"sealed":      func(r *Report) { r.Sealed = r.Sealed[1:] },
		"duplicate":   func(r *Report) { r.Indices[1] = r.Indices[0] },
		"index big":   func(r *Report) { r.Indices[1] = maxD },
	} {
		r := testReport(p, 0)
		f(r)
		if _, err := r.MarshalBinary(); err == nil {
			t.Errorf("%s: marshaled", name)
		}
	}
}

// ---- Batch ----

func TestBatchRoundTrip(t *testing.T) {
	for _, proto := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk} {
		p := testParams(proto)
		for _, np := range []uint32{p.NP, p.NP + 2} { // announced and raised n_p
			bt := testBatch(p, np, 2)
			b := mustMarshal(t, bt)
			if len(b) != BatchSize(len(bt.Messages), int(p.Width)) {
				t.Fatalf("size %d", len(b))
			}
			got, err := ParseBatch(b, p)
			if err != nil {
				t.Fatalf("%v np %d: %v", proto, np, err)
			}
			if got.Round != bt.Round || got.D != bt.D || got.Width != bt.Width || got.NP != np || got.Reports != bt.Reports ||
				got.CheckedIn != bt.CheckedIn || got.Population != bt.Population || len(got.Messages) != len(bt.Messages) {
				t.Fatalf("header changed: %+v", got)
			}
			for i, m := range got.Messages {
				if !equalU32(m.Indices, bt.Messages[i].Indices) || !bytes.Equal(m.Sealed, bt.Messages[i].Sealed) {
					t.Fatalf("message %d changed", i)
				}
				if cap(m.Indices) != len(m.Indices) || cap(m.Sealed) != len(m.Sealed) {
					t.Fatal("decoded slices can grow into their neighbours")
				}
			}
			if !bytes.Equal(mustMarshal(t, got), b) {
				t.Fatal("re-encoding differs")
			}
		}
	}
}

func TestParseBatchErrors(t *testing.T) {
	p := testParams(ProtocolSSDouble) // d 6, width 2, np 4, M 2 -> 12 messages
	good := mustMarshal(t, testBatch(p, p.NP, 3))
	msg := func(i int) int { return batchHeader + i*batchMessageSize(2) }
	setU32 := func(off int, v uint32) func([]byte) []byte {
		return func(c []byte) []byte { binary.BigEndian.PutUint32(c[off:], v); return c }
	}
	// Message 0 holds dims (0, 1), message 1 holds (2, 3). Moving one
	// entry from dim 1 to dim 2 keeps messages valid but breaks coverage.
	moved := mutate(good, setU32(msg(0)+4, 2))
	cases := []struct {
		name string
		in   []byte
		p    Params
		err  error
	}{
		{"empty", nil, p, ErrTruncated},
		{"header", good[:37], p, ErrTruncated},
		{"short", good[:len(good)-1], p, ErrTruncated},
		{"one message short", good[:msg(11)], p, ErrTruncated},
		{"trailing", append(bytes.Clone(good), 0), p, ErrTrailing},
		{"version", mutate(good, func(c []byte) []byte { c[0] = 9; return c }), p, ErrVersion},
		{"type", mutate(good, func(c []byte) []byte { c[1] = byte(TypeReport); return c }), p, ErrType},
		{"round 0", mutate(good, func(c []byte) []byte { clear(c[2:10]); return c }), p, ErrValue},
		{"d", mutate(good, setU32(batD, 7)), p, ErrValue},
		{"width", mutate(good, setU32(batWidth, 1)), p, ErrValue},
		{"np below announced", mutate(mutate(good, setU32(batNP, 3)), setU32(batMessages, 9)), p, ErrValue},
		{"np disagrees with messages", mutate(good, setU32(batNP, 5)), p, ErrValue},
		{"messages", mutate(good, setU32(batMessages, 11)), p, ErrValue},
		{"messages huge", mutate(good, setU32(batMessages, math.MaxUint32)), p, ErrValue},
		{"np huge", mutate(mutate(good, setU32(batNP, 1<<31)), setU32(batMessages, 3<<30)), p, ErrValue},
		{"reports below minBatch", mutate(good, setU32(batReports, 0)), p, ErrValue},
		{"reports above checkedIn", mutate(good, setU32(batCheckedIn, 2)), p, ErrValue},
		{"reports exceed messages", mutate(mutate(good, setU32(batReports, 7)), setU32(batCheckedIn, 7)), p, ErrValue},
		{"index = d", mutate(good, setU32(msg(5), 6)), p, ErrIndex},
		{"duplicate in message", mutate(good, setU32(msg(0)+4, 0)), p, ErrIndex},
		{"coverage", moved, p, ErrIndex},
		{"invalid params", good, Params{}, ErrParams},
	}
	for _, c := range cases {
		_, err := ParseBatch(c.in, c.p)
		if !errors.Is(err, c.err) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
	// A batch whose np the relay raised decodes; the batch's own np counts.
	raised := testBatch(p, p.NP+3, 3)
	if _, err := ParseBatch(mustMarshal(t, raised), p); err != nil {
		t.Fatalf("raised np: %v", err)
	}
}

func TestBatchMarshalRejects(t *testing.T) {
	p := testParams(ProtocolSSDouble)
	for name, f := range map[string]func(b *Batch){
		"round 0":        func(b *Batch) { b.Round = 0 },
		"d 0":            func(b *Batch) { b.D = 0 },
		"width > d":      func(b *Batch) { b.Width = 7 },
		"np 0":           func(b *Batch) { b.NP = 0 },
		"message count":  func(b *Batch) { b.Messages = b.Messages[1:] },
		"reports":        func(b *Batch) { b.CheckedIn = b.Reports - 1 },
		"message width":  func(b *Batch) { b.Messages[3].Indices = b.Messages[3].Indices[:1] },
		"sealed":         func(b *Batch) { b.Messages[3].Sealed = b.Messages[3].Sealed[:10] },
		"index range":    func(b *Batch) { b.Messages[3].Indices[0] = 6 },
		"coverage":       func(b *Batch) { b.Messages[0].Indices[1] = 2 },
		"duplicate":      func(b *Batch) { b.Messages[0].Indices[1] = 0 },
		"np wrong for n": func(b *Batch) { b.NP = 5 },
	} {
		b := testBatch(p, p.NP, 3)
		f(b)
		if _, err := b.MarshalBinary(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// ---- small frames ----

func TestSmallFramesRoundTrip(t *testing.T) {
	ci := &CheckIn{Round: 1 << 40}
	b := mustMarshal(t, ci)
	if got, err := ParseCheckIn(b); err != nil || *got != *ci || len(b) != CheckInSize {
		t.Fatalf("check-in: %+v %v", got, err)
	}
	br := &BatchReply{Round: 5, Accepted: 1, RejectedOpen: 2, RejectedValue: 3, Status: BatchStatusInvalid}
	b = mustMarshal(t, br)
	if got, err := ParseBatchReply(b); err != nil || *got != *br || len(b) != batchReplySize {
		t.Fatalf("batch reply: %+v %v", got, err)
	}
	ab := &Abort{Round: 6, Reason: AbortOverflow, Reports: 4, CheckedIn: 5, Population: 6}
	b = mustMarshal(t, ab)
	if got, err := ParseAbort(b); err != nil || *got != *ab || len(b) != abortSize {
		t.Fatalf("abort: %+v %v", got, err)
	}
	ack := &Ack{Round: 0, Status: AckTooLate, Received: 65535}
	b = mustMarshal(t, ack)
	if got, err := ParseAck(b); err != nil || *got != *ack || len(b) != ackSize {
		t.Fatalf("ack: %+v %v", got, err)
	}
	// Layout spot checks against docs/protocol.md.
	if !bytes.Equal(mustMarshal(t, &Ack{Round: 2, Status: 3, Received: 0x0102}), []byte{1, 7, 0, 0, 0, 0, 0, 0, 0, 2, 3, 1, 2}) {
		t.Fatal("ack layout")
	}
	if !bytes.Equal(mustMarshal(t, &Abort{Round: 1, Reason: 2, Reports: 3, CheckedIn: 4, Population: 5}),
		[]byte{1, 6, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5}) {
		t.Fatal("abort layout")
	}
}

func TestSmallFramesErrors(t *testing.T) {
	ci := mustMarshal(t, &CheckIn{Round: 1})
	br := mustMarshal(t, &BatchReply{Round: 1})
	ab := mustMarshal(t, &Abort{Round: 1, Reason: 1})
	ack := mustMarshal(t, &Ack{Round: 1})
	parsers := map[Type]func([]byte) error{
		TypeCheckIn:    func(b []byte) error { _, err := ParseCheckIn(b); return err },
		TypeBatchReply: func(b []byte) error { _, err := ParseBatchReply(b); return err },
		TypeAbort:      func(b []byte) error { _, err := ParseAbort(b); return err },
		TypeAck:        func(b []byte) error { _, err := ParseAck(b); return err },
	}
	frames := map[Type][]byte{TypeCheckIn: ci, TypeBatchReply: br, TypeAbort: ab, TypeAck: ack}
	for typ, good := range frames {
		parse := parsers[typ]
		if err := parse(good); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		for name, c := range map[string]struct {
			in  []byte
			err error
		}{
			"empty":    {nil, ErrTruncated},
			"short":    {good[:len(good)-1], ErrTruncated},
			"trailing": {append(bytes.Clone(good), 0), ErrTrailing},
			"version":  {mutate(good, func(c []byte) []byte { c[0] = 2; return c }), ErrVersion},
			"type":     {mutate(good, func(c []byte) []byte { c[1] = byte(TypeAnnouncement); return c }), ErrType},
		} {
			if err := parse(c.in); !errors.Is(err, c.err) || !errors.Is(err, ErrMalformed) {
				t.Errorf("%v %s: err = %v, want %v", typ, name, err, c.err)
			}
		}
	}
	for name, c := range map[string]struct {
		typ Type
		in  []byte
	}{
		"check-in round 0":  {TypeCheckIn, mutate(ci, func(c []byte) []byte { c[9] = 0; return c })},
		"reply round 0":     {TypeBatchReply, mutate(br, func(c []byte) []byte { c[9] = 0; return c })},
		"reply status 4":    {TypeBatchReply, mutate(br, func(c []byte) []byte { c[22] = 4; return c })},
		"abort round 0":     {TypeAbort, mutate(ab, func(c []byte) []byte { c[9] = 0; return c })},
		"abort reason 0":    {TypeAbort, mutate(ab, func(c []byte) []byte { c[10] = 0; return c })},
		"abort reason 8":    {TypeAbort, mutate(ab, func(c []byte) []byte { c[10] = 8; return c })},
		"ack status 6":      {TypeAck, mutate(ack, func(c []byte) []byte { c[10] = 6; return c })},
		"ack status 0xff":   {TypeAck, mutate(ack, func(c []byte) []byte { c[10] = 0xff; return c })},
		"check-in as abort": {TypeAbort, ci},
	} {
		if err := parsers[c.typ](c.in); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for name, m := range map[string]interface{ MarshalBinary() ([]byte, error) }{
		"check-in round 0": &CheckIn{},
		"reply round 0":    &BatchReply{},
		"reply status":     &BatchReply{Round: 1, Status: 4},
		"abort reason":     &Abort{Round: 1},
		"abort round":      &Abort{Reason: 1},
		"ack status":       &Ack{Status: 6},
	} {
		if _, err := m.MarshalBinary(); err == nil {
			t.Errorf("%s: marshaled", name)
		}
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
