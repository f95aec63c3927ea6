package secagg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/counts"
)

// prepRounds are the two kinds of rounds a helper Prep comes from: plain
// (dimension 12) and with count blocks (an evaluation block and a
// 3-option question), with two honest reports each.
func prepRounds(t *testing.T) []struct {
	name string
	r    *Round
	reps []report
} {
	plain := pineRound(t, 12, 0, 16, 3)
	withCounts := countsRound(t, 12, 0, 0, 7)
	cr, _, _, _ := countReports(t, withCounts, 2, 7)
	return []struct {
		name string
		r    *Round
		reps []report
	}{
		{"plain", plain, honestReports(t, plain, 2, 5)},
		{"counts", withCounts, cr},
	}
}

func engines(t *testing.T, r *Round) (le, he Engine) {
	t.Helper()
	le, err := NewEngine(r, true, testVK)
	if err != nil {
		t.Fatal(err)
	}
	if he, err = NewEngine(r, false, testVK); err != nil {
		t.Fatal(err)
	}
	return le, he
}

// helperPrepLen is the length of an accepted helper Prep of r.
func helperPrepLen(r *Round) int {
	n := headerLen + 1 + nonceSize + 1 + r.prepShareLen + r.pn.PrepStateSize()
	if r.cl != nil {
		n += r.cl.spec.PrepSize()
	}
	return n
}

// roundTrip encodes p, parses it back and checks that the parsed Prep
// re-encodes to the same bytes and has the same Entry (its 'P' message is
// byte-identical).
func roundTrip(t *testing.T, r *Round, p Prep) (Prep, []byte) {
	t.Helper()
	enc, err := r.MarshalHelperPrep(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := r.ParseHelperPrep(enc)
	if err != nil {
		t.Fatal(err)
	}
	if q.Nonce != p.Nonce || q.Reason != p.Reason || !bytes.Equal(q.Payload, p.Payload) || (q.Payload == nil) != (p.Payload == nil) {
		t.Fatalf("parsed entry (%x, %v, %d bytes) differs from (%x, %v, %d bytes)", q.Nonce, q.Reason, len(q.Payload), p.Nonce, p.Reason, len(p.Payload))
	}
	m0, err := r.MarshalPrep([]Entry{p.Entry})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := r.MarshalPrep([]Entry{q.Entry})
	if err != nil || !bytes.Equal(m0, m1) {
		t.Fatalf("'P' message of the parsed entry differs (%v)", err)
	}
	again, err := r.MarshalHelperPrep(q)
	if err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("re-encoding differs (%v)", err)
	}
	return q, enc
}

// TestHelperPrepRoundTrip: in a round without and a round with count
// blocks, the helper's Prep of each honest report, encoded and parsed
// (another replica's PrepInit), keeps its Entry and finishes with the
// leader's 'M' entry into an output share that folds to a running
// aggregate byte-identical to the original Prep's; the parsed Prep of the
// wrong round or dimension is refused; a Prep already through Next does
// not encode.
func TestHelperPrepRoundTrip(t *testing.T) {
	for _, tc := range prepRounds(t) {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			le, he := engines(t, r)
			orig, moved := he.NewAggregate(), he.NewAggregate()
			for i, rep := range tc.reps {
				hp := he.PrepInit(rep.helper)
				if hp.Reason != Accepted {
					t.Fatalf("report %d: helper %v: %v", i, hp.Reason, hp.Err)
				}
				q, enc := roundTrip(t, r, hp)
				if len(enc) != helperPrepLen(r) {
					t.Fatalf("report %d: %d bytes, want %d", i, len(enc), helperPrepLen(r))
				}
				if q.Err != nil {
					t.Fatalf("report %d: parsed accepted prep has error %v", i, q.Err)
				}
				m, lout := le.Decide(le.PrepInit(rep.leader), hp.Entry)
				if m.Reason != Accepted || lout == nil {
					t.Fatalf("report %d: leader %v", i, m.Reason)
				}
				out, err := he.Next(q, m)
				if err != nil || out == nil {
					t.Fatalf("report %d: next on the parsed prep: %v", i, err)
				}
				if err := moved.Fold(out); err != nil {
					t.Fatal(err)
				}
				if out, err = he.Next(hp, m); err != nil || out == nil {
					t.Fatalf("report %d: next on the original: %v", i, err)
				}
				if err := orig.Fold(out); err != nil {
					t.Fatal(err)
				}
				if _, err := r.MarshalHelperPrep(hp); err == nil {
					t.Fatalf("report %d: a prep already through Next encoded", i)
				}
			}
			a, err := orig.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b, err := moved.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) || orig.Count() != len(tc.reps) || moved.Count() != len(tc.reps) {
				t.Fatalf("running aggregates differ (counts %d and %d)", orig.Count(), moved.Count())
			}
		})
	}
}

