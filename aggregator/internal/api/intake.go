package api

import "net/http"

// OutcomeHeader names the outcome (Intake) of a batch or an abort.
const OutcomeHeader = "Blanket-Outcome"

// Intake is the definitive outcome of a batch or an abort the relay posts
// (docs/protocol.md, "Relay-aggregator outcomes"). The relay removes a
// frame from its outbox on any of them and never sends it again; only an
// internal failure (HTTP 500) or no answer makes it resend the same bytes.
type Intake string

const (
	// IntakeAccepted: processed now (a batch's reply status says how:
	// ok, refused by the budget, or invalid after its charge).
	IntakeAccepted Intake = "accepted"
	// IntakeDuplicate: this frame was already processed (a resend whose
	// answer was lost); a batch gets its stored reply again.
	IntakeDuplicate Intake = "duplicate"
	// IntakeObsolete: the round is closed here another way (abandoned,
	// aborted, lost, another batch) or is not the open round.
	IntakeObsolete Intake = "obsolete"
	// IntakeInvalid: the bytes can never be processed (not a frame of the
	// kind, malformed, disagreeing with the round's parameters).
	IntakeInvalid Intake = "invalid"
)

// HTTPStatus is the status code that carries the outcome: 200 accepted,
// 208 duplicate, 409 obsolete, 400 invalid.
func (i Intake) HTTPStatus() int {
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

// IntakeAnswer is the JSON body of an answer to POST /v1/abort.
type IntakeAnswer struct {
	Round   uint64 `json:"round"`
	Outcome Intake `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// SecAggAnswer is the answer to a secure-summation frame: the outcome of
// docs/protocol.md and, for a batch of a known round, the SecAggPrep
// frame; otherwise (aggregates, and bytes that are not a batch of a
// round) the JSON IntakeAnswer.
type SecAggAnswer struct {
	IntakeAnswer
	Frame []byte
}
