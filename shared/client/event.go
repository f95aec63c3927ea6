package client

import (
	"time"

	"github.com/blanket-fl/blanket/shared/wire"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EventAnnouncement: a correctly signed, valid announcement arrived
	// (Round, Params).
	EventAnnouncement EventKind = iota + 1
	// EventRejected: an announcement was rejected (bad signature, a key
	// other than the pinned one, malformed, unusable parameters, replayed
	// or expired round); Err says why. Nothing was sent for it.
	EventRejected
	// EventSatOut: the client's own check-in coin said no for Round.
	EventSatOut
	// EventCheckedIn: the coin said yes; the CheckIn frame is sent and
	// training starts (once a Pool slot is free).
	EventCheckedIn
	// EventTraining: local training progress, Progress in [0, 1].
	EventTraining
	// EventSent: all Messages Report frames of Round (secure summation:
	// the one Shares frame) were handed to the transport, each FrameBytes long; NoiseStd is the
	// noise of one reported coordinate.
	EventSent
	// EventPrivacy: the client's own guarantee over all the rounds it
	// reported in (Epsilon, Delta, Rounds).
	EventPrivacy
	// EventAck: the relay acknowledged a report frame (AckStatus,
	// Received); Err is non-nil when the status is not "accepted".
	EventAck
	// EventFailed: a round the client checked in to could not be
	// completed (training diverged, encoding or sealing failed, or a
	// later round was announced first: ErrSuperseded); Err says why.
	// Nothing but its CheckIn was sent for it.
	EventFailed
	// EventConnected: RunWithReconnect established a transport.
	EventConnected
	// EventDisconnected: the transport failed (Err); RunWithReconnect
	// waits Backoff before dialing again.
	EventDisconnected
	// EventEvaluated: before training, the announced model was evaluated
	// on the volunteer's own rows for the round's private evaluation
	// block (Correct of Evaluated rows, Accuracy = Correct/Evaluated).
	// This is for the volunteer's eyes only: what leaves the device is
	// the secret-shared block, which only the two servers' noisy sum over
	// all volunteers reveals.
	EventEvaluated
)

var eventNames = [...]string{
	EventAnnouncement: "announcement",
	EventRejected:     "rejected",
	EventSatOut:       "sat-out",
	EventCheckedIn:    "checked-in",
	EventTraining:     "training",
	EventSent:         "sent",
	EventPrivacy:      "privacy",
	EventAck:          "ack",
	EventFailed:       "failed",
	EventConnected:    "connected",
	EventDisconnected: "disconnected",
	EventEvaluated:    "evaluated",
}

// String returns the kind's name.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one progress report of a Client, for a user interface. Only the
// fields named in the Kind's documentation are set.
type Event struct {
	Kind  EventKind
	Round uint64
	// Params are the announced round parameters (EventAnnouncement).
	Params wire.Params
	// LocalEps is the local budget of one report this client randomizes
	// at: the volunteer's personal level when it applies, else the
	// announced EpsL (EventAnnouncement).
	LocalEps float64
	// Progress is the fraction of local training done (EventTraining).
	Progress float64
	// Messages is the number of Report frames sent and FrameBytes the size
	// of each (EventSent); all of a round's frames have the same size.
	Messages   int
	FrameBytes int
	// NoiseStd is the standard deviation of the randomizer's noise on
	// one reported coordinate, after the analyzer's de-biasing, in the
	// units of the model update (EventSent); see noiseStd.
	NoiseStd float64
	// Epsilon and Delta are the client's own (ε, δ) over the Rounds rounds
	// it reported in, in the local model (EventPrivacy); see
	// Client.Privacy.
	Epsilon float64
	Delta   float64
	Rounds  int
	// Work is what this round cost the volunteer's device (EventSent).
	Work Work
	// AckStatus and Received are the fields of an Ack (EventAck).
	AckStatus uint8
	Received  int
	// Backoff is the wait before the next dial (EventDisconnected).
	Backoff time.Duration
	// Correct, Evaluated and Accuracy are the volunteer's own evaluation
	// of the announced model (EventEvaluated).
	Correct, Evaluated int
	Accuracy           float64
	// Err explains EventRejected, EventFailed, EventDisconnected and a
	// non-accepted EventAck.
	Err error
}

// Work is the time a round's report took on the client, phase by phase:
// local training, encoding (the shuffle protocols' randomizer, or secure
// summation's clip, quantize and shard), sealing to the servers' keys,
// and the client's own privacy accounting. Each is the wall-clock time of
// the one goroutine that ran it, waiting excluded (the Pool slot is taken
// before Train starts); in a browser the wasm module runs on one thread,
// so it is the tab's CPU time when nothing else competes for it.
type Work struct {
	Train, Encode, Seal, Account time.Duration
}

// Total is the sum of the phases.
func (w Work) Total() time.Duration { return w.Train + w.Encode + w.Seal + w.Account }
