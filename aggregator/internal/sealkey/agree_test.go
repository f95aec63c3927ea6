package sealkey

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
)

// TestEnvelopetestAgrees: the aggregator's opener and the test opener of
// envelopetest (which the tests of the relay, the clients and the scripts
// rely on) agree with each other and with envelope's sealing. For the
// same seed they derive the same key pair and the same signatures; on
// every message envelope seals (SealValues of 0, 1 and 157 values,
// SealEach of 70 values, SealShare to the leader) both open to the same
// bits, and both refuse the same wrong round, wrong key, modified byte and
// non-finite value with the same error class.
func TestEnvelopetestAgrees(t *testing.T) {
	for _, seed := range []byte{1, 7, 200} {
		agg, err := DeriveKey([32]byte{seed})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := envelopetest.DeriveKey([32]byte{seed})
		if err != nil {
			t.Fatal(err)
		}
		if !agg.Public().Equal(tk.Public()) {
			t.Fatalf("seed %d: the two DeriveKey give different keys", seed)
		}
		msg := []byte("announcement")
		if agg.Sign(msg) != tk.Sign(msg) {
			t.Fatalf("seed %d: signatures differ", seed)
		}
		other, _ := envelopetest.DeriveKey([32]byte{seed + 1})
		pub := agg.Public().HPKE

		type opener func(round uint64, sealed []byte) ([]float64, error)
		openers := map[string]opener{
			"sealkey":      func(r uint64, c []byte) ([]float64, error) { return agg.OpenValues(r, c, nil) },
			"envelopetest": func(r uint64, c []byte) ([]float64, error) { return tk.OpenValues(r, c, nil) },
		}
		check := func(what string, c []byte, want []float64) {
			t.Helper()
			for name, open := range openers {
				got, err := open(9, c)
				if err != nil || len(got) != len(want) {
					t.Fatalf("seed %d %s: %s: %v (%d values)", seed, what, name, err, len(got))
				}
				for i := range want {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("seed %d %s: %s: value %d = %v, want %v", seed, what, name, i, got[i], want[i])
					}
				}
				if _, err := open(10, c); !errors.Is(err, envelope.ErrOpen) {
					t.Fatalf("seed %d %s: %s opens the wrong round: %v", seed, what, name, err)
				}
				bad := bytes.Clone(c)
				bad[len(bad)-1] ^= 1
				if _, err := open(9, bad); !errors.Is(err, envelope.ErrOpen) {
					t.Fatalf("seed %d %s: %s opens a modified tag: %v", seed, what, name, err)
				}
			}
			if _, err := other.OpenValues(9, c, nil); !errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("seed %d %s: another key opens it: %v", seed, what, err)
			}
		}
		for _, n := range []int{0, 1, 157} {
			vals := testValues(n)
			c, err := envelope.SealValues(pub, 9, vals)
			if err != nil {
				t.Fatal(err)
			}
			check("SealValues", c, vals)
		}
		vals := testValues(70)
		each, err := envelope.SealEach(pub, 9, vals)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range each {
			check("SealEach", c, vals[i:i+1])
		}
		got1, errs1 := agg.OpenEach(9, each, nil)
		got2, errs2 := tk.OpenEach(9, each)
		if errs1 != nil || errs2 != nil {
			t.Fatalf("seed %d: OpenEach: %v / %v", seed, errs1, errs2)
		}
		for i := range vals {
			if got1[i] != vals[i] || got2[i] != vals[i] {
				t.Fatalf("seed %d: OpenEach value %d: %v / %v, want %v", seed, i, got1[i], got2[i], vals[i])
			}
		}
		nan, err := envelope.SealValues(pub, 9, []float64{math.Inf(1)})
		if err != nil {
			t.Fatal(err)
		}
		for name, open := range openers {
			if _, err := open(9, nan); !errors.Is(err, envelope.ErrNonFinite) || errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("seed %d: %s on +Inf: %v, want ErrNonFinite only", seed, name, err)
			}
		}
		share := bytes.Repeat([]byte{seed, 3}, 40)
		consent := [32]byte{seed, 0xc0}
		lead, err := envelope.SealShare(pub, 9, envelope.ShareLeader, consent, share)
		if err != nil {
			t.Fatal(err)
		}
		a, errA := agg.OpenLeaderShare(9, consent, lead, len(share))
		b, errB := tk.OpenLeaderShare(9, consent, lead, len(share))
		if errA != nil || errB != nil || !bytes.Equal(a, share) || !bytes.Equal(b, share) {
			t.Fatalf("seed %d: leader share: %v / %v", seed, errA, errB)
		}
		for name, err := range map[string]error{
			"sealkey":      func() error { _, err := agg.OpenLeaderShare(8, consent, lead, -1); return err }(),
			"envelopetest": func() error { _, err := tk.OpenLeaderShare(8, consent, lead, -1); return err }(),
		} {
			if !errors.Is(err, envelope.ErrOpenShare) {
				t.Fatalf("seed %d: %s opens a leader share of another round: %v", seed, name, err)
			}
		}
	}
}
