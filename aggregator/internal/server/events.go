package server

import (
	"encoding/json"
	"errors"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"net/http"
	"sync"
	"time"
)

// sseEvent is one server-sent event: its name and its JSON data (one
// line: encoding/json never emits a newline).
type sseEvent struct {
	name string
	data []byte
}

// subscriberBuffer is how many events a stream may lag behind before it
// is dropped (the browser's EventSource then reconnects and starts over
// with the current status).
const subscriberBuffer = 32

// Per-client limits of the /events streams: one network address may hold
// maxStreamsPerClient streams (a few tabs), and the operator (a request
// with the operator's session) may open operatorReserve streams beyond the
// global maximum, so that anonymous streams can never lock the teacher
// out of the live dashboard.
const (
	maxStreamsPerClient = 4
	operatorReserve     = 8
)

var (
	errTooManySubscribers = errors.New("too many event streams")
	errTooManyFromClient  = errors.New("too many event streams from this address")
	errEventsClosed       = errors.New("the server is shutting down")
)

// broker fans events out to the /events streams: publishing never blocks
// (a stream whose buffer is full is dropped), at most max anonymous
// streams are open at once, maxStreamsPerClient per client address, and
// up to operatorReserve more for the operator.
type broker struct {
	mu       sync.Mutex
	subs     map[chan sseEvent]string // stream -> client address
	byClient map[string]int
	anon     int // streams not opened by the operator
	max      int
	closed   bool
	operator map[chan sseEvent]bool
}

func newBroker(max int) *broker {
	return &broker{subs: map[chan sseEvent]string{}, byClient: map[string]int{}, operator: map[chan sseEvent]bool{}, max: max}
}

// subscribe opens a stream for client (its network address). Operator
// streams have their own operatorReserve and no per-client limit.
func (b *broker) subscribe(client string, operator bool) (chan sseEvent, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errEventsClosed
	}
	switch {
	case operator && len(b.subs)-b.anon >= operatorReserve:
		return nil, errTooManySubscribers
	case !operator && b.anon >= b.max:
		return nil, errTooManySubscribers
	case !operator && b.byClient[client] >= maxStreamsPerClient:
		return nil, errTooManyFromClient
	}
	ch := make(chan sseEvent, subscriberBuffer)
	b.subs[ch] = client
	b.byClient[client]++
	if operator {
		b.operator[ch] = true
	} else {
		b.anon++
	}
	return ch, nil
}

// drop removes ch from the counts; the caller holds mu.
func (b *broker) drop(ch chan sseEvent) {
	client, ok := b.subs[ch]
	if !ok {
		return
	}
	delete(b.subs, ch)
	if b.byClient[client]--; b.byClient[client] <= 0 {
		delete(b.byClient, client)
	}
	if b.operator[ch] {
		delete(b.operator, ch)
	} else {
		b.anon--
	}
}

// unsubscribe removes ch (a no-op if publish or close already dropped it).
func (b *broker) unsubscribe(ch chan sseEvent) {
	b.mu.Lock()
	b.drop(ch)
	b.mu.Unlock()
}

// active returns the number of open streams.
func (b *broker) active() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// publish queues ev on every stream; a stream that cannot take it is
// closed and dropped.
func (b *broker) publish(ev sseEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			close(ch)
			b.drop(ch)
		}
	}
}

// close ends every stream and refuses new ones.
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		close(ch)
		b.drop(ch)
	}
}

// CloseEvents ends every /events stream and refuses new ones; register it
// with http.Server.RegisterOnShutdown so that Shutdown need not wait for
// the long-lived streams.
func (s *Server) CloseEvents() { s.events.close() }

// publishChange sends a "round" event for every round the last commit
// finished and a "status" event; it costs nothing without subscribers.
func (s *Server) publishChange(finished []checkpoint.RoundRecord) {
	if s.events.active() == 0 {
		return
	}
	for _, r := range finished {
		if b, err := json.Marshal(r); err == nil {
			s.events.publish(sseEvent{name: "round", data: b})
		}
	}
	s.publishStatus()
}

func (s *Server) publishStatus() {
	if s.events.active() == 0 {
		return
	}
	if b, err := json.Marshal(s.Status()); err == nil {
		s.events.publish(sseEvent{name: "status", data: b})
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
	ch, err := s.events.subscribe(clientAddr(r), s.operatorSession(r))
	if err != nil {
		w.Header().Set("Retry-After", "10")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer s.events.unsubscribe(ch)
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
	event := func(ev sseEvent) bool {
		return send([]byte("event: "+ev.name+"\ndata: "), ev.data, []byte("\n\n"))
	}
	st, err := json.Marshal(s.Status())
	if err != nil || !send([]byte("retry: 5000\n\n")) || !event(sseEvent{name: "status", data: st}) {
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
