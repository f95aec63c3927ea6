package rounds

// The driver's reading of the relay's answers to an announcement.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// HelperKeyMismatch is the relay's detail when an announcement carries a
// RelayPub that is not its key (docs/secagg.md, "Keys and secrets").
const HelperKeyMismatch = "helper key mismatch"

// HTTP status codes the relay's answers are read by (net/http's values).
const (
	statusConflict           = 409
	statusServiceUnavailable = 503
)

// RelayError is the relay's non-2xx answer to a request.
type RelayError struct {
	Status  string
	Code    int
	Outcome string // the relay's OutcomeHeader, if any
	Body    string
}

func (e *RelayError) Error() string { return fmt.Sprintf("relay answered %s: %s", e.Status, e.Body) }

// IsHelperKeyMismatch reports whether the relay refused an announcement
// because its RelayPub is not the relay's key (the aggregator fetches the
// key again).
func IsHelperKeyMismatch(err error) bool {
	var re *RelayError
	return errors.As(err, &re) && strings.Contains(re.Body, HelperKeyMismatch)
}

// RelayRefusal reports whether err is the relay's definitive refusal of an
// announcement (409 with outcome refused or invalid: its noise ledger's
// budget is spent, the announced target is not its own, or it cannot run
// the parameters), and the words that say so, for the round's record,
// /api/status and the dashboard. A helper-key mismatch is not one (the
// aggregator fetches the key again), nor a 409 without an outcome (a round
// still open or a stale number, which the relay's next close resolves).
func RelayRefusal(err error) (string, bool) {
	var re *RelayError
	if !errors.As(err, &re) || re.Code != statusConflict || strings.Contains(re.Body, HelperKeyMismatch) {
		return "", false
	}
	var ans struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal([]byte(re.Body), &ans) != nil || ans.Detail == "" {
		ans.Detail = re.Body
	}
	switch re.Outcome {
	case "refused":
		return "the relay refused the round: its own privacy budget is spent (" + ans.Detail + ")", true
	case "invalid":
		return "the relay refused the round: " + ans.Detail, true
	}
	return "", false
}

// RelayNotReady reports whether an announcement failed because the relay
// does not answer (a transport error) or answers 503: down, restarting,
// warming up or not yet checked, but not refusing the round.
func RelayNotReady(err error) bool {
	var re *RelayError
	if errors.As(err, &re) {
		return re.Code == statusServiceUnavailable
	}
	return err != nil // not reached (a transport error, or the helper key's fetch failing)
}

// SecAggBodyLimits bounds the request bodies of POST /v1/secagg/chunk and
// /v1/secagg/aggregate for rc (the largest frames the round's Quota
// allows: a chunk holds at most the whole round; 1 KiB each when rc is
// not secure summation).
func (rc *RoundConfig) SecAggBodyLimits() (chunk, aggregate int64) {
	ps, p := rc.Proto, rc.Params
	if !ps.SecAgg() {
		return 1 << 10, 1 << 10
	}
	sr, err := ps.Spec.SecAggRound(1)
	if err != nil {
		return 1 << 10, 1 << 10
	}
	q := int64(p.Quota)
	chunk = 22 + q*int64(ps.LeaderSealed) + 4 + 64 + q*int64(sr.PrepShareSize())
	aggregate = 14 + 64 + 16*int64(p.D)
	return chunk, aggregate
}
