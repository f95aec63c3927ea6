//go:build js

package browser

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"syscall/js"
	"time"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/wire"
)

// receiptPath is the relay's GET /api/receipt (docs/web.md).
const receiptPath = "/api/receipt"

// How long and how often a page asks whether its report went into a
// round's sum: the relay settles a round when the aggregator answered
// (seconds after the deadline), so a few minutes cover a slow round.
const (
	receiptEvery = 3 * time.Second
	receiptFor   = 5 * time.Minute
)

// receiptTransport passes frames through and, for every secure-summation
// Shares frame it sends, asks the relay whether that report went into the
// round's sum (wire.ReportReceipt of its helper share: only this page and
// the relay know it), reporting the answer as a "receipt" event.
type receiptTransport struct {
	client.Transport
	a *app
}

func (t *receiptTransport) Send(ctx context.Context, frame []byte) error {
	err := t.Transport.Send(ctx, frame)
	if err != nil {
		return err
	}
	if round, helper, ok := wire.SharesHelper(frame); ok {
		id := wire.ReportReceipt(helper)
		// Not the run's context: the answer is worth having after Stop
		// (or the end of training) too.
		go t.a.pollReceipt(round, hex.EncodeToString(id[:]))
	}
	return nil
}

// pollReceipt asks the relay about one report until the round is settled
// (or receiptFor passed) and emits {kind: "receipt", round, state, why}.
func (a *app) pollReceipt(round uint64, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), receiptFor)
	defer cancel()
	path := receiptPath + "?round=" + strconv.FormatUint(round, 10) + "&report=" + id
	state, why := "unknown", ""
	for {
		st, w, err := fetchReceipt(path)
		if err == nil && st != "pending" {
			state, why = st, w
			break
		}
		t := time.NewTimer(receiptEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			a.emitMap(map[string]any{"kind": "receipt", "round": float64(round), "state": state, "why": "the relay did not say in time"})
			return
		case <-t.C:
		}
	}
	a.emitMap(map[string]any{"kind": "receipt", "round": float64(round), "state": state, "why": why})
}

// fetchReceipt GETs one receipt answer.
func fetchReceipt(path string) (state, why string, err error) {
	resp, err := fetchResponse(path)
	if err != nil {
		return "", "", err
	}
	obj, err := await(resp.Call("json"))
	if err != nil {
		return "", "", fmt.Errorf("fetch %s: %w", receiptPath, err)
	}
	if obj.Type() != js.TypeObject {
		return "", "", fmt.Errorf("fetch %s: not a JSON object", receiptPath)
	}
	str := func(name string) string {
		if v := obj.Get(name); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	return str("state"), str("why"), nil
}

// emitMap hands one event object to every listener; a listener that
// throws does not stop the client.
func (a *app) emitMap(m map[string]any) {
	a.mu.Lock()
	ls := append([]js.Value(nil), a.listeners...)
	a.mu.Unlock()
	if len(ls) == 0 {
		return
	}
	obj := js.ValueOf(m)
	for _, l := range ls {
		_ = try(func() { l.Invoke(obj) })
	}
}

// clientEvent emits a client event; an announcement also carries the
// running protocol ("secagg", "ss-topk", ...), so the page offers a
// personal privacy level only where it applies.
func (a *app) clientEvent(e client.Event) {
	m := a.session.Record(e).Map()
	if e.Kind == client.EventAnnouncement {
		m["protocol"] = e.Params.Protocol.String()
	}
	a.emitMap(m)
}
