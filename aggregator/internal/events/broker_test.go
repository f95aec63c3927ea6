package events

import (
	"fmt"
	"testing"
)

// TestEventsLimitPerClient: one address (a classroom behind one NAT)
// holds up to three quarters of the anonymous streams; the operator's
// reserve stays free whatever the anonymous streams do.
func TestEventsLimitPerClient(t *testing.T) {
	b := New(64)
	if PerClient(64) != 48 {
		t.Fatalf("PerClient(64) = %d, want 48", PerClient(64))
	}
	for i := range 48 {
		if _, err := b.Subscribe("10.0.0.7", false); err != nil {
			t.Fatalf("stream %d from one address: %v", i+1, err)
		}
	}
	if _, err := b.Subscribe("10.0.0.7", false); err != ErrTooManyFromClient {
		t.Errorf("stream 49 from one address: %v, want %v", err, ErrTooManyFromClient)
	}
	if _, err := b.Subscribe("10.0.0.8", false); err != nil {
		t.Errorf("another address: %v", err)
	}
	// 64 anonymous streams from everywhere never lock the operator out.
	full := New(2)
	full.Subscribe("a", false)
	full.Subscribe("b", false)
	if _, err := full.Subscribe("c", false); err != ErrTooManySubscribers {
		t.Errorf("third anonymous stream: %v", err)
	}
	var ops []chan Event
	for i := range OperatorReserve {
		ch, err := full.Subscribe("a", true)
		if err != nil {
			t.Fatalf("operator stream %d: %v", i, err)
		}
		ops = append(ops, ch)
	}
	if _, err := full.Subscribe("a", true); err != ErrTooManySubscribers {
		t.Errorf("operator stream beyond the reserve: %v", err)
	}
	full.Unsubscribe(ops[0])
	if _, err := full.Subscribe("a", true); err != nil {
		t.Errorf("operator stream after one closed: %v", err)
	}
	if _, err := full.Subscribe("c", false); err != ErrTooManySubscribers {
		t.Errorf("operator streams freed anonymous capacity: %v", err)
	}
}

func TestBrokerDropsSlowSubscriber(t *testing.T) {
	b := New(2)
	slow, _ := b.Subscribe("x", false)
	for range subscriberBuffer + 1 {
		b.Publish(Event{Name: "x", Data: []byte("{}")})
	}
	if b.Active() != 0 {
		t.Fatalf("slow subscriber still active")
	}
	n := 0
	for range slow {
		n++
	}
	if n != subscriberBuffer {
		t.Errorf("slow subscriber got %d events before being dropped, want %d", n, subscriberBuffer)
	}
	b.Unsubscribe(slow) // no-op after the drop
	if len(b.byClient) != 0 || b.anon != 0 || len(b.subs) != 0 {
		t.Errorf("counts after the drop: %v, %d anonymous", b.byClient, b.anon)
	}
	b.Close()
	if _, err := b.Subscribe("x", false); err != ErrClosed {
		t.Errorf("subscribe after close: %v", err)
	}
}

// TestEventsFairToAnonymous: 64 anonymous streams from 16 addresses (4
// each: an attack on an earlier build, which then refused everyone else)
// do not lock out new viewers: each of 16 new addresses gets a stream,
// taken from the largest holders (whose streams end: the channel closes),
// until every address holds its fair share, 2 of 64; the operator still
// gets a stream; the attackers' retries are refused once they are down to
// the share; and a classroom behind one NAT that arrives after them grows
// to within one of the largest holder by taking theirs.
func TestEventsFairToAnonymous(t *testing.T) {
	b := New(64)
	var attack []chan Event
	for a := range 16 {
		for range 4 {
			ch, err := b.Subscribe(fmt.Sprintf("203.0.113.%d", a), false)
			if err != nil {
				t.Fatalf("attack stream: %v", err)
			}
			attack = append(attack, ch)
		}
	}
	for v := range 16 {
		if _, err := b.Subscribe(fmt.Sprintf("198.51.100.%d", v), false); err != nil {
			t.Fatalf("viewer %d locked out by 64 streams from 16 addresses: %v", v+1, err)
		}
	}
	if b.anon != 64 {
		t.Fatalf("%d anonymous streams, want 64", b.anon)
	}
	closed := 0
	for _, ch := range attack {
		select {
		case _, ok := <-ch:
			if !ok {
				closed++
			}
		default:
		}
	}
	if closed != 16 {
		t.Errorf("%d attack streams ended, want 16", closed)
	}
	if _, err := b.Subscribe("203.0.113.0", true); err != nil {
		t.Errorf("operator stream: %v", err)
	}
	// The attackers now hold 3 each, the viewers 1: an attacker's retry
	// is refused, a second viewer tab takes an attacker's stream.
	if _, err := b.Subscribe("203.0.113.5", false); err != ErrTooManySubscribers {
		t.Errorf("attacker retry at its share: %v", err)
	}
	if _, err := b.Subscribe("198.51.100.3", false); err != nil {
		t.Errorf("second viewer tab: %v", err)
	}
	// A classroom behind one NAT grows by taking the largest holders'
	// streams until it is within one of the largest.
	for {
		if _, err := b.Subscribe("192.0.2.1", false); err != nil {
			break
		}
	}
	hi := 0
	for _, k := range b.byClient {
		hi = max(hi, k)
	}
	if room := b.byClient["192.0.2.1"]; hi-room > 1 || room < 2 || b.anon != 64 {
		t.Errorf("after the classroom: %d anonymous, the largest holder %d, the classroom %d", b.anon, hi, room)
	}
}
