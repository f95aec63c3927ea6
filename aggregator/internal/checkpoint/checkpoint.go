// Package checkpoint is the aggregator's state file: the model, the round
// history (the records GET /api/rounds serves), the open round, the batch
// being charged and the privacy ledger's head. It is written atomically
// after every change of round state (temporary file, fsync, rename,
// directory fsync); VerifyLedger refuses to start on a ledger that lost
// records the checkpoint relies on (a rollback would under-count the
// privacy spent).
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/shared/durable"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Round statuses in the history.
const (
	StatusOK        = "ok"        // charged, decrypted, model updated
	StatusAborted   = "aborted"   // the relay aborted it: nothing charged
	StatusRefused   = "refused"   // the ledger refused the batch's release: nothing decrypted
	StatusInvalid   = "invalid"   // the batch was rejected before charging
	StatusAbandoned = "abandoned" // no batch or abort arrived in time: nothing charged
	StatusLost      = "lost"      // charged in the ledger but not applied (crash between charge and checkpoint)
)

// RoundRecord is one round of the history (GET /api/rounds and the
// checkpoint).
type RoundRecord struct {
	Round       int       `json:"round"`
	Status      string    `json:"status"`
	Detail      string    `json:"detail,omitempty"`
	AnnouncedAt time.Time `json:"announced_at,omitzero"`
	Deadline    time.Time `json:"deadline,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// ClosedAt is when the relay's close of a secure-summation round
	// reached the aggregator (FinishedAt minus ClosedAt is the work left
	// at the close: the charge, the relay's noisy share, unsharding and
	// the model update).
	ClosedAt time.Time `json:"closed_at,omitzero"`
	// Accuracy and Loss of the model after the round on the held-out test
	// set (null when the round did not update the model).
	Accuracy *float64 `json:"accuracy"`
	Loss     *float64 `json:"loss"`
	// Batch counts: N is the estimator's n (clients whose complete report
	// is in the batch), NP the realized padding per dimension.
	N           int     `json:"n"`
	NP          int     `json:"n_p"`
	CheckedIn   int     `json:"checked_in"`
	Population  int     `json:"population"`
	CheckInRate float64 `json:"check_in_rate"`
	Messages    int     `json:"messages,omitempty"`
	// Reports is a secure-summation batch's report count (N is the
	// accepted reports, the n of the sum).
	Reports int `json:"reports,omitempty"`
	// Accepted, RejectedOpen and RejectedValue are the BatchReply counts.
	Accepted      int `json:"accepted"`
	RejectedOpen  int `json:"rejected_open"`
	RejectedValue int `json:"rejected_value"`
	// Rejections counts a secure-summation batch's rejected reports by
	// reason (secagg.Reason; RejectedValue is their total and
	// RejectedOpen the leader shares that did not open).
	Rejections map[string]int `json:"rejections,omitempty"`
	// Epsilon is the cumulative guarantee after this round by every
	// accounting method (privacy.Account's rows), EpsilonTightest and
	// Method the ledger's (the tightest valid method without caveat).
	Epsilon         []accounting.EpsilonRow `json:"epsilon,omitempty"`
	EpsilonTightest *float64                `json:"epsilon_tightest,omitempty"`
	Method          string                  `json:"method,omitempty"`
	// Digest is the SHA-256 of the batch frame (hex), so that a re-sent
	// identical batch is answered with the same reply.
	Digest  string  `json:"digest,omitempty"`
	Reply   *uint8  `json:"reply_status,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	// Counts are a secure-summation round's private count blocks
	// (shared/counts: the evaluation, survey answers), decoded noisy sums
	// over the N accepted reports, with each block's noise and bound.
	Counts *CountsRecord `json:"counts,omitempty"`
}

// CountsRecord is one round's released count blocks.
type CountsRecord struct {
	// N is the number of accepted reports the sums are over (the
	// update's n: a report is accepted only with every block).
	N      int                `json:"n"`
	Blocks []CountBlockRecord `json:"blocks"`
}

