package secagg

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// testVK is the verify key shared by the two servers in tests.
var testVK = bytes.Repeat([]byte{7}, VerifyKeySize)

// testRound is a PINE round of dimension dim, clip 1.
func testRound(t testing.TB, dim int, sigma float64, maxReports int, id uint64) *Round {
	t.Helper()
	return pineRound(t, dim, sigma, maxReports, id)
}

// randomUpdate returns a float vector with entries in [-a, a).
func randomUpdate(src noise.Source, dim int, a float64) []float64 {
	x := make([]float64, dim)
	for i := range x {
		x[i] = (2*noise.Uniform(src) - 1) * a
	}
	return x
}

type report struct {
	leader, helper []byte
	q              []int64 // the encoded vector (nil if unknown)
}

// honestReports shards n random updates; q is their encoding (Encode,
// deterministic: what Shard puts in the sum).
func honestReports(t testing.TB, r *Round, n int, seed uint64) []report {
	t.Helper()
	out := make([]report, n)
	data := noise.NewSeeded(seed)
	for i := range out {
		x := randomUpdate(data, r.p.Dim, 0.5)
		s := seed<<20 + uint64(i)
		l, h, err := r.Shard(x, noise.NewSeeded(s))
		if err != nil {
			t.Fatal(err)
		}
		q, err := Encode(r.p, x)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = report{leader: l, helper: h, q: q}
	}
	return out
}

type outcome struct {
	leader, helper    *AggregateShare
	lrej, hrej        []Rejection
	leaderS, helperS  *Leader
	helperMsgLen      int
	leaderMsgLen      int
	helperPrepRejects []Rejection
}

// prepare runs the whole two-server preparation on the reports.
func prepare(t testing.TB, r *Round, reps []report) outcome {
	t.Helper()
	ls := make([][]byte, len(reps))
	hs := make([][]byte, len(reps))
	for i, rep := range reps {
		ls[i], hs[i] = rep.leader, rep.helper
	}
	return prepareShares(t, r, ls, hs)
}

func prepareShares(t testing.TB, r *Round, ls, hs [][]byte) outcome {
	t.Helper()
	helper, err := NewHelper(r, testVK)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := NewLeader(r, testVK)
	if err != nil {
		t.Fatal(err)
	}
	pmsg, hprep, err := helper.Prepare(hs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Prepare(ls); err != nil {
		t.Fatal(err)
	}
	mmsg, lrej, err := leader.Combine(pmsg)
	if err != nil {
		t.Fatal(err)
	}
	hrej, err := helper.Finish(mmsg)
	if err != nil {
		t.Fatal(err)
	}
	la, err := leader.AggregateShare()
	if err != nil {
		t.Fatal(err)
	}
	ha, err := helper.AggregateShare()
	if err != nil {
		t.Fatal(err)
	}
	return outcome{leader: la, helper: ha, lrej: lrej, hrej: hrej, leaderS: leader,
		helperMsgLen: len(pmsg), leaderMsgLen: len(mmsg), helperPrepRejects: hprep}
}

func (o outcome) unshard(t testing.TB) *Result {
	t.Helper()
	hb, err := o.helper.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.leaderS.Unshard(o.leader, hb)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func sumOf(dim int, reps []report) []int64 {
	s := make([]int64, dim)
	for _, rep := range reps {
		for i, v := range rep.q {
			s[i] += v
		}
	}
	return s
}

func TestHonestSumRecoveredExactly(t *testing.T) {
	r := testRound(t, 40, 0, 64, 3)
	reps := honestReports(t, r, 25, 1)
	o := prepare(t, r, reps)
	if len(o.lrej) != 0 || len(o.hrej) != 0 {
		t.Fatalf("honest reports rejected: leader %v helper %v", o.lrej, o.hrej)
	}
	res := o.unshard(t)
	if res.Count != 25 || res.NoiseShares != 0 {
		t.Fatalf("count %d noise shares %d, want 25 0", res.Count, res.NoiseShares)
	}
	want := sumOf(r.p.Dim, reps)
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
		}
		if m := float64(want[i]) / (25 * r.p.Scale); res.Mean[i] != m {
			t.Fatalf("mean[%d] = %v, want %v", i, res.Mean[i], m)
		}
	}
}

// TestShardDeterministic: a seeded source gives identical bytes, another
// seed different ones, and the sizes do not depend on the data.
func TestShardDeterministic(t *testing.T) {
	r := testRound(t, 30, 0, 8, 1)
	x := randomUpdate(noise.NewSeeded(1), 30, 1)
	l1, h1, err := r.Shard(x, noise.NewSeeded(5))
	if err != nil {
		t.Fatal(err)
	}
	l2, h2, _ := r.Shard(x, noise.NewSeeded(5))
	l3, h3, _ := r.Shard(make([]float64, 30), noise.NewSeeded(6))
	if !bytes.Equal(l1, l2) || !bytes.Equal(h1, h2) {
		t.Fatal("same seed gave different shares")
	}
	if bytes.Equal(l1, l3) || bytes.Equal(h1, h3) {
		t.Fatal("different seeds gave equal shares")
	}
	if len(l1) != r.LeaderShareSize() || len(l3) != r.LeaderShareSize() || len(h1) != r.HelperShareSize() || len(h3) != r.HelperShareSize() {
		t.Fatalf("sizes %d %d %d %d, want %d %d", len(l1), len(l3), len(h1), len(h3), r.LeaderShareSize(), r.HelperShareSize())
	}
}

