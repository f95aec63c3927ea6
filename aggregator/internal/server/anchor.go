package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Ledgers that anchor each other (docs/threat-model.md): the aggregator
// keeps the relay's noise-ledger head (in its datastore: the ledger's
// Anchor, a ledger.Peer; RelayAnchorFile is its former file) and
// the relay keeps the aggregator's ledger head. With Config.Anchor set:
//
//   - at start (New, checkAnchorAtStart) the ledger is checked against
//     the head the relay holds (GET relay /v1/anchor): behind it (state
//     deleted, ledger deleted or cut, state directory restored from an
//     older copy) the aggregator refuses to start; a relay that cannot
//     be asked leaves the ledger suspended (every charge refused) until
//     anchorLoop can check it;
//   - anchorLoop posts the ledger's head to the relay whenever it changes
//     (POST relay /v1/anchor) and records the relay's head from the reply;
//   - the relay asks the same of the aggregator (GET and POST /v1/anchor
//     here, handleAnchor).

// RelayAnchorFile held the relay's noise-ledger head before the
// datastore (imported once by ledger.OpenStore).
const RelayAnchorFile = "relay-anchor.json"

const anchorPath = "/v1/anchor"

var errUnanchored = errors.New("the ledger is not yet checked against the head the relay holds")

func headOf(l *ledger.Ledger) wire.Head { return l.Head() }

func (s *Server) peerHead() wire.Head { return s.peer.Head() }

// openAnchor takes the relay's head from the ledger's store and, with
// Config.Anchor, checks the ledger against the relay's copy of the
// aggregator's head (called by New with the ledger open).
func (s *Server) openAnchor(l *ledger.Ledger) error {
	s.peer = l.Anchor()
	if !s.cfg.Anchor {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.checkAnchor(ctx, l)
	switch {
	case errors.Is(err, ledger.ErrRollback):
		return fmt.Errorf("server: refusing to start: %w", err)
	case err != nil:
		s.log.Warn("cannot check the ledger against the relay yet; refusing every charge until it can", "err", err)
		l.Suspend(errUnanchored)
	}
	return nil
}

// checkAnchor asks the relay for the aggregator's head it holds and
// verifies the ledger against it (ledger.ErrRollback: the ledger lost
// records), and records the relay's own head (ledger.ErrRollback: the
// relay's did).
func (s *Server) checkAnchor(ctx context.Context, l *ledger.Ledger) error {
	a, err := s.anchorRequest(ctx, nil)
	if err != nil {
		return fmt.Errorf("server: asking the relay for the ledger's head: %w", err)
	}
	if err := l.Verify(a.Held); err != nil {
		return err
	}
	return s.peer.Record(a.Own)
}

func (s *Server) anchorRequest(ctx context.Context, body []byte) (*wire.Anchor, error) {
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(s.cfg.RelayURL, "/")+anchorPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &rounds.RelayError{Status: resp.Status, Body: strings.TrimSpace(string(b))}
	}
	return wire.ParseAnchor(b)
}

// anchorLoop (Run) checks a suspended ledger until the relay answers,
// then posts the ledger's head whenever it changes.
func (s *Server) anchorLoop(ctx context.Context) {
	if !s.cfg.Anchor {
		return
	}
	wait := 250 * time.Millisecond
	for errors.Is(s.ledger.Suspended(), errUnanchored) {
		err := s.checkAnchor(ctx, s.ledger)
		if err == nil {
			s.ledger.Resume()
			s.log.Info("ledger checked against the head the relay holds", "records", headOf(s.ledger).Count)
			break
		}
		if errors.Is(err, ledger.ErrRollback) {
			s.ledger.Suspend(err)
			s.log.Error("state rollback detected: every charge is refused", "err", err)
			s.Stop("state rollback: " + err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
	}
	var sent wire.Head
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		h := headOf(s.ledger)
		if h == sent {
			continue
		}
		body, err := (&wire.Anchor{Own: h, Held: s.peerHead()}).MarshalBinary()
		if err != nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		a, err := s.anchorRequest(rctx, body)
		cancel()
		if err != nil {
			s.log.Warn("cannot post the ledger's head to the relay; will retry", "err", err)
			continue
		}
		if err := s.peer.Record(a.Own); err != nil {
			s.log.Error("the relay's noise ledger went back", "err", err)
		}
		sent = h
	}
}

// waitAnchor (Run, before each round) waits while the ledger is
// suspended until checked; false when ctx ended.
func (s *Server) waitAnchor(ctx context.Context) bool {
	for errors.Is(s.ledger.Suspended(), errUnanchored) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
	return true
}

// handleAnchor is GET and POST /v1/anchor (the relay; bearer token): GET
// answers the ledger's head and the relay's head held here; POST records
// the relay's head (409 if it is behind the one held) and checks the
// aggregator's head the relay holds (a ledger behind it is suspended).
func (s *Server) handleAnchor(w http.ResponseWriter, r *http.Request) {
	want := sha256.Sum256([]byte("Bearer " + s.cfg.Token))
	got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.AnchorSize))
		if err != nil {
			http.Error(w, "anchor too large", http.StatusRequestEntityTooLarge)
			return
		}
		a, err := wire.ParseAnchor(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.peer.Record(a.Own); err != nil {
			s.log.Error("the relay's noise ledger went back", "err", err)
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		if err := s.ledger.Verify(a.Held); err != nil {
			s.log.Error("the ledger is behind the head the relay holds; every charge is refused", "err", err)
			s.ledger.Suspend(err)
			s.Stop("state rollback: " + err.Error())
		}
	}
	b, err := (&wire.Anchor{Own: headOf(s.ledger), Held: s.peerHead()}).MarshalBinary()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}
