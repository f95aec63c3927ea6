package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/events"
	"github.com/blanket-fl/blanket/aggregator/internal/operator"
)

// CloseEvents ends every /events stream and refuses new ones; register it
// with http.Server.RegisterOnShutdown so that Shutdown need not wait for
// the long-lived streams.
func (s *Server) CloseEvents() { s.events.Close() }

// publishChange sends a "round" event for every round the last commit
// finished and a "status" event; it costs nothing without subscribers.
func (s *Server) publishChange(finished []checkpoint.RoundRecord) {
	if s.events.Active() == 0 {
		return
	}
	for _, r := range finished {
		if b, err := json.Marshal(r); err == nil {
			s.events.Publish(events.Event{Name: "round", Data: b})
		}
	}
	s.publishStatus()
}

func (s *Server) publishStatus() {
	if s.events.Active() == 0 {
		return
	}
	if b, err := json.Marshal(s.Status()); err == nil {
		s.events.Publish(events.Event{Name: "status", Data: b})
	}
}

// sseWriteTimeout bounds one write to a stream: a client that stops
// reading is disconnected instead of holding the handler.
const sseWriteTimeout = 30 * time.Second

// serveEvents is GET /events: server-sent events, "status" (the JSON of
// GET /api/status) first and on every change, "round" (the JSON of the
// round's record) after every finished round, and a comment line every
// heartbeat so proxies keep the stream open. The stream ends when the
// client goes away, falls too far behind, or the server shuts down.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	ch, err := s.events.Subscribe(operator.ClientAddr(r), s.auth.Session(r))
	if err != nil {
		w.Header().Set("Retry-After", "10")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer s.events.Unsubscribe(ch)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(chunks ...[]byte) bool {
		// Errors setting a deadline only mean the writer has none.
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		for _, c := range chunks {
			if _, err := w.Write(c); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	event := func(ev events.Event) bool {
		return send([]byte("event: "+ev.Name+"\ndata: "), ev.Data, []byte("\n\n"))
	}
	st, err := json.Marshal(s.Status())
	if err != nil || !send([]byte("retry: 5000\n\n")) || !event(events.Event{Name: "status", Data: st}) {
		return
	}
	tick := time.NewTicker(s.cfg.Web.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok || !event(ev) {
				return
			}
		case <-tick.C:
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}