// TestRejections tampers with shares in every way a caller can count and
// checks the reason, that both servers agree, and that the sum is the sum
// of the untouched reports. (The PINE-specific tampering, an over-norm
// gradient share, is TestPineEngine's.) PINE's shares carry no round
// context: a share of another round with its header rewritten is not
// refused here; the round binding is the envelope's (each share is sealed
// with the round in its HPKE info, shared/envelope).
func TestRejections(t *testing.T) {
	r := testRound(t, 16, 0, 32, 5)
	other := testRound(t, 16, 0, 32, 6)
	off := headerLen + nonceSize + r.publicLen
	tamper := []struct {
		name   string
		reason Reason
		f      func(l, h []byte) ([]byte, []byte)
	}{
		{"helper seed", RejectInvalidProof, func(l, h []byte) ([]byte, []byte) { h[off] ^= 1; return l, h }},
		{"truncated", RejectWrongLength, func(l, h []byte) ([]byte, []byte) { return l[:len(l)-1], h }},
		{"extended", RejectWrongLength, func(l, h []byte) ([]byte, []byte) { return l, append(h, 0) }},
		{"version", RejectMalformed, func(l, h []byte) ([]byte, []byte) { h[0] = 2; return l, h }},
		{"kind", RejectMalformed, func(l, h []byte) ([]byte, []byte) { l[1] = kindHelperShare; return l, h }},
		{"non-canonical field element", RejectMalformed, func(l, h []byte) ([]byte, []byte) {
			copy(l[off:off+8], bytes.Repeat([]byte{0xff}, 8))
			return l, h
		}},
		{"nonce (leader copy)", RejectNonceMismatch, func(l, h []byte) ([]byte, []byte) { l[headerLen] ^= 1; return l, h }},
		{"wrong round", RejectWrongRound, func(l, h []byte) ([]byte, []byte) {
			x := randomUpdate(noise.NewSeeded(9), 16, 0.3)
			l2, h2, err := other.Shard(x, noise.NewSeeded(9))
			if err != nil {
				t.Fatal(err)
			}
			return l2, h2
		}},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			reps := honestReports(t, r, 4, 7)
			bad := honestReports(t, r, 1, 8)[0]
			bad.leader, bad.helper = tc.f(bytes.Clone(bad.leader), bytes.Clone(bad.helper))
			all := []report{reps[0], reps[1], bad, reps[2], reps[3]}
			o := prepare(t, r, all)
			for side, rej := range map[string][]Rejection{"leader": o.lrej, "helper": o.hrej} {
				if len(rej) != 1 || rej[0].Index != 2 || rej[0].Reason != tc.reason {
					t.Fatalf("%s rejections %v, want report 2 %v", side, rej, tc.reason)
				}
			}
			if c := Counts(o.lrej); c[tc.reason] != 1 {
				t.Fatalf("counts %v", c)
			}
			res := o.unshard(t)
			want := sumOf(16, reps)
			for i := range want {
				if res.Sum[i] != want[i] {
					t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
				}
			}
		})
	}
}

// overNormReport is an honest report whose leader share was shifted by
// 3 NormBound in coordinate 0 (overNorm): PINE's proof must reject it.
func overNormReport(t *testing.T, r *Round, seed uint64) report {
	t.Helper()
	rep := honestReports(t, r, 1, seed)[0]
	k := make([]int64, r.p.Dim)
	k[0] = 3 * int64(r.p.NormBound)
	rep.leader = overNorm(r, rep.leader, k)
	rep.q = nil
	return rep
}

// TestNonceMismatch: the relay swaps two helper shares, so the servers'
// shares at positions 1 and 2 belong to different reports.
func TestNonceMismatch(t *testing.T) {
	r := testRound(t, 16, 0, 32, 5)
	reps := honestReports(t, r, 4, 4)
	var ls, hs [][]byte
	for _, rep := range reps {
		ls, hs = append(ls, rep.leader), append(hs, rep.helper)
	}
	hs[1], hs[2] = hs[2], hs[1]
	o := prepareShares(t, r, ls, hs)
	for _, rej := range [][]Rejection{o.lrej, o.hrej} {
		if c := Counts(rej); len(rej) != 2 || c[RejectNonceMismatch] != 2 {
			t.Fatalf("rejections %v, want reports 1 and 2 nonce mismatch", rej)
		}
	}
	res := o.unshard(t)
	want := sumOf(16, []report{reps[0], reps[3]})
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
		}
	}
}

