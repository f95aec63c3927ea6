//go:build !linux && !js

package benchclock

import "testing"

// Clock is a no-op where no CPU clock is available here (neither Linux
// nor js/wasm under Node): only ns/op is reported.
type Clock struct{}

// Start does nothing here.
func (c *Clock) Start() {}

// Report does nothing here.
func (c *Clock) Report(_ *testing.B) {}
