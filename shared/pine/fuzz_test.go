package pine

import (
	"encoding/binary"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Decoders under fuzzing: every message an aggregator parses (public
// share, leader and helper input shares, prep shares, prep message,
// aggregate shares). None may panic; an altered valid message must be
// rejected (or, for bytes PINE does not authenticate, give a well-formed
// result).

func fuzzPine(f *testing.F) (*Pine, []byte, []byte, []byte, []byte) {
	p, err := New(Config{
		Dimension: 8, NumFracBits: 4, L2NormBound: 32, ChunkLength: 5, ChunkLengthNormEquality: 3,
		Proofs: 2, ProofsNormEquality: 1, NumWrChecks: 8, NumWrSuccesses: 8, Alpha: 8.7,
		ID: Pine64HmacSha256Aes128ID,
	})
	if err != nil {
		f.Fatal(err)
	}
	nonce := make([]byte, nonceSize)
	var n [16]byte
	pub, l, h, err := p.Shard([]float64{1, -0.5, 0, 0.25, 0, 0, 0, 1}, n, noise.NewSeeded(1))
	if err != nil {
		f.Fatal(err)
	}
	return p, nonce, pub, l, h
}

func FuzzPrepInit(f *testing.F) {
	p, nonce, pub, l, h := fuzzPine(f)
	f.Add(pub, l, uint8(0))
	f.Add(pub, h, uint8(1))
	f.Add(pub[:5], l[:9], uint8(0))
	f.Fuzz(func(t *testing.T, pubIn, share []byte, agg uint8) {
		a := int(agg % 2)
		st, ps, err := p.NewVerifier().PrepInit(testVK, a, nonce, pubIn, share)
		if err != nil {
			if st != nil || ps != nil {
				t.Fatal("state or prep share returned with an error")
			}
			return
		}
		if len(ps) != p.PrepShareSize() {
			t.Fatalf("prep share of %d bytes", len(ps))
		}
	})
}

func FuzzPrepSharesToPrep(f *testing.F) {
	p, nonce, pub, l, h := fuzzPine(f)
	s0, p0, err := p.NewVerifier().PrepInit(testVK, 0, nonce, pub, l)
	if err != nil {
		f.Fatal(err)
	}
	_, p1, err := p.NewVerifier().PrepInit(testVK, 1, nonce, pub, h)
	if err != nil {
		f.Fatal(err)
	}
	msg, err := p.PrepSharesToPrep(p0, p1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p0, p1, msg)
	f.Add(p0[:3], p1, msg[:7])
	f.Fuzz(func(t *testing.T, a, b, m []byte) {
		if out, err := p.PrepSharesToPrep(a, b); err == nil && len(out) != prepMsgSize {
			t.Fatalf("prep message of %d bytes", len(out))
		}
		st := *s0
		o, err := p.PrepNext(&st, m)
		if err == nil {
			if string(m) != string(msg) || len(o.v) != p.cfg.Dimension {
				t.Fatal("PrepNext accepted a prep message other than the right one")
			}
		}
	})
}

func FuzzUnshard(f *testing.F) {
	p, _, _, _, _ := fuzzPine(f)
	z := make([]byte, 8*p.cfg.Dimension)
	f.Add(z, z)
	m := append([]byte(nil), z...)
	binary.LittleEndian.PutUint64(m, modulus-1)
	f.Add(m, z)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		out, err := p.Unshard(a, b)
		if err == nil && len(out) != p.cfg.Dimension {
			t.Fatalf("%d entries", len(out))
		}
	})
}

func FuzzDecodeVec(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(1))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		v := make([]fp, int(n%16))
		if err := decodeVec(v, b); err != nil {
			return
		}
		if got := appendVec(nil, v); string(got) != string(b) {
			t.Fatal("decode/encode round trip differs")
		}
	})
}

func FuzzEncode(f *testing.F) {
	p, _, _, _, _ := fuzzPine(f)
	f.Add(1.0, -0.5, 0.25)
	f.Add(1e300, 0.0, -1e-310)
	f.Fuzz(func(t *testing.T, a, b, c float64) {
		x := []float64{a, b, c, 0, 0, 0, 0, 0}
		e, err := p.Encode(x)
		if err != nil {
			return
		}
		var sq uint64
		for _, v := range e {
			sq += uint64(v * v)
		}
		if sq > p.sqNormBound {
			t.Fatalf("encoded squared norm %d above the bound", sq)
		}
	})
}

// FuzzNew: any configuration is either refused or gives an instance that
// shards and prepares a zero gradient without panicking.
func FuzzNew(f *testing.F) {
	f.Add(uint8(8), uint8(4), uint64(32), uint16(5), uint16(3), uint8(2), uint8(1), uint16(8), uint16(8), 8.7)
	f.Add(uint8(1), uint8(0), uint64(1), uint16(1), uint16(1), uint8(1), uint8(1), uint16(1), uint16(1), 0.5)
	f.Fuzz(func(t *testing.T, d, fb uint8, b uint64, ch, chne uint16, pr, prne uint8, wr, ws uint16, alpha float64) {
		cfg := Config{
			Dimension: int(d % 65), NumFracBits: int(fb), L2NormBound: b,
			ChunkLength: int(ch % 1000), ChunkLengthNormEquality: int(chne % 1000),
			Proofs: int(pr % 8), ProofsNormEquality: int(prne % 8),
			NumWrChecks: int(wr % 300), NumWrSuccesses: int(ws % 300), Alpha: alpha,
			ID: Pine64HmacSha256Aes128ID,
		}
		p, err := New(cfg)
		if err != nil {
			return
		}
		var n [16]byte
		pub, l, h, err := p.Shard(make([]float64, cfg.Dimension), n, noise.NewSeeded(1))
		if err != nil {
			return // e.g. alpha too small for the zero vector's checks: never, but allowed
		}
		if _, err := prepBoth(p, n[:], pub, l, h); err != nil {
			t.Fatalf("zero gradient rejected: %v", err)
		}
	})
}