// TestHelperPrepOtherRound: an encoded helper Prep parses only in its own
// round: not in one of another number, another dimension, or with or
// without count blocks when it was made without or with them.
func TestHelperPrepOtherRound(t *testing.T) {
	rs := prepRounds(t)
	encs := make([][]byte, len(rs))
	for i, tc := range rs {
		_, he := engines(t, tc.r)
		var err error
		if encs[i], err = tc.r.MarshalHelperPrep(he.PrepInit(tc.reps[0].helper)); err != nil {
			t.Fatal(err)
		}
	}
	plain, withCounts := rs[0].r, rs[1].r
	others := []struct {
		name string
		r    *Round
		enc  []byte
	}{
		{"another round number", pineRound(t, 12, 0, 16, 4), encs[0]},
		{"another dimension", pineRound(t, 13, 0, 16, plain.ID()), encs[0]},
		{"counts prep in a plain round", pineRound(t, 12, 0, 16, withCounts.ID()), encs[1]},
		{"plain prep in a counts round", countsRound(t, 12, 0, 0, 7), setRound(encs[0], withCounts.ID())},
		{"another question block", countsRoundQ(t, 5, withCounts.ID()), encs[1]},
	}
	for _, o := range others {
		if _, err := o.r.ParseHelperPrep(o.enc); err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", o.name, err)
		}
	}
}

