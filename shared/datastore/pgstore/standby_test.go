package pgstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
)

// TestStandbyTakesOverOnce: two standbys wait on a schema an owner holds.
// Neither takes over while the owner lives; when the owner's session is
// ended (as a SIGKILL or a partition would), exactly one of them takes
// the schema, sees the owner's writes, and the other keeps waiting; the
// former owner, reconnecting, is fenced (ErrLocked, every time) whether
// or not the new owner holds the lock at that moment. When the new owner
// closes, the second standby takes over, once, and sees its writes.
func TestStandbyTakesOverOnce(t *testing.T) {
	c := pgtest.Get(t)
	defer func(d time.Duration) { IdleCheck = d }(IdleCheck)
	IdleCheck = 0
	schema := c.Schema(t)
	owner := open(t, c, schema)
	put := func(s *datastore.Store, k, v string) error {
		return s.Update(func(tx *datastore.Tx) error { tx.Put("b", k, []byte(v)); return nil })
	}
	if err := put(owner, "a", "owner"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const grace = 300 * time.Millisecond
	type took struct {
		who int
		s   *datastore.Store
		err error
	}
	took1 := make(chan took, 2)
	var wg sync.WaitGroup
	for who := range 2 {
		wg.Go(func() {
			turn, err := AwaitTurn(ctx, c.DSN, schema, grace, nil)
			if err != nil {
				if ctx.Err() == nil {
					took1 <- took{who: who, err: err}
				}
				return
			}
			s, err := Open(ctx, c.DSN, schema, nil)
			turn.Release()
			took1 <- took{who: who, s: s, err: err}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	// 10 graces with the owner alive: nobody takes over.
	select {
	case tk := <-took1:
		t.Fatalf("standby %d took over (err %v) while the owner lived", tk.who, tk.err)
	case <-time.After(10 * grace):
	}
	terminate(t, c, schema)
	var first took
	select {
	case first = <-took1:
	case <-time.After(2 * time.Minute):
		t.Fatal("no standby took over within 2 minutes of the owner's end")
	}
	if first.err != nil {
		t.Fatalf("standby %d: %v", first.who, first.err)
	}
	defer first.s.Close()
	if got := dumpB(t, first.s); got["a"] != "owner" {
		t.Fatalf("the new owner reads %v, want the former owner's a=owner", got)
	}
	select {
	case tk := <-took1:
		t.Fatalf("a second standby (%d, err %v) took over while the first owns the schema", tk.who, tk.err)
	case <-time.After(10 * grace):
	}
	for i := range 2 {
		if err := put(owner, "a", "stale"); !errors.Is(err, datastore.ErrLocked) {
			t.Fatalf("former owner's Update %d after the takeover: %v, want ErrLocked (fenced)", i, err)
		}
	}
	if err := put(first.s, "a", "first"); err != nil {
		t.Fatal(err)
	}
	// The new owner closes: the other standby takes over, once.
	if err := first.s.Close(); err != nil {
		t.Fatal(err)
	}
	var second took
	select {
	case second = <-took1:
	case <-time.After(2 * time.Minute):
		t.Fatal("the second standby did not take over within 2 minutes of the first owner's close")
	}
	if second.err != nil || second.who == first.who {
		t.Fatalf("second takeover by standby %d (first %d): %v", second.who, first.who, second.err)
	}
	defer second.s.Close()
	if got := dumpB(t, second.s); got["a"] != "first" {
		t.Fatalf("the second owner reads %v, want a=first", got)
	}
	// The former owner is still fenced, though the lock changed hands
	// again (its epoch is two behind).
	if err := put(owner, "a", "stale"); !errors.Is(err, datastore.ErrLocked) {
		t.Fatalf("former owner after two takeovers: %v, want ErrLocked", err)
	}
}

// TestFencedWhileTheNewOwnerHoldsTheLock: a store whose session ended and
// whose schema a standby opened reconnects while the new owner still
// holds the lock: it is fenced at once (the epoch moved), rather than
// retrying for as long as the new owner lives.
func TestFencedWhileTheNewOwnerHoldsTheLock(t *testing.T) {
	c := pgtest.Get(t)
	defer func(d time.Duration) { IdleCheck = d }(IdleCheck)
	IdleCheck = 0
	schema := c.Schema(t)
	old := open(t, c, schema)
	terminate(t, c, schema)
	_ = open(t, c, schema) // the new owner, holding the lock
	err := old.Update(func(tx *datastore.Tx) error { tx.Put("b", "k", []byte("stale")); return nil })
	if !errors.Is(err, datastore.ErrLocked) {
		t.Fatalf("Update of a store whose schema another owns: %v, want ErrLocked", err)
	}
}
