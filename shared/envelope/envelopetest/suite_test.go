//go:build !js

package envelopetest

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
)

// The openers' suite is the one every production opener uses
// (envelope.Suite): same KEM, KDF and AEAD identifiers.
func TestSuiteIsEnvelopes(t *testing.T) {
	k, d, a := suite()
	ek, ed, ea := envelope.Suite()
	if k.ID() != ek.ID() || d.ID() != ed.ID() || a.ID() != ea.ID() {
		t.Fatalf("suite %#04x %#04x %#04x, envelope.Suite %#04x %#04x %#04x", k.ID(), d.ID(), a.ID(), ek.ID(), ed.ID(), ea.ID())
	}
}
