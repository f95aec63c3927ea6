// Package events fans the aggregator's server-sent events (docs/web.md:
// the dashboard's live "status" and "round" events) out to the open
// streams, bounded: publishing never blocks (a stream whose buffer is full
// is dropped), at most a maximum of anonymous streams are open at once,
// shared fairly between client addresses, and the operator has a reserve
// of its own.
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

// Limits of the /events streams. The anonymous streams (at most the
// broker's max) are shared fairly between client addresses: one address
// may hold up to PerClient(max) of them (three quarters: a classroom
// behind one NAT, or a few tabs each), and when they are all taken a
// stream from an address holding fewer than the largest holder minus one
// takes the largest holder's newest stream (which ends; its EventSource
// retries in 5 s and is admitted only if it is then short of its share).
// So anonymous streams from A addresses end at max/A each, give or take
// one, and no set of addresses can lock a new one out unless there are max
// of them. The operator (a request with the operator's session) has
// OperatorReserve streams beyond max that are never taken.
const (
	OperatorReserve = 8
)

// PerClient is the most anonymous streams one address may hold with n
// in all: three quarters of n (at least 1). docs/threat-model.md states it
// for the default n (aggregator/internal/server TestThreatModelEventFigure).
func PerClient(n int) int { return max(1, n-n/4) }

// Errors of Subscribe (the handler answers 503 with their text).
var (
	ErrTooManySubscribers = errors.New("too many event streams")
	ErrTooManyFromClient  = errors.New("too many event streams from this address")
	ErrClosed             = errors.New("the server is shutting down")
)

// stream is one open stream.
type stream struct {
	client   string
	seq      uint64 // opening order
	operator bool
}

// Broker fans events out to the /events streams: publishing never blocks
// (a stream whose buffer is full is dropped), at most max anonymous
// streams are open at once, shared fairly between client addresses (see
// PerClient), and up to OperatorReserve more for the operator.
type Broker struct {
	mu       sync.Mutex
	subs     map[chan Event]stream
	byClient map[string]int // anonymous streams per client address
	anon     int            // streams not opened by the operator
	max      int
	seq      uint64
	closed   bool
}

// New returns a broker allowing max anonymous streams.
func New(max int) *Broker {
	return &Broker{subs: map[chan Event]stream{}, byClient: map[string]int{}, max: max}
}

// Subscribe opens a stream for client (its network address). Operator
// streams have their own OperatorReserve and no per-client limit. When
// the anonymous streams are all taken, an anonymous client holding at
// least two fewer than the largest holder takes that holder's newest
// stream (which is closed: its handler ends).
func (b *Broker) Subscribe(client string, operator bool) (chan Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	switch {
	case operator && len(b.subs)-b.anon >= OperatorReserve:
		return nil, ErrTooManySubscribers
	case !operator && b.byClient[client] >= PerClient(b.max):
		return nil, ErrTooManyFromClient
	case !operator && b.anon >= b.max:
		victim, ok := b.largest(client)
		if !ok {
			return nil, ErrTooManySubscribers
		}
		close(victim)
		b.drop(victim)
	}
	ch := make(chan Event, subscriberBuffer)
	b.seq++
	b.subs[ch] = stream{client: client, seq: b.seq, operator: operator}
	if !operator {
		b.byClient[client]++
		b.anon++
	}
	return ch, nil
}

// largest returns the newest anonymous stream of the address holding the
// most, if that address holds at least two more than client; the caller
// holds mu.
func (b *Broker) largest(client string) (chan Event, bool) {
	top, n := "", 0
	for c, k := range b.byClient {
		if k > n || (k == n && c < top) {
			top, n = c, k
		}
	}
	if n < b.byClient[client]+2 {
		return nil, false
	}
	var victim chan Event
	var seq uint64
	for ch, st := range b.subs {
		if !st.operator && st.client == top && st.seq >= seq {
			victim, seq = ch, st.seq
		}
	}
	return victim, victim != nil
}

// drop removes ch from the counts; the caller holds mu.
func (b *Broker) drop(ch chan Event) {
	st, ok := b.subs[ch]
	if !ok {
		return
	}
	delete(b.subs, ch)
	if st.operator {
		return
	}
	if b.byClient[st.client]--; b.byClient[st.client] <= 0 {
		delete(b.byClient, st.client)
	}
	b.anon--
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
