//go:build js

// Command sealbench is the browser page of scripts/browsertest's
// TestSealCostInBrowser: it times envelope.SealEach and envelope.SealShare,
// the two ways a volunteer seals a round, in the browser that loads it. It
// uses only API that the hand-written js sender had too, so the same file
// builds against an older tree for a side-by-side run.
//
// globalThis.sealbench.run(pubHex, round, workloads, rounds, warmups)
// returns a promise of, for every workload, the wall time in milliseconds
// of each of rounds timed rounds (after warmups untimed ones). A workload is
// {messages: m} (one round seals m width-1 messages with SealEach) or
// {leader: a, helper: b} (one round seals an a-byte leader share and a
// b-byte helper share with SealShare).
package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"syscall/js"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
)

func main() {
	obj := js.Global().Get("Object").New()
	obj.Set("run", js.FuncOf(func(_ js.Value, args []js.Value) any {
		return promise(func() (any, error) { return run(args) })
	}))
	js.Global().Set("sealbench", obj)
	select {}
}

func run(args []js.Value) (any, error) {
	if len(args) != 5 {
		return nil, errors.New("run(pubHex, round, workloads, rounds, warmups)")
	}
	pubB, err := hex.DecodeString(args[0].String())
	if err != nil || len(pubB) != 32 {
		return nil, fmt.Errorf("public key: %v", err)
	}
	pub := [32]byte(pubB)
	round := uint64(args[1].Int())
	rounds, warmups := args[3].Int(), args[4].Int()
	ws := args[2]
	out := make([]any, ws.Length())
	for i := range out {
		w := ws.Index(i)
		var once func() error
		if m := w.Get("messages"); m.Truthy() {
			vals := make([]float64, m.Int())
			for j := range vals {
				vals[j] = float64(j%17)/17 - 0.5
			}
			once = func() error { _, err := envelope.SealEach(pub, round, vals); return err }
		} else {
			leader, helper := make([]byte, w.Get("leader").Int()), make([]byte, w.Get("helper").Int())
			once = func() error {
				if _, err := envelope.SealShare(pub, round, envelope.ShareLeader, [32]byte{1}, leader); err != nil {
					return err
				}
				_, err := envelope.SealShare(pub, round, envelope.ShareHelper, [32]byte{}, helper)
				return err
			}
		}
		for range warmups {
			if err := once(); err != nil {
				return nil, err
			}
		}
		ms := make([]any, rounds)
		for r := range ms {
			t0 := time.Now()
			if err := once(); err != nil {
				return nil, err
			}
			ms[r] = float64(time.Since(t0).Microseconds()) / 1000
		}
		out[i] = ms
	}
	return out, nil
}

// promise runs f on a goroutine of its own (sealing waits for WebCrypto's
// promises, which a syscall/js callback must not) and returns a Promise
// of its result.
func promise(f func() (any, error)) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer executor.Release()
			v, err := f()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(js.ValueOf(v))
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}