func TestDuplicateNonce(t *testing.T) {
	r := testRound(t, 16, 0, 32, 5)
	reps := honestReports(t, r, 3, 4)
	all := []report{reps[0], reps[1], reps[0], reps[2]}
	o := prepare(t, r, all)
	for _, rej := range [][]Rejection{o.lrej, o.hrej} {
		if len(rej) != 1 || rej[0].Index != 2 || rej[0].Reason != RejectDuplicateNonce {
			t.Fatalf("rejections %v, want report 2 duplicate nonce", rej)
		}
	}
	res := o.unshard(t)
	want := sumOf(16, reps)
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d (replayed report counted twice?)", i, res.Sum[i], want[i])
		}
	}
}

// TestProtocolViolations: messages that contradict the receiver's state
// abort the batch instead of rejecting one report.
func TestProtocolViolations(t *testing.T) {
	r := testRound(t, 16, 0, 32, 5)
	reps := honestReports(t, r, 3, 4)
	var ls, hs [][]byte
	for _, rep := range reps {
		ls, hs = append(ls, rep.leader), append(hs, rep.helper)
	}
	helper, _ := NewHelper(r, testVK)
	leader, _ := NewLeader(r, testVK)
	pmsg, _, err := helper.Prepare(hs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.AggregateShare(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("aggregate share before preparation: %v", err)
	}
	if _, err := leader.Prepare(ls[:2]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := leader.Combine(pmsg); !errors.Is(err, ErrProtocol) {
		t.Fatalf("helper message for 3 reports, leader batch of 2: %v", err)
	}
	// A leader that accepts a report the helper rejected.
	h2, _ := NewHelper(r, testVK)
	bad := bytes.Clone(hs[1])
	bad[0] = 9
	if _, _, err := h2.Prepare([][]byte{hs[0], bad, hs[2]}); err != nil {
		t.Fatal(err)
	}
	l2, _ := NewLeader(r, testVK)
	if _, err := l2.Prepare(ls); err != nil {
		t.Fatal(err)
	}
	mmsg, _, err := l2.Combine(pmsg) // decided with the honest helper message
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Finish(mmsg); !errors.Is(err, ErrProtocol) {
		t.Fatalf("leader accepted what the helper rejected: %v", err)
	}
	// Aggregate shares over different counts are refused.
	o := prepare(t, r, reps)
	o2 := prepare(t, r, reps[:2])
	hb, _ := o2.helper.MarshalBinary()
	if _, err := o.leaderS.Unshard(o.leader, hb); !errors.Is(err, ErrProtocol) {
		t.Fatalf("unshard with counts 3 and 2: %v", err)
	}
	if _, err := NewLeader(r, testVK[:31]); err == nil {
		t.Fatal("accepted a short verify key")
	}
	// A verify key the two servers do not share fails every proof.
	h3, _ := NewHelper(r, bytes.Repeat([]byte{8}, VerifyKeySize))
	pmsg3, _, _ := h3.Prepare(hs)
	l3, _ := NewLeader(r, testVK)
	_, _ = l3.Prepare(ls)
	_, rej, err := l3.Combine(pmsg3)
	if err != nil {
		t.Fatal(err)
	}
	if c := Counts(rej); c[RejectInvalidProof] != 3 {
		t.Fatalf("mismatched verify keys: rejections %v", c)
	}
}

// TestNoiseEnforced: with Sigma > 0 an aggregate share is released once,
// cannot be encoded or unsharded without noise, and takes noise once.
func TestNoiseEnforced(t *testing.T) {
	r := testRound(t, 8, 5, 8, 1)
	reps := honestReports(t, r, 3, 1)
	o := prepare(t, r, reps)
	if _, err := o.leaderS.AggregateShare(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("second aggregate share: %v", err)
	}
	if _, err := o.helper.MarshalBinary(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("helper share without noise encoded: %v", err)
	}
	if err := o.helper.AddNoise(noise.NewSeeded(1)); err != nil {
		t.Fatal(err)
	}
	if err := o.helper.AddNoise(noise.NewSeeded(1)); err == nil {
		t.Fatal("noise added twice")
	}
	hb, err := o.helper.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.leaderS.Unshard(o.leader, hb); !errors.Is(err, ErrProtocol) {
		t.Fatalf("unshard with the leader's share unnoised: %v", err)
	}
	if err := o.leader.AddNoise(noise.NewSeeded(2)); err != nil {
		t.Fatal(err)
	}
	res, err := o.leaderS.Unshard(o.leader, hb)
	if err != nil {
		t.Fatal(err)
	}
	if res.NoiseShares != 2 {
		t.Fatalf("noise shares %d", res.NoiseShares)
	}
	// Sigma = 0 refuses AddNoise.
	r0 := testRound(t, 8, 0, 8, 1)
	o0 := prepare(t, r0, honestReports(t, r0, 2, 1))
	if err := o0.leader.AddNoise(noise.NewSeeded(1)); err == nil {
		t.Fatal("noise with sigma 0")
	}
}
