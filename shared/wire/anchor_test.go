package wire

import (
	"bytes"
	"errors"
	"testing"
)

func testAnchor() *Anchor {
	a := &Anchor{Own: Head{Count: 7}, Held: Head{Count: 3}}
	for i := range a.Own.Hash {
		a.Own.Hash[i], a.Held.Hash[i] = byte(i+1), byte(200-i)
	}
	return a
}

// TestAnchorRoundTrip: an anchor encodes to AnchorSize bytes and decodes
// to itself; every malformed variant is refused with ErrMalformed.
func TestAnchorRoundTrip(t *testing.T) {
	a := testAnchor()
	b, err := a.MarshalBinary()
	if err != nil || len(b) != AnchorSize {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	got, err := ParseAnchor(b)
	if err != nil || *got != *a {
		t.Fatalf("%+v %v", got, err)
	}
	empty, _ := (&Anchor{}).MarshalBinary()
	if g, err := ParseAnchor(empty); err != nil || !g.Own.IsZero() || !g.Held.IsZero() {
		t.Fatalf("empty anchor: %+v %v", g, err)
	}
	bad := map[string][]byte{
		"short":    b[:AnchorSize-1],
		"long":     append(bytes.Clone(b), 0),
		"version":  func() []byte { c := bytes.Clone(b); c[0]++; return c }(),
		"type":     func() []byte { c := bytes.Clone(b); c[1] = byte(TypeAck); return c }(),
		"count":    func() []byte { c := bytes.Clone(b); c[2] = 0xff; return c }(),
		"zerohash": func() []byte { c := bytes.Clone(empty); c[60] = 1; return c }(),
	}
	for name, c := range bad {
		if _, err := ParseAnchor(c); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := (&Anchor{Own: Head{Hash: [32]byte{1}}}).MarshalBinary(); err == nil {
		t.Error("encoded an empty head with a non-zero hash")
	}
}

func FuzzParseAnchor(f *testing.F) {
	b, _ := testAnchor().MarshalBinary()
	f.Add(b)
	f.Add(b[:40])
	e, _ := (&Anchor{}).MarshalBinary()
	f.Add(e)
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := ParseAnchor(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		out, err := a.MarshalBinary()
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("accepted anchor does not re-encode: %v\n in  %x\n out %x", err, in, out)
		}
	})
}
