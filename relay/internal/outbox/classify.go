package outbox

import "net/http"

// Classify is the one mapping from the aggregator's HTTP status to an
// outcome (docs/protocol.md, "Relay-aggregator outcomes"), for every
// frame the relay sends (batches and aborts through the Sender, secure
// summation's chunks, close and aggregate share): 200 accepted, 208
// duplicate, 409 obsolete, 400/413/422 invalid; anything else (5xx, 401,
// 404, another 2xx, no answer) is retried with the identical bytes. The
// caller may still demote an accepted or duplicate answer whose body is
// not the reply its frame needs to Retry.
func Classify(status int) Outcome {
	switch status {
	case http.StatusOK:
		return Accepted
	case http.StatusAlreadyReported:
		return Duplicate
	case http.StatusConflict:
		return Obsolete
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return Invalid
	}
	return Retry
}
