//go:build !js

package envelope

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope/webhpke"
)

// The suite is RFC 9180's DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
// AES-128-GCM: the one envelope/webhpke composes from WebCrypto or Go's
// primitives in the browser (its suite_id is hard-coded there and checked
// against the RFC's vector), so every opener, which uses Suite, opens what
// the browser seals.
func TestSuiteIDs(t *testing.T) {
	k, d, a := Suite()
	if k.ID() != 0x0020 || d.ID() != 0x0001 || a.ID() != 0x0001 {
		t.Fatalf("suite ids %#04x %#04x %#04x, want 0x0020 0x0001 0x0001", k.ID(), d.ID(), a.ID())
	}
}

// blanketInfos are the info strings Blanket seals under, for rounds at the
// edges of u64be(round): values, and both share roles.
func blanketInfos(t *testing.T) map[string][]byte {
	t.Helper()
	infos := map[string][]byte{}
	for _, round := range []uint64{0, 7, 1<<40 + 5, math.MaxUint64} {
		infos[fmt.Sprintf("values round %d", round)] = ValuesInfo(round)
		for _, role := range []ShareRole{ShareLeader, ShareHelper} {
			inf, err := ShareInfo(round, role, [32]byte{})
			if err != nil {
				t.Fatal(err)
			}
			infos[fmt.Sprintf("share %d round %d", role, round)] = inf
			if role == ShareLeader {
				inf, err := ShareInfo(round, role, testConsent)
				if err != nil {
					t.Fatal(err)
				}
				infos[fmt.Sprintf("share %d round %d consent", role, round)] = inf
			}
		}
	}
	return infos
}

// The browser's fallback (webhpke.SealGo: RFC 9180's schedule over Go's
// crypto/ecdh and crypto/aes, what js/wasm seals with when WebCrypto lacks
// X25519) and the native sealer (crypto/hpke) agree in both directions for
// every info string Blanket uses, with empty aad, on width-1 values,
// multi-value messages and 1000-byte shares: what SealGo seals,
// crypto/hpke opens (and not under any other of those infos, nor after a
// flipped bit), and what crypto/hpke seals (SealValues, SealEach,
// SealShare natively), webhpke.OpenGo opens.
func TestFallbackAgreesWithCryptoHPKE(t *testing.T) {
	k := testKey(t, 5)
	pub, sk := k.Public().HPKE, k.scalar(t)
	rng := rand.New(rand.NewChaCha8([32]byte{5}))
	var pts [][]byte
	for _, n := range []int{8, 8, 8 * 20, 1000} {
		pt := make([]byte, n)
		for i := range pt {
			pt[i] = byte(rng.Uint32())
		}
		pts = append(pts, pt)
	}
	infos := blanketInfos(t)
	for name, info := range infos {
		sealed, err := webhpke.SealGo(pub, info, pts, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range sealed {
			if len(c) != len(pts[i])+Overhead {
				t.Fatalf("%q message %d: %d bytes, want %d", name, i, len(c), len(pts[i])+Overhead)
			}
			got, err := openRaw(k, info, c)
			if err != nil || !bytes.Equal(got, pts[i]) {
				t.Fatalf("%q message %d: crypto/hpke opens to %x, %v", name, i, got, err)
			}
			for other, oinfo := range infos {
				if other != name {
					if _, err := openRaw(k, oinfo, c); err == nil {
						t.Fatalf("%q message %d opens under %q", name, i, other)
					}
				}
			}
			bad := bytes.Clone(c)
			bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
			if _, err := openRaw(k, info, bad); err == nil {
				t.Fatalf("%q message %d opens with a flipped bit", name, i)
			}
		}

		std, err := sealStd(pub, info, pts, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := webhpke.OpenGo(sk, pub, info, std)
		if err != nil {
			t.Fatalf("%q: webhpke.OpenGo of crypto/hpke's messages: %v", name, err)
		}
		for i := range pts {
			if !bytes.Equal(got[i], pts[i]) {
				t.Fatalf("%q message %d: OpenGo opens crypto/hpke's to %x, want %x", name, i, got[i], pts[i])
			}
		}
	}

	// Through the package's own functions (crypto/hpke natively).
	vals := testValues(30)
	vals[2] = math.Copysign(0, -1)
	const round = 1<<33 + 9
	s, err := SealValues(pub, round, vals)
	if err != nil {
		t.Fatal(err)
	}
	each, err := SealEach(pub, round, vals)
	if err != nil {
		t.Fatal(err)
	}
	share := bytes.Repeat([]byte{0x3c}, 500)
	sh, err := SealShare(pub, round, ShareLeader, testConsent, share)
	if err != nil {
		t.Fatal(err)
	}
	shInfo, _ := ShareInfo(round, ShareLeader, testConsent)
	opened, err := webhpke.OpenGo(sk, pub, ValuesInfo(round), append([][]byte{s}, each...))
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float64, len(vals))
	if !DecodeValues(dst, opened[0]) {
		t.Fatal("non-finite values")
	}
	for i, v := range vals {
		var one [1]float64
		DecodeValues(one[:], opened[1+i])
		if math.Float64bits(dst[i]) != math.Float64bits(v) || math.Float64bits(one[0]) != math.Float64bits(v) {
			t.Fatalf("value %d opens to %v and %v, want %v", i, dst[i], one[0], v)
		}
	}
	if got, err := webhpke.OpenGo(sk, pub, shInfo, [][]byte{sh}); err != nil || !bytes.Equal(got[0], share) {
		t.Fatalf("share opens to %d bytes, %v", len(got), err)
	}
	if _, err := webhpke.OpenGo(sk, pub, ValuesInfo(round+1), [][]byte{s}); err == nil {
		t.Fatal("values open under another round")
	}
}
