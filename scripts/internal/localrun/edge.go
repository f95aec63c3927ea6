package localrun

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Edge is an edge relay (relay -edge-of) of a cluster's relay.
type Edge struct {
	Addr string // host:port
	cmd  *exec.Cmd
}

// URL is the edge's base URL; WebSocketURL its volunteers' websocket.
func (e *Edge) URL() string          { return "http://" + e.Addr }
func (e *Edge) WebSocketURL() string { return "ws://" + e.Addr + "/ws" }

// PID is the edge's process id.
func (e *Edge) PID() int { return e.cmd.Process.Pid }

// Kill ends the edge with SIGKILL and reaps it.
func (e *Edge) Kill() error { return stop(e.cmd, syscall.SIGKILL) }

// StartEdge starts an edge of the cluster's relay from bin (the relay
// binary, or a copy of it), named name, listening at addr ("": a free
// loopback port), with the cluster's token and output, and waits until it
// answers /healthz.
func (c *Cluster) StartEdge(ctx context.Context, bin, addr, name string) (*Edge, error) {
	if addr == "" {
		var err error
		if addr, err = freeAddr("127.0.0.1"); err != nil {
			return nil, err
		}
	}
	cmd, err := c.launch(ctx, bin, []string{"-edge-of", c.RelayURL(), "-listen", addr,
		"-token-file", filepath.Join(c.opts.Dir, "token"), "-edge-name", name}, "http://"+addr+"/healthz")
	if err != nil {
		return nil, fmt.Errorf("localrun: edge %s: %w", name, err)
	}
	return &Edge{Addr: addr, cmd: cmd}, nil
}
