// Package wsconn is one volunteer's websocket at a relay or at an edge
// relay (relay/internal/edge): its serialized writes, its read loop under
// the intake budget and the timeouts of docs/protocol.md, the keep-alive
// pings, the origin policy, and the Ack (or close) that answers each
// frame the round machine judged. Both transports use it, so that a
// volunteer meets the same connection rules at either.
package wsconn

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Limits bound a connection (the relay's Config documents each default).
type Limits struct {
	PongWait, FrameTimeout, WriteWait time.Duration
	// UploadRate is the slowest upload, in bytes per second, at which a
	// frame still arrives in time.
	UploadRate int
}

// FrameTimeout is how long a client has to deliver a frame of at most
// limit bytes once it started it.
func (l Limits) frameTimeout(limit int64) time.Duration {
	return l.FrameTimeout + time.Duration(limit)*time.Second/time.Duration(l.UploadRate)
}

// Conn is one websocket connection.
type Conn struct {
	WS  *websocket.Conn
	wmu sync.Mutex // serializes data writes (acks, announcements)
	mid bool       // reading a frame; touched only by the read loop
}

// Write sends one binary message within wait.
func (c *Conn) Write(b []byte, wait time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.WS.SetWriteDeadline(time.Now().Add(wait))
	return c.WS.WriteMessage(websocket.BinaryMessage, b)
}

// CloseWith sends a close frame with code and text (the connection is
// then ended by its read loop's return).
func (c *Conn) CloseWith(code int, text string, wait time.Duration) {
	c.WS.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(wait))
}

// Reader is what Read reports to its transport.
type Reader struct {
	Limits Limits
	// Limit is the size limit of the next frame (round.Machine.ReadLimit).
	Limit func() int
	// Budget bounds the large frames read or held at once; Stop ends a
	// wait for its slot.
	Budget *intake.Budget
	Stop   context.Context
	// Frame judges one complete binary frame and answers it; false ends
	// the connection.
	Frame func(b []byte) bool
	// Text is called for a text frame (the connection then closes, 1003);
	// Failed when a read ends otherwise (an oversized frame, a timeout, a
	// closed connection: see Oversized).
	Text   func()
	Failed func(err error)
}

// Read reads c's frames until the connection must end: each complete
// binary frame goes to r.Frame with its intake slot held.
func Read(c *Conn, r Reader) {
	ws := c.WS
	ws.SetPongHandler(func(string) error {
		if !c.mid {
			ws.SetReadDeadline(time.Now().Add(r.Limits.PongWait))
		}
		return nil
	})
	for {
		limit := int64(r.Limit())
		ws.SetReadLimit(limit)
		ws.SetReadDeadline(time.Now().Add(r.Limits.PongWait))
		c.mid = false
		mt, rd, err := ws.NextReader()
		if err != nil {
			r.Failed(err)
			return
		}
		c.mid = true
		ws.SetReadDeadline(time.Now().Add(r.Limits.frameTimeout(limit)))
		if mt != websocket.BinaryMessage {
			r.Text()
			c.CloseWith(websocket.CloseUnsupportedData, "binary frames only", r.Limits.WriteWait)
			return
		}
		b, slot, err := intake.ReadFrame(r.Stop, rd, int(limit), r.Budget, func() {
			ws.SetReadDeadline(time.Now().Add(r.Limits.frameTimeout(limit))) // from when the relay reads it
		})
		if err != nil {
			r.Failed(err) // a frame cut short is not a received frame
			return
		}
		ok := r.Frame(b)
		slot.Release() // the stream has the frame, or it was answered
		if !ok {
			return
		}
	}
}

// Oversized reports whether a read failed on a frame over its limit (a
// received frame, rejected); Timeout whether it timed out.
func Oversized(err error) bool {
	return errors.Is(err, websocket.ErrReadLimit) || errors.Is(err, intake.ErrTooLarge)
}

// Timeout reports whether a read failed on its deadline.
func Timeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Answer acknowledges verdict v (its Ack) and closes the connection on
// v.End (1007 malformed, 1008 policy); false: the connection ends.
func Answer(c *Conn, v round.Verdict, wait time.Duration) bool {
	ab, err := (&wire.Ack{Round: v.Round, Status: v.Status, Received: v.Received}).MarshalBinary()
	if err == nil {
		if err := c.Write(ab, wait); err != nil {
			return false
		}
	}
	switch v.End {
	case round.EndMalformed:
		c.CloseWith(websocket.CloseInvalidFramePayloadData, v.Reason, wait)
		return false
	case round.EndPolicy:
		c.CloseWith(websocket.ClosePolicyViolation, v.Reason, wait)
		return false
	}
	return true
}

// GoingAway closes every connection of conns (1001, text): the server
// stops.
func GoingAway(conns []*Conn, text string) {
	for _, c := range conns {
		c.CloseWith(websocket.CloseGoingAway, text, time.Second)
		c.WS.Close()
	}
}

// Ping pings the connections conns returns every interval until ctx
// ends; one that cannot take a ping within wait is closed.
func Ping(ctx context.Context, interval, wait time.Duration, conns func() []*Conn) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, c := range conns() {
			if err := c.WS.WriteControl(websocket.PingMessage, nil, time.Now().Add(wait)); err != nil {
				c.WS.Close()
			}
		}
	}
}

// OriginAllowed is the websocket origin policy: no Origin header (a
// native client), an Origin whose host is the request's Host, or one
// listed in extra (scheme://host[:port]).
func OriginAllowed(r *http.Request, extra []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err == nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, o := range extra {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}
