package events

import "testing"

func TestEventsLimitPerClient(t *testing.T) {
	b := New(100)
	for i := range maxStreamsPerClient {
		if _, err := b.Subscribe("10.0.0.7", false); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if _, err := b.Subscribe("10.0.0.7", false); err != ErrTooManyFromClient {
		t.Errorf("stream %d from one address: %v, want %v", maxStreamsPerClient+1, err, ErrTooManyFromClient)
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
	for i := range operatorReserve {
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
	if len(b.byClient) != 0 || b.anon != 0 {
		t.Errorf("counts after the drop: %v, %d anonymous", b.byClient, b.anon)
	}
	b.Close()
	if _, err := b.Subscribe("x", false); err != ErrClosed {
		t.Errorf("subscribe after close: %v", err)
	}
}
