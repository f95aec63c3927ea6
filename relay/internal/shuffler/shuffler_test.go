package shuffler

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

func params() wire.Params {
	return wire.Params{
		Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: 8, K: 4, L: 1, Width: 1, NP: 6, MinBatch: 1, EpsL: 2, Clip: 1, CheckInP: 1,
	}
}

func realMessages(t testing.TB, pub [32]byte, round uint64, idx [][]uint32, mark float64) []wire.BatchMessage {
	t.Helper()
	out := make([]wire.BatchMessage, len(idx))
	for i, ix := range idx {
		vals := make([]float64, len(ix))
		for j := range vals {
			vals[j] = mark
		}
		s, err := envelope.SealValues(pub, round, vals)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = wire.BatchMessage{Indices: ix, Sealed: s}
	}
	return out
}

// TestBuildPadsExactly: every dimension appears exactly n_p times (checked
// by wire.ParseBatch after a round trip), dummies are sealed to the key,
// have the size of real messages and carry blanket samples.
func TestBuildPadsExactly(t *testing.T) {
	key, err := envelopetest.DeriveKey([32]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().HPKE
	p := params()
	real := realMessages(t, pub, 3, [][]uint32{{0}, {1}, {2}, {3}, {0}, {7}, {5}, {6}}, 0.125)
	b, st, err := Build(Round{Round: 3, Params: p, HPKEPub: pub, Reports: 2, CheckedIn: 3, Population: 5}, real, noise.NewSeeded(1), 2)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := wire.ParseBatch(enc, p)
	if err != nil {
		t.Fatalf("ParseBatch: %v", err)
	}
	if pb.NP != 6 || st.Raised || st.RealMessages != 8 || st.DummyMessages != 8*6-8 || pb.Reports != 2 || pb.CheckedIn != 3 || pb.Population != 5 {
		t.Fatalf("batch %+v stats %+v", pb, st)
	}
	nreal, sum := 0, 0.0
	for _, m := range pb.Messages {
		if len(m.Sealed) != envelope.SealedLen(1) {
			t.Fatalf("sealed size %d", len(m.Sealed))
		}
		v, err := key.OpenValues(3, m.Sealed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] == 0.125 {
			nreal++
			continue
		}
		sum += v[0]
	}
	if nreal != 8 {
		t.Fatalf("%d real messages after shuffle", nreal)
	}
	// Blanket of Laplace at eps = 2/4 is Lap(1/2, 2): the mean of 40
	// samples has sd 2*sqrt(2)/sqrt(40) = 0.45; |mean - 0.5| < 2.5 fails
	// with probability < 1e-7.
	if mean := sum / 40; math.Abs(mean-0.5) > 2.5 {
		t.Fatalf("dummy mean %v", mean)
	}
}

// TestNPRaise: SS-Double's index lists are data-independent, so an
// overflowing dimension raises n_p to its count, recorded in the stats and
// the batch, and nothing is dropped.
func TestNPRaise(t *testing.T) {
	p := params()
	p.NP = 2
	fake := func(_ [32]byte, _ uint64, v []float64) ([]byte, error) {
		return make([]byte, envelope.SealedLen(len(v))), nil
	}
	idx := []uint32{0, 1, 0, 2, 0, 3, 0, 4} // dimension 0 has 4 > 2 entries
	real := make([]wire.BatchMessage, len(idx))
	for i, j := range idx {
		real[i] = wire.BatchMessage{Indices: []uint32{j}, Sealed: make([]byte, envelope.SealedLen(1))}
	}
	b, st, err := build(Round{Round: 1, Params: p, Reports: 2, CheckedIn: 2, Population: 2}, real, noise.NewSeeded(2), 1, fake, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Raised || st.RealizedNP != 4 || st.Overflowed != 1 || b.NP != 4 || st.Truncated != 0 || st.RealMessages != 8 {
		t.Fatalf("stats %+v np %d", st, b.NP)
	}
	enc, _ := b.MarshalBinary()
	if _, err := wire.ParseBatch(enc, p); err != nil {
		t.Fatalf("ParseBatch: %v", err)
	}
}

// TestTopkTruncates: SS-Topk's index lists depend on the data, so n_p never
// moves: an overflowing dimension keeps exactly n_p of its real messages,
// chosen uniformly (every one of the 5 entries of dimension 0 is kept in
// 3/5 of 20,000 seeded rounds, within 5 standard errors: a correct choice
// fails with probability below 1e-5).
func TestTopkTruncates(t *testing.T) {
	p := wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace,
		D: 6, K: 1, L: 2, Width: 1, NP: 3, MinBatch: 1, EpsL: 1, Clip: 1, CheckInP: 1}
	fake := func(_ [32]byte, _ uint64, v []float64) ([]byte, error) {
		return make([]byte, envelope.SealedLen(len(v))), nil
	}
	src := noise.NewSeeded(7)
	const rounds = 20000
	var kept [5]float64
	for range rounds {
		var real []wire.BatchMessage
		for i := range 5 { // five messages in dimension 0, marked 1..5
			s := make([]byte, envelope.SealedLen(1))
			s[0] = byte(i + 1)
			real = append(real, wire.BatchMessage{Indices: []uint32{0}, Sealed: s})
		}
		real = append(real, wire.BatchMessage{Indices: []uint32{4}, Sealed: make([]byte, envelope.SealedLen(1))})
		b, st, err := build(Round{Round: 1, Params: p, Reports: 3}, real, src, 1, fake, nil)
		if err != nil {
			t.Fatal(err)
		}
		if b.NP != 3 || st.Raised || st.Truncated != 2 || st.Overflowed != 1 || len(b.Messages) != 6*3 {
			t.Fatalf("np %d stats %+v, %d messages", b.NP, st, len(b.Messages))
		}
		per := make([]int, 6)
		for _, m := range b.Messages {
			per[m.Indices[0]]++
			if m.Indices[0] == 0 && m.Sealed[0] > 0 {
				kept[m.Sealed[0]-1]++
			}
		}
		for j, c := range per {
			if c != 3 {
				t.Fatalf("dimension %d has %d messages", j, c)
			}
		}
	}
	se := math.Sqrt(0.6 * 0.4 / rounds)
	for i, c := range kept {
		if f := c / rounds; math.Abs(f-0.6) > 5*se {
			t.Errorf("entry %d kept in %.4f of rounds, want 0.6", i+1, f)
		}
	}
}

// TestShuffleUniform: the output position of a marked real message over
// many rounds is uniform. 16 messages (3 real + 13 dummies), N = 32000
// rounds, chi-square with 15 degrees of freedom against the 1 - 1e-6
// quantile: a correct shuffle fails with probability 1e-6 (fixed seed, so
// the outcome is deterministic anyway). Sealing is replaced by a cheap
// function: only the permutation is under test.
func TestShuffleUniform(t *testing.T) {
	p := wire.Params{Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: 4, K: 1, L: 1, Width: 1, NP: 4, MinBatch: 1, EpsL: 1, Clip: 1, CheckInP: 1}
	fake := func(_ [32]byte, _ uint64, v []float64) ([]byte, error) {
		return make([]byte, envelope.SealedLen(len(v))), nil
	}
	src := noise.NewSeeded(42)
	const n, bins = 32000, 16
	var counts [bins]float64
	for range n {
		real := make([]wire.BatchMessage, 3)
		for i := range real {
			s := make([]byte, envelope.SealedLen(1))
			binary.BigEndian.PutUint32(s, uint32(i+1))
			real[i] = wire.BatchMessage{Indices: []uint32{uint32(i)}, Sealed: s}
		}
		b, _, err := build(Round{Round: 1, Params: p}, real, src, 1, fake, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) != bins {
			t.Fatalf("%d messages", len(b.Messages))
		}
		for pos, m := range b.Messages {
			if bytes.Equal(m.Sealed[:4], []byte{0, 0, 0, 1}) {
				counts[pos]++
			}
		}
	}
	chi := 0.0
	for _, c := range counts {
		e := float64(n) / bins
		chi += (c - e) * (c - e) / e
	}
	crit := distuv.ChiSquared{K: bins - 1}.Quantile(1 - 1e-6)
	if chi > crit {
		t.Fatalf("chi-square %.1f > %.1f: positions %v", chi, crit, counts)
	}
}

func TestBlanketParams(t *testing.T) {
	p := params()
	for _, tc := range []struct {
		r       wire.Randomizer
		b       uint32
		delta   float64
		name    string
		wantErr bool
	}{{wire.RandomizerLaplace, 0, 0, "laplace", false}, {wire.RandomizerRGB, 4, 0, "rgb", false},
		{wire.RandomizerGaussian, 0, 1e-5, "gaussian", false}, {9, 0, 0, "", true}} {
		p.Randomizer, p.Buckets, p.DeltaL = tc.r, tc.b, tc.delta
		r, err := Blanket(p)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%v: %v", tc.r, err)
		}
		if err == nil && (r.Name() != tc.name || r.Epsilon() != p.PerCoordinateEpsilon()) {
			t.Fatalf("%v: %s eps %v", tc.r, r.Name(), r.Epsilon())
		}
		if tc.r == wire.RandomizerGaussian && r.Delta() != tc.delta/float64(p.K) {
			t.Fatalf("gaussian delta %v", r.Delta())
		}
	}
}
