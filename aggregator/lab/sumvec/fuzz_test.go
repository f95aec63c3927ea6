package sumvec

import (
	"bytes"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// The fuzz targets check that no input panics and that every accepted
// byte string is canonical: re-encoding the decoded value gives back
// exactly the input (one encoding per message). They run on a small
// round (d = 4, 3 bits, at most 4 reports); the seeds are real messages
// of a round with an accepted and a rejected report.

type fuzzSeeds struct {
	r, r0                   *Round // sigma 2 and sigma 0
	leader, helper          []byte
	prepShares, prepMsgs    []byte
	aggShare, noisyAggShare []byte
}

func newFuzzSeeds(t testing.TB) fuzzSeeds {
	r := testRound(t, 4, 3, 2, 4, 1)
	reps := honestReports(t, r, 2, 3)
	bad := bytes.Clone(reps[1].helper)
	bad[len(bad)-1] ^= 1 // joint randomness mismatch: rejected entry
	helper, _ := NewHelper(r, testVK)
	leader, _ := NewLeader(r, testVK)
	pmsg, _, err := helper.Prepare([][]byte{reps[0].helper, bad})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Prepare([][]byte{reps[0].leader, reps[1].leader}); err != nil {
		t.Fatal(err)
	}
	mmsg, _, err := leader.Combine(pmsg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := helper.Finish(mmsg); err != nil {
		t.Fatal(err)
	}
	agg, err := helper.AggregateShare()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agg.MarshalBinary(); err == nil {
		t.Fatal("aggregate share without noise encoded in a round with sigma > 0")
	}
	if err := agg.AddNoise(noise.NewSeeded(9)); err != nil {
		t.Fatal(err)
	}
	nb, err := agg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The same aggregate without noise, as a noise-free round encodes it.
	r0 := testRound(t, 4, 3, 0, 4, 1)
	ab := bytes.Clone(nb)
	ab[headerLen+4] = 0
	if _, err := r0.ParseAggregateShare(ab); err != nil {
		t.Fatal(err)
	}
	return fuzzSeeds{r: r, r0: r0, leader: reps[0].leader, helper: reps[0].helper, prepShares: pmsg, prepMsgs: mmsg, aggShare: ab, noisyAggShare: nb}
}

func addVariants(f *testing.F, bs ...[]byte) {
	for _, b := range bs {
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(bytes.Clone(b), 0))
		c := bytes.Clone(b)
		c[len(c)-1] ^= 0x80
		f.Add(c)
	}
	f.Add([]byte{version})
}

func FuzzParseReportShare(f *testing.F) {
	s := newFuzzSeeds(f)
	addVariants(f, s.leader, s.helper)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, leader := range []bool{true, false} {
			rs, reason, err := s.r.ParseReportShare(b, leader)
			if err != nil {
				if reason == Accepted {
					t.Fatalf("error %v with reason accepted", err)
				}
				continue
			}
			out, err := s.r.MarshalReportShare(rs)
			if err != nil {
				t.Fatalf("accepted share does not re-encode: %v", err)
			}
			if !bytes.Equal(out, b) {
				t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
			}
		}
	})
}

func FuzzParsePrepShares(f *testing.F) {
	s := newFuzzSeeds(f)
	addVariants(f, s.prepShares)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := s.r.ParsePrepShares(b)
		if err != nil {
			return
		}
		out, err := s.r.MarshalPrepShares(m)
		if err != nil {
			t.Fatalf("accepted message does not re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
		}
	})
}

func FuzzParsePrepMessages(f *testing.F) {
	s := newFuzzSeeds(f)
	addVariants(f, s.prepMsgs)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := s.r.ParsePrepMessages(b)
		if err != nil {
			return
		}
		out, err := s.r.MarshalPrepMessages(m)
		if err != nil {
			t.Fatalf("accepted message does not re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
		}
	})
}

func FuzzParseAggregateShare(f *testing.F) {
	s := newFuzzSeeds(f)
	addVariants(f, s.aggShare, s.noisyAggShare)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range []*Round{s.r, s.r0} {
			a, err := r.ParseAggregateShare(b)
			if err != nil {
				continue
			}
			out, err := a.MarshalBinary()
			if err != nil {
				t.Fatalf("accepted share does not re-encode: %v", err)
			}
			if !bytes.Equal(out, b) {
				t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
			}
		}
	})
}

// TestDecodersRefuse pins a few refusals the fuzz seeds rely on.
func TestDecodersRefuse(t *testing.T) {
	s := newFuzzSeeds(t)
	if _, err := s.r.ParsePrepShares(s.prepMsgs); err == nil {
		t.Error("'M' message parsed as 'P'")
	}
	if _, err := s.r.ParsePrepMessages(s.prepShares); err == nil {
		t.Error("'P' message parsed as 'M'")
	}
	for _, b := range [][]byte{s.prepShares, s.prepMsgs} {
		c := bytes.Clone(b)
		c[headerLen+4+nonceSize] = byte(numReasons) // first entry's reason
		if _, err := s.r.ParsePrepShares(c); err == nil {
			t.Error("unknown reason accepted")
		}
		if _, err := s.r.ParsePrepMessages(c); err == nil {
			t.Error("unknown reason accepted")
		}
	}
	huge := bytes.Clone(s.prepShares)
	huge[headerLen] = 0xff // count 2^24 * 255 + ...
	if _, err := s.r.ParsePrepShares(huge); err == nil {
		t.Error("count above MaxReports accepted")
	}
	a := bytes.Clone(s.noisyAggShare)
	a[headerLen+4] = 2
	if _, err := s.r.ParseAggregateShare(a); err == nil {
		t.Error("noised flag 2 accepted")
	}
	if _, err := s.r.ParseAggregateShare(s.aggShare); err == nil {
		t.Error("share without noise accepted in a round with sigma > 0")
	}
	if _, err := s.r.ParseAggregateShare(s.noisyAggShare); err != nil {
		t.Errorf("noisy aggregate share refused: %v", err)
	}
}
