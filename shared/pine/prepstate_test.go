package pine

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// prepOne runs PrepInit of both aggregators on one honest report of p
// (gradient and randomness from seed) and returns their states and the
// prep message.
func prepOne(t *testing.T, p *Pine, seed uint64) (s0, s1 *PrepState, msg []byte) {
	t.Helper()
	src := noise.NewSeeded(seed)
	x := make([]float64, p.cfg.Dimension)
	for i := range x {
		x[i] = (2*noise.Uniform(src) - 1) / float64(2*len(x))
	}
	var n [16]byte
	binary.BigEndian.PutUint64(n[8:], seed)
	pub, l, h, err := p.Shard(x, n, src)
	if err != nil {
		t.Fatal(err)
	}
	s0, p0, err := p.NewVerifier().PrepInit(testVK, 0, n[:], pub, l)
	if err != nil {
		t.Fatal(err)
	}
	s1, p1, err := p.NewVerifier().PrepInit(testVK, 1, n[:], pub, h)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err = p.PrepSharesToPrep(p0, p1); err != nil {
		t.Fatal(err)
	}
	return s0, s1, msg
}

// aggOf folds the output share of st (PrepNext with msg) into an empty
// aggregate share and encodes it.
func aggOf(t *testing.T, p *Pine, st *PrepState, msg []byte) []byte {
	t.Helper()
	o, err := p.PrepNext(st, msg)
	if err != nil {
		t.Fatal(err)
	}
	a := p.NewAggShare()
	if err := a.Add(o); err != nil {
		t.Fatal(err)
	}
	b, _ := a.MarshalBinary()
	return b
}

// TestPrepStateRoundTrip: the state of either aggregator, encoded and
// parsed, finishes the report into exactly the output share the original
// gives (the encoded aggregate shares are byte-identical), re-encodes to
// the same bytes, still refuses a prep message with other seeds, and an
// original already used by PrepNext no longer encodes.
func TestPrepStateRoundTrip(t *testing.T) {
	p := mustBlanket(t, 6)
	for agg := range 2 {
		s0, s1, msg := prepOne(t, p, 7)
		st := [2]*PrepState{s0, s1}[agg]
		enc, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != p.PrepStateSize() {
			t.Fatalf("aggregator %d: %d bytes, PrepStateSize %d", agg, len(enc), p.PrepStateSize())
		}
		parsed, err := p.ParsePrepState(enc)
		if err != nil {
			t.Fatalf("aggregator %d: %v", agg, err)
		}
		again, err := parsed.MarshalBinary()
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("aggregator %d: re-encoding differs (%v)", agg, err)
		}
		// Seeds restored: a prep message with one flipped bit is refused.
		bad := bytes.Clone(msg)
		bad[len(bad)-1] ^= 1
		other, err := p.ParsePrepState(enc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PrepNext(other, bad); ReasonOf(err) != RejectJointRand {
			t.Fatalf("aggregator %d: altered prep message on a parsed state: %v", agg, err)
		}
		want := aggOf(t, p, st, msg)
		if got := aggOf(t, p, parsed, msg); !bytes.Equal(got, want) {
			t.Fatalf("aggregator %d: output share of the parsed state differs", agg)
		}
		if _, err := st.MarshalBinary(); err == nil {
			t.Fatalf("aggregator %d: a used state encoded", agg)
		}
	}
	var nilState *PrepState
	if _, err := nilState.MarshalBinary(); err == nil {
		t.Fatal("a nil state encoded")
	}
}

// TestParsePrepStateStrict: every truncation, a trailing byte, a field
// element equal to the modulus (non-canonical) and a state of another
// dimension are refused.
func TestParsePrepStateStrict(t *testing.T) {
	p := mustBlanket(t, 6)
	_, s1, _ := prepOne(t, p, 8)
	enc, err := s1.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(enc) {
		if _, err := p.ParsePrepState(enc[:n]); err == nil {
			t.Fatalf("truncation to %d of %d bytes parsed", n, len(enc))
		}
	}
	if _, err := p.ParsePrepState(append(bytes.Clone(enc), 0)); err == nil {
		t.Fatal("trailing byte parsed")
	}
	for _, i := range []int{0, p.cfg.Dimension - 1} {
		b := bytes.Clone(enc)
		binary.LittleEndian.PutUint64(b[elemSize*i:], modulus)
		if _, err := p.ParsePrepState(b); err == nil {
			t.Fatalf("element %d = modulus parsed", i)
		}
		binary.LittleEndian.PutUint64(b[elemSize*i:], modulus-1)
		if _, err := p.ParsePrepState(b); err != nil {
			t.Fatalf("element %d = modulus-1 refused: %v", i, err)
		}
	}
	q := mustBlanket(t, 7)
	if _, err := q.ParsePrepState(enc); err == nil {
		t.Fatal("a state of dimension 6 parsed for dimension 7")
	}
	_, s7, _ := prepOne(t, q, 9)
	enc7, err := s7.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ParsePrepState(enc7); err == nil {
		t.Fatal("a state of dimension 7 parsed for dimension 6")
	}
}