// countsRoundQ is countsRound's round (dimension 12, 7 rows) with a
// question of options options in place of its 3-option one.
func countsRoundQ(t *testing.T, options int, id uint64) *Round {
	t.Helper()
	ev, err := counts.NewEval(7)
	if err != nil {
		t.Fatal(err)
	}
	q, err := counts.NewQuestion(options)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := counts.NewSpec(ev, q)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPineParams(12, 1, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.WithCounts(spec, []float64{0, 0}); err != nil {
		t.Fatal(err)
	}
	r, err := NewRound(p, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// setRound returns b with its header's round number set to id.
func setRound(b []byte, id uint64) []byte {
	b = bytes.Clone(b)
	binary.BigEndian.PutUint64(b[2:], id)
	return b
}

// TestHelperPrepRejected: a Prep the helper rejected (a share of another
// kind, of another round, of the wrong length) round-trips with its Reason
// and error text, and Next with an accepting leader entry is a protocol
// error on it as on the original; a rejected Prep without an error gets
// one when parsed. Inconsistent Preps do not encode.
func TestHelperPrepRejected(t *testing.T) {
	for _, tc := range prepRounds(t) {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			le, he := engines(t, r)
			rep := tc.reps[0]
			m, _ := le.Decide(le.PrepInit(rep.leader), he.PrepInit(rep.helper).Entry)
			if m.Reason != Accepted {
				t.Fatalf("leader %v", m.Reason)
			}
			kind := bytes.Clone(rep.helper)
			kind[1] = kindLeaderShare
			altered := []struct {
				share []byte
				want  Reason
			}{
				{kind, RejectMalformed},
				{setRound(rep.helper, r.ID()+1), RejectWrongRound},
				{rep.helper[:len(rep.helper)-1], RejectWrongLength},
			}
			for _, a := range altered {
				hp := he.PrepInit(a.share)
				if hp.Reason != a.want || hp.Err == nil {
					t.Fatalf("altered share: %v (%v), want %v", hp.Reason, hp.Err, a.want)
				}
				q, _ := roundTrip(t, r, hp)
				if q.Err == nil || q.Err.Error() != hp.Err.Error() {
					t.Fatalf("%v: parsed error %v, want %v", a.want, q.Err, hp.Err)
				}
				accept := m
				accept.Nonce = hp.Nonce
				for _, p := range []Prep{hp, q} {
					if out, err := he.Next(p, accept); !errors.Is(err, ErrProtocol) || out != nil {
						t.Fatalf("%v: next with an accepting entry: %v", a.want, err)
					}
					if out, err := he.Next(p, Entry{Nonce: hp.Nonce, Reason: a.want}); err != nil || out != nil {
						t.Fatalf("%v: next with a rejecting entry: %v", a.want, err)
					}
				}
			}
			q, _ := roundTrip(t, r, Prep{Entry: Entry{Reason: RejectInternal}})
			if q.Err == nil || !strings.Contains(q.Err.Error(), RejectInternal.String()) {
				t.Fatalf("rejected prep without an error parsed with %v", q.Err)
			}
			long := Prep{Entry: Entry{Reason: RejectMalformed}, Err: errors.New(strings.Repeat("é", maxPrepErrText))}
			if q, _ = roundTrip(t, r, long); len(q.Err.Error()) != maxPrepErrText || !strings.HasPrefix(long.Err.Error(), q.Err.Error()) {
				t.Fatalf("long error text parsed as %d bytes", len(q.Err.Error()))
			}
			hp := he.PrepInit(rep.helper)
			bad := []struct {
				name string
				p    Prep
			}{
				{"accepted with an error", Prep{Entry: hp.Entry, Err: errors.New("x"), state: hp.state}},
				{"accepted without a state", Prep{Entry: hp.Entry}},
				{"accepted with a short payload", Prep{Entry: Entry{Nonce: hp.Nonce, Payload: hp.Payload[1:]}, state: hp.state}},
				{"rejected with a payload", Prep{Entry: Entry{Reason: RejectMalformed, Payload: hp.Payload}, Err: errors.New("x")}},
				{"unknown reason", Prep{Entry: Entry{Reason: numReasons}, Err: errors.New("x")}},
			}
			for _, b := range bad {
				if _, err := r.MarshalHelperPrep(b.p); err == nil {
					t.Errorf("%s: encoded", b.name)
				}
			}
		})
	}
}

// TestParseHelperPrepStrict: every truncation of an accepted and of a
// rejected encoding, a trailing byte, another format or kind byte, an
// unknown reason, a field element equal to the modulus in the PINE state
// (and in the count blocks' state), count blocks' prep shares that differ
// from the payload's, and error texts of 0 or more than 1024 bytes are
// refused.
func TestParseHelperPrepStrict(t *testing.T) {
	for _, tc := range prepRounds(t) {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			_, he := engines(t, r)
			acc, err := r.MarshalHelperPrep(he.PrepInit(tc.reps[0].helper))
			if err != nil {
				t.Fatal(err)
			}
			rej, err := r.MarshalHelperPrep(he.PrepInit(tc.reps[0].helper[:20]))
			if err != nil {
				t.Fatal(err)
			}
			for _, enc := range [][]byte{acc, rej} {
				if _, err := r.ParseHelperPrep(enc); err != nil {
					t.Fatal(err)
				}
				for n := range len(enc) {
					if _, err := r.ParseHelperPrep(enc[:n]); err == nil {
						t.Fatalf("truncation to %d of %d bytes parsed", n, len(enc))
					}
				}
				if _, err := r.ParseHelperPrep(append(bytes.Clone(enc), 0)); err == nil {
					t.Fatal("trailing byte parsed")
				}
			}
			const fixed = headerLen + 1 + nonceSize + 1
			set := func(b []byte, off int, v byte) []byte { b = bytes.Clone(b); b[off] = v; return b }
			refused := map[string][]byte{
				"format 2":             set(acc, headerLen, 2),
				"format 0":             set(acc, headerLen, 0),
				"kind 'P'":             set(acc, 1, kindHelperPrep),
				"version 2":            set(acc, 0, 2),
				"unknown reason":       set(acc, fixed-1, byte(numReasons)),
				"accepted as rejected": set(acc, fixed-1, byte(RejectMalformed)),
				"rejected as accepted": set(rej, fixed-1, byte(Accepted)),
				"reason 255":           set(rej, fixed-1, 255),
			}
			txt := bytes.Clone(rej[:fixed])
			refused["empty error text"] = binary.BigEndian.AppendUint16(bytes.Clone(txt), 0)
			refused["error text of 1025 bytes"] = append(binary.BigEndian.AppendUint16(bytes.Clone(txt), maxPrepErrText+1), make([]byte, maxPrepErrText+1)...)
			ok := append(binary.BigEndian.AppendUint16(bytes.Clone(txt), maxPrepErrText), make([]byte, maxPrepErrText)...)
			if _, err := r.ParseHelperPrep(ok); err != nil {
				t.Fatalf("error text of 1024 bytes refused: %v", err)
			}
			// Field elements: the PINE state's first and last, and the
			// count blocks' first (after their 2-byte block count).
			const q = 0xffffffff00000001
			st := fixed + r.prepShareLen
			offs := []int{st, st + 8*(r.p.Dim-1)}
			if r.cl != nil {
				offs = append(offs, st+r.pn.PrepStateSize()+2)
				pl := bytes.Clone(acc)
				pl[fixed+r.pn.PrepShareSize()] ^= 1
				refused["count prep share differs from the payload"] = pl
			}
			for _, off := range offs {
				b := bytes.Clone(acc)
				binary.LittleEndian.PutUint64(b[off:], q)
				refused[fmt.Sprintf("element at %d = modulus", off)] = b
				b = bytes.Clone(b)
				binary.LittleEndian.PutUint64(b[off:], q-1)
				if _, err := r.ParseHelperPrep(b); err != nil {
					t.Fatalf("element at %d = modulus-1 refused: %v", off, err)
				}
			}
			for name, b := range refused {
				if _, err := r.ParseHelperPrep(b); err == nil || !errors.Is(err, ErrMalformed) {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// FuzzParseHelperPrep: no input panics ParseHelperPrep, and every accepted
// input is canonical (re-encoding the parsed Prep gives it back). Seeds:
// an accepted and a rejected Prep of a round with count blocks
// (dimension 4), and the accepted one of a plain round's size.
func FuzzParseHelperPrep(f *testing.F) {
	r := countsRound(f, 4, 0, 0, 3)
	reps, _, _, _ := countReports(f, r, 1, 3)
	le, err := NewEngine(r, true, testVK)
	if err != nil {
		f.Fatal(err)
	}
	he, err := NewEngine(r, false, testVK)
	if err != nil {
		f.Fatal(err)
	}
	hp := he.PrepInit(reps[0].helper)
	acc, err := r.MarshalHelperPrep(hp)
	if err != nil {
		f.Fatal(err)
	}
	rej, err := r.MarshalHelperPrep(he.PrepInit(reps[0].helper[:30]))
	if err != nil {
		f.Fatal(err)
	}
	m, _ := le.Decide(le.PrepInit(reps[0].leader), hp.Entry)
	f.Add(acc)
	f.Add(rej)
	f.Add(acc[:len(acc)-r.cl.spec.PrepSize()])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := r.ParseHelperPrep(b)
		if err != nil {
			return
		}
		again, err := r.MarshalHelperPrep(p)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("parsed prep re-encodes differently (%v)", err)
		}
		if p.Reason != Accepted && p.Err == nil {
			t.Fatal("rejected prep parsed without an error")
		}
		// Next on whatever parsed must not panic either.
		_, _ = he.Next(p, m)
	})
}
