package counts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
)

var testVK = bytes.Repeat([]byte{7}, VerifyKeySize)

// round runs both servers on every report (nonces[i] is report i's) and
// returns each server's aggregate and the reports' verdicts (nil:
// accepted).
func round(t *testing.T, s *Spec, reports []Report, nonces [][16]byte) (lead, help *Aggregate, verdicts []error) {
	t.Helper()
	ls, err := s.NewServer(true, testVK)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := s.NewServer(false, testVK)
	if err != nil {
		t.Fatal(err)
	}
	lead, help = s.NewAggregate(), s.NewAggregate()
	for i, r := range reports {
		verdicts = append(verdicts, prepareOne(s, ls, hs, r, nonces[i], lead, help))
	}
	return lead, help, verdicts
}

func prepareOne(s *Spec, ls, hs *Server, r Report, nonce [16]byte, lead, help *Aggregate) error {
	var pubs, lin, hin [][]byte
	for _, b := range r.Blocks {
		pubs, lin, hin = append(pubs, b.Public), append(lin, b.Leader), append(hin, b.Helper)
	}
	lp, err := ls.PrepInit(nonce, pubs, lin)
	if err != nil {
		return err
	}
	hp, err := hs.PrepInit(nonce, pubs, hin)
	if err != nil {
		return err
	}
	msgs, err := s.PrepSharesToPrep(lp.Share, hp.Share)
	if err != nil {
		return err
	}
	lo, err := s.PrepNext(lp, msgs)
	if err != nil {
		return err
	}
	ho, err := s.PrepNext(hp, msgs)
	if err != nil {
		return err
	}
	if err := lead.Add(lo); err != nil {
		return err
	}
	return help.Add(ho)
}

func nonceOf(i int) [16]byte {
	var n [16]byte
	binary.LittleEndian.PutUint64(n[:], uint64(i)+1)
	return n
}

