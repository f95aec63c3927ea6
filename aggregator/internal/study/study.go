// Package study builds the record a researcher publishes beside a model
// trained by Blanket: what was agreed to (the task definition's hash),
// what the volunteers ran (the wasm module's hash), what produced it (the
// software's version), what it cost in privacy (ε, δ and the accountant's
// row that proves it) and with which protocol parameters, and a table of
// the rounds as CSV. Everything in it is already public: GET /api/task,
// /api/wasm, /api/status and /api/rounds serve each part.
package study

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/task"
)

// Software names the build that serves the study: the main module's path
// and version, and the VCS revision, time and dirty flag the Go toolchain
// stamped into the binary (empty when it stamped none: `go run`, tests).
type Software struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"vcs_revision,omitempty"`
	Time      string `json:"vcs_time,omitempty"`
	Modified  bool   `json:"vcs_modified,omitempty"`
}

// Build returns this binary's Software.
func Build() Software {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Software{}
	}
	s := Software{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			s.Revision = kv.Value
		case "vcs.time":
			s.Time = kv.Value
		case "vcs.modified":
			s.Modified = kv.Value == "true"
		}
	}
	return s
}

// PublicTask returns the task definition exactly as GET /api/task serves
// it (without the operator's file paths, holdout and simulation) and the
// hex SHA-256 of those bytes: `curl …/api/task | sha256sum` gives the
// hash a record names.
func PublicTask(t *task.Task) ([]byte, string, error) {
	c := *t
	c.Holdout, c.Simulation = "", ""
	b, err := json.MarshalIndent(&c, "", " ")
	if err != nil {
		return nil, "", fmt.Errorf("study: the task definition: %w", err)
	}
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// Record is what a study publishes beside its model (the "study" object of
// GET /api/export).
type Record struct {
	// TaskSHA256 is PublicTask's hash: the definition the volunteers were
	// shown (title, consent text, features, label) and trained on.
	TaskSHA256 string `json:"task_sha256"`
	// WasmSHA256 is the client module's hash the aggregator serves (and
	// the relay's join page shows), "" when it serves none.
	WasmSHA256 string `json:"wasm_sha256,omitempty"`
	// AggregatorKey is the fingerprint of the key that signed every
	// announcement.
	AggregatorKey string   `json:"aggregator_key"`
	Software      Software `json:"software"`
	// Epsilon and Delta are the ledger's spent (ε, δ) over every charged
	// round, by the accountant row Method (docs/privacy.md); the target is
	// the budget the ledger never exceeds.
	Epsilon       float64 `json:"epsilon"`
	Delta         float64 `json:"delta"`
	Method        string  `json:"method"`
	TargetEpsilon float64 `json:"target_epsilon"`
	TargetDelta   float64 `json:"target_delta"`
	// Protocol is the round's parameters as announced (clip, σ, check-in
	// rate, minimum batch, quota …) and ServerLR the server's step.
	Protocol checkpoint.Params `json:"protocol"`
	ServerLR float64           `json:"server_lr"`
	// Rounds is the last finished round, RoundsOK those that updated the
	// model.
	Rounds   int `json:"rounds"`
	RoundsOK int `json:"rounds_ok"`
	// Consent is the consent text the volunteers agreed to and its hash:
	// every report the aggregator opened was sealed under that hash
	// (ConsentOf).
	Consent Consent `json:"consent"`
}

// Consent names the consent text of a study: the text itself, its
// task.ConsentHash (hex) and the short version the join page shows beside
// the consent box.
type Consent struct {
	SHA256  string `json:"sha256"`
	Version string `json:"version"`
	Text    string `json:"text"`
}

// ConsentOf is the consent record of the task t. What it proves: secure
// summation's leader shares are sealed under an HPKE info that carries
// SHA256 (envelope.ShareInfo) and the aggregator opens them only under
// its own task's hash, so every report this study's sum holds was sealed
// by a client that held the hash of Text, the text the join page shows
// beside its required checkbox. It does not prove that a person read the
// text (docs/threat-model.md, "Consent").
func ConsentOf(t *task.Task) Consent {
	h := task.ConsentHash(t)
	c := Consent{SHA256: hex.EncodeToString(h[:]), Version: task.ConsentVersion(h)}
	if t != nil {
		c.Text = t.Consent
	}
	return c
}

// roundsHeader is RoundsCSV's first line.
var roundsHeader = []string{"round", "status", "reports", "accepted", "checked_in", "population", "accuracy", "loss",
	"epsilon", "method", "announced_at", "finished_at", "detail"}

// RoundsCSV writes one row per round (GET /api/rounds.csv): its outcome,
// its counts, the accuracy and loss on the public holdout after it (empty
// without one), the ledger's cumulative ε after it and by which row, and
// its times (RFC 3339, UTC).
func RoundsCSV(w io.Writer, recs []checkpoint.RoundRecord) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(roundsHeader); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	num := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	for _, r := range recs {
		reports := r.Reports
		if reports == 0 {
			reports = r.N
		}
		row := []string{strconv.Itoa(r.Round), r.Status, strconv.Itoa(reports), strconv.Itoa(r.Accepted),
			strconv.Itoa(r.CheckedIn), strconv.Itoa(r.Population), num(r.Accuracy), num(r.Loss),
			num(r.EpsilonTightest), r.Method, at(r.AnnouncedAt), at(r.FinishedAt), r.Detail}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("study: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	return nil
}