// CountBlockRecord is one block of a round: what it counts, its noise
// and bound (for the audit: the joint release's parts), and its decoded
// noisy sums.
type CountBlockRecord struct {
	// Kind is "eval" or "question"; Rows is an evaluation's R, Options
	// a question's k.
	Kind    string `json:"kind"`
	Rows    int    `json:"rows,omitempty"`
	Options int    `json:"options,omitempty"`
	// Sigma is each server's discrete Gaussian σ, Sensitivity the
	// block's L2 bound Δ and D its dimension, in the block's fixed-point
	// units (privacy.SecAggPart); CountSD the noise's standard deviation
	// on each decoded count (counts.Block.CountSD, both servers).
	Sigma       float64 `json:"sigma"`
	Sensitivity float64 `json:"sensitivity"`
	D           int     `json:"d"`
	CountSD     float64 `json:"count_sd"`
	// Counts are the decoded noisy sums: correct, evaluated (eval); every
	// option's count, the real ones first, then the phantom options no
	// honest volunteer picks (question).
	Counts []float64 `json:"counts"`
}

// Open is an announced round still waiting for its batch or abort.
type Open struct {
	Round       int       `json:"round"`
	AnnouncedAt time.Time `json:"announced_at"`
	Deadline    time.Time `json:"deadline"`
	// Announced is set once the relay accepted the announcement.
	Announced bool `json:"announced"`
}

// State is the state file: written atomically after every change of
// round state (temporary file, fsync, rename, directory fsync).
type State struct {
	Version int `json:"version"`
	// Round is the last finished round (any status): Model is the model
	// after every ok round up to it.
	Round  int       `json:"round"`
	Params Params    `json:"params"`
	Model  []float64 `json:"model"`
	// Momentum is the server optimiser's momentum after Round (FedAvgM:
	// m = β m + Δ, x += η m; rounds.Optimizer), empty for plain SGD or
	// before the first update: part of the model state, so that a restart
	// resumes with it. A model reset clears it.
	Momentum []float64     `json:"momentum,omitempty"`
	History  []RoundRecord `json:"history"`
	Open     *Open         `json:"open,omitempty"`
	// ModelResets are the rounds after which the operator reset the
	// model to zero (the ledger is never reset).
	ModelResets []int `json:"model_resets,omitempty"`
	// LedgerRecords and LedgerHead are the privacy ledger's head
	// (ledger.Ledger.Head) when the checkpoint was written: on start the
	// ledger must still hold those records (ledger.Ledger.Verify), or the
	// aggregator refuses to start (a truncated, emptied or rewritten
	// ledger would under-count the privacy spent).
	LedgerRecords int    `json:"ledger_records,omitempty"`
	LedgerHead    string `json:"ledger_head,omitempty"`
	// Charging is the batch being charged: written before the ledger
	// charge and cleared with the round's record, so that a restart in
	// between can apply an identical re-send without charging again.
	Charging *Charging `json:"charging,omitempty"`
}

// Charging identifies the batch of a round being charged.
type Charging struct {
	Round  int    `json:"round"`
	Digest string `json:"digest"`
	// SecAgg: a secure-summation batch, which is not re-applied after a
	// restart (the leader's state was in memory only).
	SecAgg bool `json:"secagg,omitempty"`
}

// LedgerHead returns l's head as the checkpoint stores it.
func LedgerHead(l *ledger.Ledger) (int, string) {
	if l == nil {
		return 0, ""
	}
	h := l.Head()
	return int(h.Count), ledger.Hash(h.Hash).String()
}