func testSpec(t *testing.T) *Spec {
	t.Helper()
	ev, err := NewEval(100)
	if err != nil {
		t.Fatal(err)
	}
	var blocks = []*Block{ev}
	for _, k := range []int{2, 3, 4, 5} {
		q, err := NewQuestion(k)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, q)
	}
	s, err := NewSpec(blocks...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHonestSumsExact: 40 honest volunteers (random counts and answers,
// the extremes included) through the real PINE path of both servers
// without noise: every report is accepted and the decoded sums are
// exactly the true totals (phantom options 0).
func TestHonestSumsExact(t *testing.T) {
	s := testSpec(t)
	src := noise.NewSeeded(1)
	var reports []Report
	var nonces [][16]byte
	want := make([][]float64, len(s.Blocks()))
	for i, b := range s.Blocks() {
		if b.Kind() == KindEval {
			want[i] = make([]float64, 2)
		} else {
			want[i] = make([]float64, b.k2)
		}
	}
	for v := range 40 {
		var vals []Value
		for i, b := range s.Blocks() {
			var x Value
			if b.Kind() == KindEval {
				x.Evaluated = int(src.Uint64() % 101)
				x.Correct = int(src.Uint64() % uint64(x.Evaluated+1))
				switch v { // the triangle's vertices
				case 0:
					x.Correct, x.Evaluated = 0, 0
				case 1:
					x.Correct, x.Evaluated = 0, 100
				case 2:
					x.Correct, x.Evaluated = 100, 100
				}
				want[i][0] += float64(x.Correct)
				want[i][1] += float64(x.Evaluated)
			} else {
				x.Answer = int(src.Uint64() % uint64(b.Options()))
				want[i][x.Answer]++
			}
			vals = append(vals, x)
		}
		r, err := s.Shard(vals, nonceOf(v), src)
		if err != nil {
			t.Fatal(err)
		}
		reports, nonces = append(reports, r), append(nonces, nonceOf(v))
	}
	lead, help, verdicts := round(t, s, reports, nonces)
	for i, err := range verdicts {
		if err != nil {
			t.Fatalf("honest report %d rejected: %v", i, err)
		}
	}
	lb, _ := lead.MarshalBinary()
	hb, _ := help.MarshalBinary()
	sums, err := s.Unshard(lb, hb, lead.Count())
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		for j := range want[i] {
			if sums.Counts[i][j] != want[i][j] {
				t.Errorf("block %d count %d: got %v, want %v", i, j, sums.Counts[i][j], want[i][j])
			}
		}
	}
}

// TestShardRefusesImpossibleValues: the honest encoder refuses what an
// honest volunteer cannot have.
func TestShardRefusesImpossibleValues(t *testing.T) {
	s := testSpec(t)
	ok := []Value{{Correct: 1, Evaluated: 2}, {Answer: 1}, {Answer: 2}, {Answer: 3}, {Answer: 4}}
	src := noise.NewSeeded(2)
	if _, err := s.Shard(ok, nonceOf(0), src); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(v []Value){
		"correct>evaluated": func(v []Value) { v[0] = Value{Correct: 3, Evaluated: 2} },
		"negative":          func(v []Value) { v[0] = Value{Correct: -1, Evaluated: 2} },
		"rows":              func(v []Value) { v[0] = Value{Correct: 1, Evaluated: 101} },
		"answer":            func(v []Value) { v[1] = Value{Answer: 2} },
		"negative answer":   func(v []Value) { v[3] = Value{Answer: -1} },
	} {
		v := append([]Value(nil), ok...)
		mod(v)
		if _, err := s.Shard(v, nonceOf(0), src); err == nil {
			t.Errorf("%s: sharded", name)
		}
	}
}

// addToLeaderMeas adds delta (fixed-point units) to entry i of a block's
// leader measurement share (the first elements of the leader share).
func addToLeaderMeas(share []byte, i int, delta int64) []byte {
	out := append([]byte(nil), share...)
	const q = uint64(0xFFFFFFFF00000001)
	x := binary.LittleEndian.Uint64(out[8*i:])
	var d uint64
	if delta >= 0 {
		d = uint64(delta) % q
	} else {
		d = q - uint64(-delta)%q
	}
	if x >= q-d { // x + d mod q without overflowing 64 bits
		x -= q - d
	} else {
		x += d
	}
	binary.LittleEndian.PutUint64(out[8*i:], x)
	return out
}

// TestAttackFakeCountRejected: a volunteer that proves honest counts and
// then changes its share of a count (the only way to send a count other
// than the one it proved) is rejected by the servers, whether the forged
// count is absurd (+10,000 correct rows), negative, or even a value an
// honest volunteer could have had (one more correct row): the proofs are
// on the shared measurement. Likewise a forged survey vote.
func TestAttackFakeCountRejected(t *testing.T) {
	s := testSpec(t)
	src := noise.NewSeeded(3)
	vals := []Value{{Correct: 10, Evaluated: 20}, {Answer: 0}, {Answer: 1}, {Answer: 2}, {Answer: 3}}
	ev := s.Blocks()[0]
	unit := int64(2 * ev.Scale()) // one count = 2 encoding units
	cases := []struct {
		name         string
		block, entry int
		delta        int64
	}{
		{"+1 correct", 0, 0, unit},
		{"+10000 correct", 0, 0, 10000 * unit},
		{"-50 evaluated", 0, 1, -50 * unit},
		{"vote x3", 3, 0, 3 * int64(s.Blocks()[3].Scale())},
		{"vote -1", 4, 2, -2 * int64(s.Blocks()[4].Scale())},
	}
	for k, c := range cases {
		r, err := s.Shard(vals, nonceOf(k), src)
		if err != nil {
			t.Fatal(err)
		}
		r.Blocks[c.block].Leader = addToLeaderMeas(r.Blocks[c.block].Leader, c.entry, c.delta)
		_, _, verdicts := round(t, s, []Report{r}, [][16]byte{nonceOf(k)})
		var rej *pine.RejectError
		if !errors.As(verdicts[0], &rej) {
			t.Errorf("%s: verdict %v, want a PINE rejection", c.name, verdicts[0])
		} else {
			t.Logf("%s: rejected (%v)", c.name, rej.Reason)
		}
	}
	// A block moved to another report (or position) is rejected: its
	// nonce is bound (BlockNonce).
	r, err := s.Shard(vals, nonceOf(100), src)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, v := round(t, s, []Report{r}, [][16]byte{nonceOf(101)}); v[0] == nil {
		t.Error("a report under another nonce was accepted")
	}
	r.Blocks[1], r.Blocks[2] = r.Blocks[2], r.Blocks[1]
	if _, _, v := round(t, s, []Report{r}, [][16]byte{nonceOf(100)}); v[0] == nil {
		t.Error("swapped blocks were accepted")
	}
}

// shardRaw shards a block's raw encoding x (encoding units, bypassing the
// honest encoder), as a cheating client can.
func shardRaw(b *Block, x []float64, nonce [16]byte, i int, src noise.Source) (BlockShare, error) {
	pub, l, h, err := b.p.Shard(x, BlockNonce(nonce, i), src)
	return BlockShare{Public: pub, Leader: l, Helper: h}, err
}

// TestAttackInfluenceBounded: a cheater who shards any vector inside the
// PINE ball (the strongest accepted cheat) is accepted, and its
// contribution to every decoded count stays within Block.Influence:
// for the evaluation block ≈ [−0.207R, 1.207R] per count (the extremes
// reached), for a question every option within [2/K − 1, 1] and one vote
// in total. One grid unit beyond the ball, the client cannot shard (and
// a forged share is rejected: TestAttackFakeCountRejected). 40 random
// directions per block plus the extreme points.
func TestAttackInfluenceBounded(t *testing.T) {
	s := testSpec(t)
	src := noise.NewSeeded(4)
	nonce := nonceOf(9)
	for bi, b := range s.Blocks() {
		lo, hi := b.Influence()
		bound := b.Sensitivity() // units
		sc := b.Scale()
		d := b.Dim()
		var dirs [][]float64
		for k := range d { // the axes, both signs
			for _, sg := range []float64{1, -1} {
				v := make([]float64, d)
				v[k] = sg
				dirs = append(dirs, v)
			}
		}
		if b.Kind() == KindQuestion { // straight at an option
			v := make([]float64, d)
			for i := range v {
				v[i] = hadamard(i+1, 1)
			}
			dirs = append(dirs, v)
		}
		for range 40 {
			v := make([]float64, d)
			for i := range v {
				v[i] = noise.Uniform(src)*2 - 1
			}
			dirs = append(dirs, v)
		}
		seenLo, seenHi := math.Inf(1), math.Inf(-1)
		for k, v := range dirs {
			var n2 float64
			for _, x := range v {
				n2 += x * x
			}
			x := make([]float64, d)
			var u2 float64
			for i := range v { // on the grid, rounded toward 0: norm <= B
				units := math.Trunc(v[i] / math.Sqrt(n2) * bound)
				x[i] = units / sc
				u2 += units * units
			}
			if u2 > bound*bound {
				t.Fatalf("cheat vector outside the ball")
			}
			// The block alone (a one-block spec: block index 0).
			one, err := NewSpec(b)
			if err != nil {
				t.Fatal(err)
			}
			bs, err := shardRaw(b, x, nonce, 0, src)
			if err != nil {
				t.Fatalf("block %d: cheat %d in the ball refused: %v", bi, k, err)
			}
			lead, help, verdicts := round(t, one, []Report{{Blocks: []BlockShare{bs}}}, [][16]byte{nonce})
			if verdicts[0] != nil {
				t.Fatalf("block %d: cheat %d in the ball rejected: %v", bi, k, verdicts[0])
			}
			lb, _ := lead.MarshalBinary()
			hb, _ := help.MarshalBinary()
			sums, err := one.Unshard(lb, hb, 1)
			if err != nil {
				t.Fatal(err)
			}
			var total float64
			for _, c := range sums.Counts[0] {
				if c < lo-1e-9 || c > hi+1e-9 {
					t.Errorf("block %d cheat %d: contribution %v outside [%v, %v]", bi, k, c, lo, hi)
				}
				seenLo, seenHi = min(seenLo, c), max(seenHi, c)
				total += c
			}
			if b.Kind() == KindQuestion && math.Abs(total-1) > 1e-9 {
				t.Errorf("block %d cheat %d: %v votes in total, want 1", bi, k, total)
			}
		}
		t.Logf("block %d (%v): cheats contributed [%.4f, %.4f] per count, bound [%.4f, %.4f]", bi, b.Kind(), seenLo, seenHi, lo, hi)
		if b.Kind() == KindEval {
			r := float64(b.Rows())
			if seenHi < hi-1/sc || seenLo > lo+1/sc {
				t.Errorf("eval extremes not reached: [%v, %v] vs [%v, %v]", seenLo, seenHi, lo, hi)
			}
			// (R ± (√2R + one grid unit))/2: ≈ [−0.207R, 1.207R].
			if w := (math.Sqrt2*r + 1/sc) / 2; hi > r/2+w || lo < r/2-w {
				t.Errorf("eval influence [%v, %v] beyond R/2 ± %v", lo, hi, w)
			}
		}
		// One unit beyond the ball along the first axis: the client
		// cannot shard it.
		x := make([]float64, d)
		x[0] = (bound + 1) / sc
		if _, err := shardRaw(b, x, nonce, 0, src); err == nil {
			t.Errorf("block %d: sharded a vector outside the ball", bi)
		}
	}
}
