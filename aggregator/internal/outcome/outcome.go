// Package outcome names the definitive answers the aggregator gives the
// relay's posts (docs/protocol.md, "Relay-aggregator outcomes"), apart
// from HTTP: the round state machine (aggregator/internal/rounds) decides
// them, the HTTP API (aggregator/internal/api) carries them as status
// codes and a header.
package outcome

// Intake is the definitive outcome of a batch, an abort or a
// secure-summation frame the relay posts. The relay removes a frame from
// its outbox on any of them and never sends it again; only an internal
// failure or no answer makes it resend the same bytes.
type Intake string

const (
	// Accepted: processed now (a batch's reply status says how: ok,
	// refused by the budget, or invalid after its charge).
	Accepted Intake = "accepted"
	// Duplicate: this frame was already processed (a resend whose answer
	// was lost); a batch gets its stored reply again.
	Duplicate Intake = "duplicate"
	// Obsolete: the round is closed here another way (abandoned, aborted,
	// lost, another batch) or is not the open round.
	Obsolete Intake = "obsolete"
	// Invalid: the bytes can never be processed (not a frame of the kind,
	// malformed, disagreeing with the round's parameters).
	Invalid Intake = "invalid"
)

// Answer is an outcome with its round and, in words, why (the JSON body of
// an answer to POST /v1/abort).
type Answer struct {
	Round   uint64 `json:"round"`
	Outcome Intake `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// SecAggAnswer is the answer to a secure-summation frame: the outcome and,
// for a frame of a known round, the reply frame (SecAggPrep, SecAggCharged);
// otherwise (aggregates, and bytes that are not a frame of a round) the
// JSON Answer.
type SecAggAnswer struct {
	Answer
	Frame []byte
}
