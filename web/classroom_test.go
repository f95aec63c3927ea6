package web

import (
	"net/http"
	"strings"
	"testing"
)

// TestEpsilonAnchor: the sentence states e^ε as a factor the room can say
// (ε = 4: about 55 times), and nothing for a non-positive ε.
func TestEpsilonAnchor(t *testing.T) {
	s := EpsilonAnchor(4)
	if !strings.Contains(s, "ε = 4 means") || !strings.Contains(s, "e^4 ≈ 55 times") {
		t.Errorf("EpsilonAnchor(4) = %q", s)
	}
	if EpsilonAnchor(0) != "" {
		t.Error("an anchor for ε = 0")
	}
	for x, want := range map[float64]string{2.718: "2.7", 54.6: "55", 2980.96: "2,981", 162754.8: "162,800", 4.85e8: "485.0 million", 5.18e21: "5.2e+21"} {
		if got := Times(x); got != want {
			t.Errorf("Times(%v) = %q, want %q", x, got, want)
		}
	}
}

// TestIcon: /favicon.ico is the SVG icon, and the code of a fingerprint
// is its first four characters.
func TestIcon(t *testing.T) {
	r := get(t, Icon(), "/favicon.ico", nil)
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(body(t, r)), "<svg") {
		t.Errorf("favicon: HTTP %d, %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	if c := JoinCodeOf("3FA2-0b1c-aaaa"); c != "3fa2" {
		t.Errorf("JoinCodeOf = %q", c)
	}
	if JoinCodeOf("ab") != "" {
		t.Error("a code of a too short fingerprint")
	}
}