// VerifyLedger refuses a ledger that lost records the checkpoint relies
// on: one behind or diverging from the stored head, or (checkpoints
// written before the head was stored) one holding fewer records than the
// history's charged rounds (ok or lost).
func (c *State) VerifyLedger(l *ledger.Ledger) error {
	if c.LedgerHead != "" {
		h, err := ledger.ParseHash(c.LedgerHead)
		if err != nil {
			return fmt.Errorf("checkpoint: checkpoint ledger head: %w", err)
		}
		if err := l.Verify(wire.Head{Count: uint64(c.LedgerRecords), Hash: h}); err != nil {
			return fmt.Errorf("checkpoint: refusing to start: %w", err)
		}
	}
	charged := 0
	for _, r := range c.History {
		if r.Status == StatusOK || r.Status == StatusLost {
			charged++
		}
	}
	if n := int(l.Head().Count); n < charged {
		return fmt.Errorf("checkpoint: refusing to start: %w: the checkpoint lists %d charged rounds, the ledger holds %d records", ledger.ErrRollback, charged, n)
	}
	return nil
}

// Version is the checkpoint format written and accepted.
const Version = 1

// Params is wire.Params with names (for the checkpoint and the API).
type Params struct {
	Protocol   string  `json:"protocol"`
	Randomizer string  `json:"randomizer"`
	D          uint32  `json:"d"`
	K          uint32  `json:"k"`
	L          uint32  `json:"l"`
	Width      uint32  `json:"width"`
	NP         uint32  `json:"n_p"`
	Buckets    uint32  `json:"buckets,omitempty"`
	MinBatch   uint32  `json:"min_batch"`
	Quota      uint32  `json:"quota"`
	EpsL       float64 `json:"eps_l"`
	DeltaL     float64 `json:"delta_l"`
	Clip       float64 `json:"clip"`
	CheckInP   float64 `json:"check_in_p"`
	Messages   int     `json:"messages_per_client"`
	// Secure summation: bits per entry and each server's sigma.
	Bits  uint32  `json:"bits,omitempty"`
	Sigma float64 `json:"sigma,omitempty"`
}

// ParamsOf names p's fields.
func ParamsOf(p wire.Params) Params {
	return Params{Protocol: p.Protocol.String(), Randomizer: p.Randomizer.String(), D: p.D, K: p.K, L: p.L,
		Width: p.Width, NP: p.NP, Buckets: p.Buckets, MinBatch: p.MinBatch, Quota: p.Quota, EpsL: p.EpsL,
		DeltaL: p.DeltaL, Clip: p.Clip, CheckInP: p.CheckInP, Messages: p.Messages(), Bits: p.Bits, Sigma: p.Sigma}
}

// Load reads the checkpoint at path and checks it (version, rounds,
// a finite model); a missing file returns (nil, nil).
func Load(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: reading checkpoint: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c State
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("checkpoint: checkpoint %s: %w", path, err)
	}
	if c.Version != Version {
		return nil, fmt.Errorf("checkpoint: checkpoint %s: version %d, want %d", path, c.Version, Version)
	}
	if c.Round < 0 || (c.Open != nil && c.Open.Round <= c.Round) {
		return nil, fmt.Errorf("checkpoint: checkpoint %s: inconsistent rounds (last %d, open %v)", path, c.Round, c.Open)
	}
	for _, v := range c.Model {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("checkpoint: checkpoint %s: non-finite model parameter", path)
		}
	}
	if err := c.CheckMomentum(); err != nil {
		return nil, fmt.Errorf("checkpoint: checkpoint %s: %w", path, err)
	}
	return &c, nil
}

// CheckMomentum checks the momentum: empty, or finite and as long as the
// model.
func (c *State) CheckMomentum() error {
	if len(c.Momentum) == 0 {
		return nil
	}
	if len(c.Momentum) != len(c.Model) {
		return fmt.Errorf("momentum of %d coordinates for a model of %d", len(c.Momentum), len(c.Model))
	}
	for _, v := range c.Momentum {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("non-finite momentum")
		}
	}
	return nil
}

// Save writes the checkpoint atomically.
func (c *State) Save(path string) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("checkpoint: encoding checkpoint: %w", err)
	}
	if err := durable.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("checkpoint: writing checkpoint: %w", err)
	}
	return nil
}
