package api

import (
	"net/http"

	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
)

// OutcomeHeader names the outcome (Intake) of a batch or an abort.
const OutcomeHeader = "Blanket-Outcome"

// Intake is the definitive outcome of a batch or an abort the relay posts
// (package outcome, which the round state machine decides apart from
// HTTP; docs/protocol.md, "Relay-aggregator outcomes").
type Intake = outcome.Intake

// The outcomes (outcome.Accepted, ...).
const (
	IntakeAccepted  = outcome.Accepted
	IntakeDuplicate = outcome.Duplicate
	IntakeObsolete  = outcome.Obsolete
	IntakeInvalid   = outcome.Invalid
)

// HTTPStatus is the status code that carries outcome i: 200 accepted,
// 208 duplicate, 409 obsolete, 400 invalid.
func HTTPStatus(i Intake) int {
	switch i {
	case IntakeAccepted:
		return http.StatusOK
	case IntakeDuplicate:
		return http.StatusAlreadyReported
	case IntakeObsolete:
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// IntakeAnswer is the JSON body of an answer to POST /v1/abort
// (outcome.Answer).
type IntakeAnswer = outcome.Answer

// SecAggAnswer is the answer to a secure-summation frame
// (outcome.SecAggAnswer).
type SecAggAnswer = outcome.SecAggAnswer
