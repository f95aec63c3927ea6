package console

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/blanket-fl/blanket/web"
)

// JoinCode is the class code a student may type after the relay's address
// instead of scanning the QR code: the first JoinCodeLen characters of the
// aggregator key's fingerprint. The relay answers GET /{code} only with
// its current key's code, and the join page then checks that the key it
// is given starts with it (a short pin: the whole fingerprint is on the
// projector to compare). "" when the fingerprint is unknown.
func (d DashboardData) JoinCode() string {
	return web.JoinCodeOf(d.Fingerprint)
}

// EpsilonAnchor is web.EpsilonAnchor (the dashboard's sentence on what
// the target ε means).
func EpsilonAnchor(eps float64) string { return web.EpsilonAnchor(eps) }

// abortRound is the data-round of #round-note ("" when none).
func abortRound(a *AbortNote) string {
	if a == nil {
		return ""
	}
	return strconv.Itoa(a.Round)
}

// relayBase is the join URL without fragment, query and trailing slash;
// "" if it is not an absolute http(s) URL.
func (d DashboardData) relayBase() string {
	u, err := url.Parse(d.JoinURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.Path, "/")
}

// ShortJoinURL is the relay's address followed by the class code, the
// link to type: http://host:port/code.
func (d DashboardData) ShortJoinURL() string {
	base, code := d.relayBase(), d.JoinCode()
	if base == "" || code == "" {
		return ""
	}
	return base + "/" + code
}

// ShortJoinText is ShortJoinURL as the room reads it: without "http://"
// (browsers add it).
func (d DashboardData) ShortJoinText() string {
	return strings.TrimPrefix(d.ShortJoinURL(), "http://")
}

// PredictorURL is the relay's GET /api/predictor: the current public model
// folded with the standardizer the volunteers use, for "draw a digit, see
// the class model's guess"; "" if the join URL is not absolute.
func (d DashboardData) PredictorURL() string {
	base := d.relayBase()
	if base == "" {
		return ""
	}
	return base + "/api/predictor"
}
