// Package events fans the aggregator's server-sent events (docs/web.md:
// the dashboard's live "status" and "round" events) out to the open
// streams, bounded: publishing never blocks (a stream whose buffer is full
// is dropped), at most a maximum of anonymous streams are open at once, a
// few per client address, and the operator has a reserve of its own.
package events

import (
	"errors"
	"sync"
)

// Event is one server-sent event: its name and its JSON data (one
// line: encoding/json never emits a newline).
type Event struct {
	Name string
	Data []byte
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

// Errors of Subscribe (the handler answers 503 with their text).
var (
	ErrTooManySubscribers = errors.New("too many event streams")
	ErrTooManyFromClient  = errors.New("too many event streams from this address")
	ErrClosed             = errors.New("the server is shutting down")
)

// Broker fans events out to the /events streams: publishing never blocks
// (a stream whose buffer is full is dropped), at most max anonymous
// streams are open at once, maxStreamsPerClient per client address, and
// up to operatorReserve more for the operator.
type Broker struct {
	mu       sync.Mutex
	subs     map[chan Event]string // stream -> client address
	byClient map[string]int
	anon     int // streams not opened by the operator
	max      int
	closed   bool
	operator map[chan Event]bool
}

// New returns a broker allowing max anonymous streams.
func New(max int) *Broker {
	return &Broker{subs: map[chan Event]string{}, byClient: map[string]int{}, operator: map[chan Event]bool{}, max: max}
}

// Subscribe opens a stream for client (its network address). Operator
// streams have their own operatorReserve and no per-client limit.
func (b *Broker) Subscribe(client string, operator bool) (chan Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	switch {
	case operator && len(b.subs)-b.anon >= operatorReserve:
		return nil, ErrTooManySubscribers
	case !operator && b.anon >= b.max:
		return nil, ErrTooManySubscribers
	case !operator && b.byClient[client] >= maxStreamsPerClient:
		return nil, ErrTooManyFromClient
	}
	ch := make(chan Event, subscriberBuffer)
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
func (b *Broker) drop(ch chan Event) {
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

// Unsubscribe removes ch (a no-op if publish or close already dropped it).
func (b *Broker) Unsubscribe(ch chan Event) {
	b.mu.Lock()
	b.drop(ch)
	b.mu.Unlock()
}

// Active returns the number of open streams.
func (b *Broker) Active() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Publish queues ev on every stream; a stream that cannot take it is
// closed and dropped.
func (b *Broker) Publish(ev Event) {
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

// Close ends every stream and refuses new ones.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		close(ch)
		b.drop(ch)
	}
}
