package server

import (
	"context"
	"io"
	"net/http"

	"github.com/blanket-fl/blanket/shared/wire"
)

// handleAnchor serves GET /v1/anchor (the relay's noise-ledger head and
// the aggregator's ledger head it holds) and POST /v1/anchor: it records
// the aggregator's head (refused, 409, if it is behind the one held) and
// checks the relay's head the aggregator holds (relay/internal/anchor has
// the rest of the exchange).
func (s *Server) handleAnchor(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	l := s.cfg.NoiseLedger
	if l == nil {
		http.Error(w, "no noise ledger", http.StatusNotFound)
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
		if err := l.RecordPeer(a.Own); err != nil {
			s.log.Error("the aggregator's ledger head went back; refusing to noise", "err", err)
			l.Suspend(err)
			writeOutcome(w, http.StatusConflict, 0, "invalid", err.Error())
			return
		}
		if err := l.Verify(a.Held); err != nil {
			s.log.Error("the noise ledger is behind the head the aggregator holds; refusing to noise", "err", err)
			l.Suspend(err)
		}
	}
	b, err := (&wire.Anchor{Own: l.Head(), Held: l.Peer()}).MarshalBinary()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

// CheckAnchor fetches the relay's head as the aggregator holds it and
// verifies the noise ledger against it (ledger.ErrRollback: the
// relay's state was rolled back, refuse), and records the aggregator's
// own head (ledger.ErrRollback: the aggregator's was). Any other
// error: the aggregator could not be asked (anchor.Anchor.Check).
func (s *Server) CheckAnchor(ctx context.Context) error { return s.anchor.Check(ctx) }
