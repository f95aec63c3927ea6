package sumrelay

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestRoundLogNamesClassAndRound: every secure-summation log line goes
// through roundLog, which carries the class (when the relay knows it) and
// the round.
func TestRoundLogNamesClassAndRound(t *testing.T) {
	var buf bytes.Buffer
	rl := &Relay{cfg: Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Class: func() string { return "ab12" }}}
	rl.roundLog(7).Warn("reports dropped", "dropped", 3)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["class"] != "ab12" || rec["round"] != float64(7) || rec["dropped"] != float64(3) {
		t.Fatalf("log line %v", rec)
	}
	buf.Reset()
	rl.cfg.Class = nil
	rl.roundLog(8).Info("x")
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["round"] != float64(8) {
		t.Fatalf("without a class: %s (%v)", buf.Bytes(), err)
	}
}
