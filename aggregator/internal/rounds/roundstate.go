package rounds

import (
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/datastore"
)

// RoundState is a round's place in its life cycle, as the aggregator's
// datastore records it (bucket BucketRounds, one record per round),
// written in the same transaction as the state change that causes it:
//
//	announcing → announced → [collecting → closed →] applied
//	                                  ↘ aborted, refused, invalid, abandoned, lost
//
// collecting and closed are secure summation's: its chunks arrive, then
// the prepared round is persisted before the ledger's charge (a closed
// round whose release is in the ledger is charged; the ledger, not this
// record, is the truth about what was charged). The terminal states are
// the checkpoint's statuses (checkpoint.StatusOK is applied).
type RoundState string

// The round states.
const (
	StateAnnouncing RoundState = "announcing" // opened; the relay has not yet accepted the announcement
	StateAnnounced  RoundState = "announced"
	StateCollecting RoundState = "collecting" // secure summation: chunks prepared as they arrive
	StateClosed     RoundState = "closed"     // secure summation: prepared and persisted; the charge follows
	StateApplied    RoundState = "applied"    // ok: in the model
	StateAborted    RoundState = checkpoint.StatusAborted
	StateRefused    RoundState = checkpoint.StatusRefused
	StateInvalid    RoundState = checkpoint.StatusInvalid
	StateAbandoned  RoundState = checkpoint.StatusAbandoned
	StateLost       RoundState = checkpoint.StatusLost // charged, never applied
)

// Terminal reports whether no transition leaves s.
func (s RoundState) Terminal() bool {
	switch s {
	case StateApplied, StateAborted, StateRefused, StateInvalid, StateAbandoned, StateLost:
		return true
	}
	return false
}

// BucketRounds holds one RoundStatus per round (key: the round, %020d).
const BucketRounds = "aggregator/rounds"

// RoundStatus is a round's record in BucketRounds.
type RoundStatus struct {
	Round  int        `json:"round"`
	State  RoundState `json:"state"`
	Reason string     `json:"reason,omitempty"`
	At     time.Time  `json:"at"`
}

// order ranks the states along the life cycle: a record never moves
// back (a re-saved checkpoint after a chunk does not make a collecting
// round announced again).
func (s RoundState) order() int {
	switch s {
	case StateAnnouncing:
		return 1
	case StateAnnounced:
		return 2
	case StateCollecting:
		return 3
	case StateClosed:
		return 4
	}
	if s.Terminal() {
		return 5
	}
	return 0
}

// setRound moves round r to state s in tx, unless its record is already
// there or further along.
func setRound(tx *datastore.Tx, r int, s RoundState, reason string) error {
	var cur RoundStatus
	ok, err := datastore.GetJSON(tx, BucketRounds, roundKey(r), &cur)
	if err != nil {
		return err
	}
	if ok && (cur.State == s || cur.State.order() >= s.order()) {
		return nil
	}
	return datastore.PutJSON(tx, BucketRounds, roundKey(r), RoundStatus{Round: r, State: s, Reason: reason, At: time.Now().UTC()})
}

// stateOf maps a checkpoint's round record to its terminal state.
func stateOf(rec checkpoint.RoundRecord) RoundState {
	if rec.Status == checkpoint.StatusOK {
		return StateApplied
	}
	return RoundState(rec.Status)
}

// roundsOfState records, in tx, the states st implies: its open round
// announcing or announced, and every recorded round's terminal state.
func roundsOfState(tx *datastore.Tx, st *checkpoint.State) error {
	if o := st.Open; o != nil {
		s := StateAnnouncing
		if o.Announced {
			s = StateAnnounced
		}
		if err := setRound(tx, o.Round, s, ""); err != nil {
			return err
		}
	}
	for i := len(st.History) - 1; i >= 0; i-- {
		rec := st.History[i]
		var cur RoundStatus
		if ok, _ := datastore.GetJSON(tx, BucketRounds, roundKey(rec.Round), &cur); ok && cur.State.Terminal() {
			break // recorded before, and so are the earlier ones
		}
		if err := setRound(tx, rec.Round, stateOf(rec), rec.Detail); err != nil {
			return err
		}
	}
	return nil
}

// RoundStates returns the recorded round states, oldest first.
func (d *DBStore) RoundStates() ([]RoundStatus, error) {
	var out []RoundStatus
	err := d.db.View(func(tx *datastore.ReadTx) error {
		for _, k := range tx.Keys(BucketRounds) {
			var s RoundStatus
			if _, err := datastore.GetJSON(tx, BucketRounds, k, &s); err != nil {
				return fmt.Errorf("rounds: %w", err)
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}
