package web

import (
	"math"
	"net/http"
	"strconv"
	"strings"
)

// JoinCodeLen is the length of the class code: the first characters of
// the aggregator key's fingerprint.
const JoinCodeLen = 4

// JoinCodeOf is the class code of a key fingerprint, the short code a
// student may type after the relay's address instead of scanning the QR
// code ("" if the fingerprint is too short). The relay answers GET /{code}
// only with its current key's code, and the join page then checks that the
// key it is given starts with it: a short pin, 16 bits, so the page also
// shows the whole fingerprint to compare with the projector.
func JoinCodeOf(fingerprint string) string {
	if len(fingerprint) < JoinCodeLen {
		return ""
	}
	return strings.ToLower(fingerprint[:JoinCodeLen])
}

// Icon serves the pages' icon (static/icon.svg) at /favicon.ico, where
// browsers look for it whatever the page says.
func Icon() http.Handler {
	b, err := staticFS.ReadFile("static/icon.svg")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	})
}

// EpsilonAnchor is the sentence that says what a privacy level ε means to
// a class: e^ε bounds how much more (or less) likely any one student's
// data can make anything the class sees (the definition of ε-differential
// privacy, Dwork and Roth 2014, Definition 2.4, up to the small δ).
// join.js writes the same sentence for the phone (epsAnchor).
func EpsilonAnchor(eps float64) string {
	if !(eps > 0) || math.IsInf(eps, 0) {
		return ""
	}
	return "ε = " + strconv.FormatFloat(eps, 'g', 4, 64) + " means: anything the class sees (the model, its accuracy) is at most e^" +
		strconv.FormatFloat(eps, 'g', 4, 64) + " ≈ " + Times(math.Exp(eps)) +
		" times more likely, or less likely, because of any one student's data than without it."
}

// Times writes a factor for the room: 55, 1,100, 2.9 million, 5.2e21.
func Times(x float64) string {
	switch {
	case x < 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x < 1e4:
		return commas(int64(math.Round(x)))
	case x < 1e6:
		return commas(int64(math.Round(x/100) * 100))
	case x < 1e9:
		return strconv.FormatFloat(x/1e6, 'f', 1, 64) + " million"
	case x < 1e12:
		return strconv.FormatFloat(x/1e9, 'f', 1, 64) + " billion"
	}
	return strconv.FormatFloat(x, 'g', 2, 64)
}

// commas writes n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
