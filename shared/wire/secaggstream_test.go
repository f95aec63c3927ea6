package wire

import (
	"bytes"
	"errors"
	"testing"
)

func testChunk() *SecAggChunk {
	return &SecAggChunk{Round: 3, Seq: 2, Leader: [][]byte{bytes.Repeat([]byte{3}, 7), bytes.Repeat([]byte{4}, 7)}, Prep: []byte("prep")}
}

// TestSecAggStreamFrames: the three streaming frames round-trip, have one
// encoding, and every field out of range or byte too many or too few is
// refused as malformed.
func TestSecAggStreamFrames(t *testing.T) {
	c := testChunk()
	b := mustMarshal(t, c)
	got, err := ParseSecAggChunk(b, 7, 10)
	if err != nil || got.Round != 3 || got.Seq != 2 || len(got.Leader) != 2 || !bytes.Equal(got.Leader[1], c.Leader[1]) || string(got.Prep) != "prep" {
		t.Fatalf("chunk: %+v %v", got, err)
	}
	if !bytes.Equal(mustMarshal(t, got), b) {
		t.Fatal("chunk re-encoding differs")
	}
	seq0 := bytes.Clone(b)
	seq0[13] = 0
	noReports := bytes.Clone(b)
	noReports[17] = 0
	for name, f := range map[string]func() error{
		"short":         func() error { _, err := ParseSecAggChunk(b[:len(b)-1], 7, 10); return err },
		"long":          func() error { _, err := ParseSecAggChunk(append(bytes.Clone(b), 0), 7, 10); return err },
		"share size":    func() error { _, err := ParseSecAggChunk(b, 8, 10); return err },
		"above maximum": func() error { _, err := ParseSecAggChunk(b, 7, 1); return err },
		"seq 0":         func() error { _, err := ParseSecAggChunk(seq0, 7, 10); return err },
		"no reports":    func() error { _, err := ParseSecAggChunk(noReports, 7, 10); return err },
		"another type": func() error {
			_, err := ParseSecAggChunk(mustMarshal(t, &SecAggAggregate{Round: 3, Share: []byte{1}}), 7, 10)
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrMalformed) {
			t.Errorf("chunk %s: %v", name, err)
		}
	}

	cl := &SecAggClose{Round: 3, Chunks: 2, Reports: 9, Accepted: 8, CheckedIn: 12, Population: 20}
	b = mustMarshal(t, cl)
	if len(b) != SecAggCloseSize {
		t.Fatalf("close of %d bytes", len(b))
	}
	if gc, err := ParseSecAggClose(b); err != nil || *gc != *cl {
		t.Fatalf("close: %+v %v", gc, err)
	}
	for name, bad := range map[string]*SecAggClose{
		"round 0":                {Chunks: 1, Reports: 1},
		"accepted > reports":     {Round: 1, Chunks: 1, Reports: 1, Accepted: 2},
		"chunks without reports": {Round: 1, Chunks: 1},
		"chunks > reports":       {Round: 1, Chunks: 3, Reports: 2},
	} {
		if _, err := bad.MarshalBinary(); !errors.Is(err, ErrMalformed) {
			t.Errorf("close %s encoded: %v", name, err)
		}
	}
	if _, err := ParseSecAggClose(append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("long close: %v", err)
	}
	bad := bytes.Clone(b)
	bad[21] = 10 // accepted 10 > reports 9
	if _, err := ParseSecAggClose(bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("close accepting more than its reports: %v", err)
	}

	ch := &SecAggCharged{Round: 3, Status: BatchStatusOK, Accepted: 8}
	b = mustMarshal(t, ch)
	if gc, err := ParseSecAggCharged(b); err != nil || *gc != *ch || len(b) != SecAggChargedSize {
		t.Fatalf("charged: %+v %v", gc, err)
	}
	if _, err := (&SecAggCharged{Round: 3, Status: BatchStatusRefused, Accepted: 1}).MarshalBinary(); err == nil {
		t.Error("a refused charge with a count encoded")
	}
	if _, err := (&SecAggCharged{Round: 3, Status: BatchStatusOK}).MarshalBinary(); err == nil {
		t.Error("an ok charge of no report encoded")
	}
	bad = bytes.Clone(b)
	bad[10] = 9
	if _, err := ParseSecAggCharged(bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown status: %v", err)
	}
	if _, err := ParseSecAggCharged(b[:14]); !errors.Is(err, ErrMalformed) {
		t.Errorf("short charged: %v", err)
	}

	rs := &SecAggResume{Round: 3, Seq: 2}
	b = mustMarshal(t, rs)
	if gr, err := ParseSecAggResume(b); err != nil || *gr != *rs || len(b) != SecAggResumeSize {
		t.Fatalf("resume: %+v %v", gr, err)
	}
	if _, r, err := PeekRound(b); err != nil || r != 3 {
		t.Fatalf("resume's round peeked as %d: %v", r, err)
	}
	for name, bad := range map[string]*SecAggResume{"round 0": {Seq: 1}, "seq 0": {Round: 1}} {
		if _, err := bad.MarshalBinary(); !errors.Is(err, ErrMalformed) {
			t.Errorf("resume %s encoded: %v", name, err)
		}
	}
	bad = bytes.Clone(b)
	bad[13] = 0 // seq 0
	if _, err := ParseSecAggResume(bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("resume of seq 0: %v", err)
	}
	if _, err := ParseSecAggResume(b[:13]); !errors.Is(err, ErrMalformed) {
		t.Errorf("short resume: %v", err)
	}
}

func FuzzParseSecAggChunk(f *testing.F) {
	b := mustMarshal(f, testChunk())
	f.Add(b)
	f.Add(b[:len(b)-1])
	f.Add(append(bytes.Clone(b), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseSecAggChunk(b, 7, 10)
		if err != nil {
			return
		}
		out, err := c.MarshalBinary()
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("accepted chunk does not re-encode to its bytes: %v", err)
		}
	})
}

func FuzzParseSecAggClose(f *testing.F) {
	f.Add(mustMarshal(f, &SecAggClose{Round: 3, Chunks: 2, Reports: 9, Accepted: 8, CheckedIn: 12, Population: 20}))
	f.Add(mustMarshal(f, &SecAggCharged{Round: 3, Status: BatchStatusOK, Accepted: 8}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := ParseSecAggClose(b); err == nil {
			out, err := c.MarshalBinary()
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("accepted close does not re-encode to its bytes: %v", err)
			}
		}
		if c, err := ParseSecAggCharged(b); err == nil {
			out, err := c.MarshalBinary()
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("accepted charged does not re-encode to its bytes: %v", err)
			}
		}
	})
}
