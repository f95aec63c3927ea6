package counts

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// prepBoth runs both servers' PrepInit on one honest report of s and
// returns their Preps and the leader's prep messages.
func prepBoth(t *testing.T, s *Spec, seed uint64) (lp, hp Prep, msgs [][]byte) {
	t.Helper()
	src := noise.NewSeeded(seed)
	var vals []Value
	for _, b := range s.Blocks() {
		if b.Kind() == KindEval {
			e := int(src.Uint64() % uint64(b.Rows()+1))
			vals = append(vals, Value{Correct: e / 2, Evaluated: e})
		} else {
			vals = append(vals, Value{Answer: int(src.Uint64() % uint64(b.Options()))})
		}
	}
	nonce := nonceOf(int(seed))
	rep, err := s.Shard(vals, nonce, src)
	if err != nil {
		t.Fatal(err)
	}
	var pubs, lin, hin [][]byte
	for _, b := range rep.Blocks {
		pubs, lin, hin = append(pubs, b.Public), append(lin, b.Leader), append(hin, b.Helper)
	}
	ls, err := s.NewServer(true, testVK)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := s.NewServer(false, testVK)
	if err != nil {
		t.Fatal(err)
	}
	if lp, err = ls.PrepInit(nonce, pubs, lin); err != nil {
		t.Fatal(err)
	}
	if hp, err = hs.PrepInit(nonce, pubs, hin); err != nil {
		t.Fatal(err)
	}
	if msgs, err = s.PrepSharesToPrep(lp.Share, hp.Share); err != nil {
		t.Fatal(err)
	}
	return lp, hp, msgs
}

// aggOf finishes p with msgs, folds it into an empty aggregate and
// encodes it.
func aggOf(t *testing.T, s *Spec, p Prep, msgs [][]byte) []byte {
	t.Helper()
	o, err := s.PrepNext(p, msgs)
	if err != nil {
		t.Fatal(err)
	}
	a := s.NewAggregate()
	if err := a.Add(o); err != nil {
		t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPrepRoundTrip: either server's Prep, encoded and parsed, keeps its
// prep shares and finishes into exactly the output share of the original
// (byte-identical aggregates); it re-encodes to the same bytes; a used
// Prep and the zero Prep do not encode.
func TestPrepRoundTrip(t *testing.T) {
	s := testSpec(t)
	for server := range 2 {
		lp, hp, msgs := prepBoth(t, s, 3)
		p := [2]Prep{lp, hp}[server]
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != s.PrepSize() {
			t.Fatalf("server %d: %d bytes, PrepSize %d", server, len(enc), s.PrepSize())
		}
		q, err := s.ParsePrep(enc)
		if err != nil {
			t.Fatalf("server %d: %v", server, err)
		}
		for i := range p.Share {
			if !bytes.Equal(q.Share[i], p.Share[i]) {
				t.Fatalf("server %d: block %d prep share differs", server, i)
			}
		}
		again, err := q.MarshalBinary()
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("server %d: re-encoding differs (%v)", server, err)
		}
		want := aggOf(t, s, p, msgs)
		if got := aggOf(t, s, q, msgs); !bytes.Equal(got, want) {
			t.Fatalf("server %d: output share of the parsed prep differs", server)
		}
		if _, err := p.MarshalBinary(); err == nil {
			t.Fatalf("server %d: a used prep encoded", server)
		}
	}
	if _, err := (Prep{}).MarshalBinary(); err == nil {
		t.Fatal("the zero prep encoded")
	}
}

// TestParsePrepStrict: every truncation, a trailing byte, a field element
// equal to the modulus in the first and the last block's state, and a
// Prep of another spec (another block count; same count, other blocks)
// are refused.
func TestParsePrepStrict(t *testing.T) {
	s := testSpec(t)
	_, hp, _ := prepBoth(t, s, 4)
	enc, err := hp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(enc) {
		if _, err := s.ParsePrep(enc[:n]); err == nil {
			t.Fatalf("truncation to %d of %d bytes parsed", n, len(enc))
		}
	}
	if _, err := s.ParsePrep(append(bytes.Clone(enc), 0)); err == nil {
		t.Fatal("trailing byte parsed")
	}
	const q = 0xffffffff00000001
	last := s.Blocks()[len(s.Blocks())-1].Pine()
	lastOff := len(enc) - last.PrepShareSize() - last.PrepStateSize()
	for _, off := range []int{2, lastOff} {
		b := bytes.Clone(enc)
		binary.LittleEndian.PutUint64(b[off:], q)
		if _, err := s.ParsePrep(b); err == nil {
			t.Fatalf("element at %d = modulus parsed", off)
		}
		binary.LittleEndian.PutUint64(b[off:], q-1)
		if _, err := s.ParsePrep(b); err != nil {
			t.Fatalf("element at %d = modulus-1 refused: %v", off, err)
		}
	}
	// Another block count, the same bytes otherwise.
	b := bytes.Clone(enc)
	binary.BigEndian.PutUint16(b, uint16(len(s.Blocks())+1))
	if _, err := s.ParsePrep(b); err == nil {
		t.Fatal("a prep with another block count parsed")
	}
	// Specs of other blocks: one fewer, and as many of other sizes.
	fewer, err := NewSpec(s.Blocks()[:len(s.Blocks())-1]...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fewer.ParsePrep(enc); err == nil {
		t.Fatal("a prep of 5 blocks parsed by a spec of 4")
	}
	// Block 1 (a 2-option question, dimension 1) replaced by an
	// 8-option one (dimension 7).
	q8, err := NewQuestion(8)
	if err != nil {
		t.Fatal(err)
	}
	bl := append([]*Block(nil), s.Blocks()...)
	bl[1] = q8
	other, err := NewSpec(bl...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ParsePrep(enc); err == nil {
		t.Fatal("a prep parsed by a spec whose block 1 has another dimension")
	}
}
