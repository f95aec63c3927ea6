// Package replicas runs Blanket's two parties in the active/standby form
// (docs/deploy.md, issue 26): each party, the relay and the aggregator, is
// two processes of the same binary on one PostgreSQL schema, one active and
// one hot standby (-standby: it waits until the schema's owner is gone,
// takes the schema over and only then listens), and one HAProxy process
// puts a frontend before each party whose backend lists both replicas with
// a health check (GET /healthz), so that traffic goes to whichever replica
// listens. The relay's -aggregator and the aggregator's -relay are the
// frontends: neither server knows which replica of the other is active.
//
// A supervisor per replica plays the part of systemd's Restart=always: a
// replica that exits, killed by the test or on its own (an active server
// whose store is lost for good exits non-zero), is started again after a
// second, as a standby. A monitor looks every 100 ms whether each replica
// listens on its port and records when each began and stopped: the
// takeovers.
package replicas

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
)

// Party is the relay or the aggregator.
type Party int

const (
	Relay Party = iota
	Aggregator
	// Edge is an edge relay (relay -edge-of, relay/internal/edge): it
	// holds volunteers' websockets for the active relay, reached through
	// the relay's frontend; it is restarted as an edge, never a standby.
	Edge
)

func (p Party) String() string {
	switch p {
	case Relay:
		return "relay"
	case Edge:
		return "edge"
	}
	return "aggregator"
}

// Config configures a deployment.
type Config struct {
	Bins localrun.Binaries
	// Dir holds the token, the HAProxy configuration and each replica's
	// state directory (relay-a, relay-b, aggregator-a, aggregator-b).
	Dir string
	// Store is the PostgreSQL URL both parties keep their state in, one
	// schema each (RelaySchema, AggregatorSchema; empty: the servers'
	// defaults).
	Store                         string
	RelaySchema, AggregatorSchema string
	// AggregatorArgs and RelayArgs are extra flags for every replica of
	// the party (protocol, timeouts, -standby-grace...).
	AggregatorArgs, RelayArgs []string
	// Log receives every process's output as whole lines, each prefixed
	// with the process's name ("relay-a| ", "haproxy| ").
	Log io.Writer
	// HAProxy is the haproxy executable (default: "haproxy" on PATH).
	HAProxy string
	// Edges is the number of edge relays (edge-1, ...): the relay's
	// frontend sends the volunteers' websockets (/ws) to them, and
	// everything else to the relay's replicas (0: /ws to the relay's too).
	Edges int
}

// Event is one line of the deployment's timeline.
type Event struct {
	At      time.Time
	Replica string // "relay-a"..., or "" for the test's own events
	What    string
}

// Replica is one process slot of a party, restarted by its supervisor.
type Replica struct {
	Name  string
	Party Party
	Addr  string // host:port it listens on once active
	State string // its -state directory

	d  *Deployment
	mu sync.Mutex
	// cmd is the running process (nil between an exit and the restart);
	// killed marks an exit the test caused.
	cmd       *exec.Cmd
	killed    bool
	starts    int
	listening bool
	tail      *localrun.Tail
}

// Deployment is the running HAProxy and the four replicas.
type Deployment struct {
	cfg      Config
	token    string
	relayFE  string
	aggFE    string
	proxy    *exec.Cmd
	proxyOut *localrun.Tail
	proxyEnd chan error
	Replicas []*Replica // relay-a, relay-b, aggregator-a, aggregator-b

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	logMu  sync.Mutex

	mu     sync.Mutex
	events []Event
}

// Start writes the token and the HAProxy configuration, starts HAProxy,
// then relay A and aggregator A as active servers (waiting until both
// answer through their frontends) and relay B and aggregator B as
// standbys.
func Start(ctx context.Context, cfg Config) (*Deployment, error) {
	if cfg.HAProxy == "" {
		cfg.HAProxy = "haproxy"
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("replicas: %w", err)
	}
	var raw [16]byte
	rand.Read(raw[:])
	d := &Deployment{cfg: cfg, token: hex.EncodeToString(raw[:])}
	if err := os.WriteFile(d.tokenFile(), []byte(d.token), 0o600); err != nil {
		return nil, fmt.Errorf("replicas: write token: %w", err)
	}
	// Six loopback ports: two frontends, four replicas. Held open
	// together so that no two are the same.
	addrs, err := freeAddrs(6 + cfg.Edges)
	if err != nil {
		return nil, err
	}
	d.relayFE, d.aggFE = addrs[0], addrs[1]
	for i, name := range []string{"relay-a", "relay-b", "aggregator-a", "aggregator-b"} {
		p := Relay
		if i >= 2 {
			p = Aggregator
		}
		r := &Replica{Name: name, Party: p, Addr: addrs[2+i], State: filepath.Join(cfg.Dir, name), d: d}
		if err := os.MkdirAll(r.State, 0o700); err != nil {
			return nil, fmt.Errorf("replicas: %w", err)
		}
		d.Replicas = append(d.Replicas, r)
	}
	for i := range cfg.Edges {
		name := fmt.Sprintf("edge-%d", i+1)
		d.Replicas = append(d.Replicas, &Replica{Name: name, Party: Edge, Addr: addrs[6+i], d: d})
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if err := d.startProxy(); err != nil {
		d.cancel()
		return nil, err
	}
	d.wg.Go(d.monitor)
	ok := false
	defer func() {
		if !ok {
			d.Stop()
		}
	}()
	// The relay first (the aggregator announces rounds to it), each
	// active, then the standbys.
	for _, r := range []*Replica{d.Replicas[0], d.Replicas[2]} {
		r.supervise(false)
		if err := d.waitHealthy(ctx, r.Party, r, 90*time.Second); err != nil {
			return nil, err
		}
	}
	d.Replicas[1].supervise(true)
	d.Replicas[3].supervise(true)
	for _, r := range d.Party(Edge) {
		r.supervise(false)
	}
	ok = true
	return d, nil
}

func (d *Deployment) tokenFile() string { return filepath.Join(d.cfg.Dir, "token") }

// Token is the relay-aggregator bearer token (for GET /v1/anchor).
func (d *Deployment) Token() string { return d.token }

// RelayURL is the relay's frontend; WebSocketURL the volunteers' endpoint
// on it; AggregatorURL the aggregator's frontend.
func (d *Deployment) RelayURL() string      { return "http://" + d.relayFE }
func (d *Deployment) WebSocketURL() string  { return "ws://" + d.relayFE + "/ws" }
func (d *Deployment) AggregatorURL() string { return "http://" + d.aggFE }

// FrontendURL is party's frontend.
func (d *Deployment) FrontendURL(p Party) string {
	if p == Relay {
		return d.RelayURL()
	}
	return d.AggregatorURL()
}

// haproxyConfig is the proxy's configuration: one frontend per party,
// whose backend lists both replicas. A replica is checked every 300 ms
// (GET /healthz), down after 2 failed checks and up after one good one; a
// request whose connection fails (the standby does not listen) is tried
// again on the other replica (retries, option redispatch). The
// volunteers' websockets are tunnels (timeout tunnel).
func (d *Deployment) haproxyConfig() string {
	var b strings.Builder
	b.WriteString(`global
	maxconn 2000

defaults
	mode http
	timeout connect 1s
	timeout client 5m
	timeout server 5m
	timeout tunnel 1h
	timeout http-request 30s
	retries 3
	option redispatch
`)
	for _, fe := range []struct {
		name, addr string
		party      Party
	}{{"relay", d.relayFE, Relay}, {"aggregator", d.aggFE, Aggregator}} {
		fmt.Fprintf(&b, "\nfrontend %s\n\tbind %s\n\tdefault_backend %s_replicas\n", fe.name, fe.addr, fe.name)
		if fe.party == Relay && d.cfg.Edges > 0 {
			// The volunteers' websockets go to the edges (docs/deploy.md).
			b.WriteString("\tuse_backend relay_edges if { path /ws }\n")
			b.WriteString("\nbackend relay_edges\n\tbalance leastconn\n\toption httpchk GET /healthz\n\thttp-check expect status 200\n\tdefault-server inter 300ms fall 2 rise 1\n")
			for _, r := range d.Party(Edge) {
				fmt.Fprintf(&b, "\tserver %s %s check\n", r.Name, r.Addr)
			}
		}
		fmt.Fprintf(&b, "\nbackend %s_replicas\n\toption httpchk GET /healthz\n\thttp-check expect status 200\n\tdefault-server inter 300ms fall 2 rise 1\n", fe.name)
		for _, r := range d.Replicas {
			if r.Party == fe.party {
				fmt.Fprintf(&b, "\tserver %s %s check\n", r.Name, r.Addr)
			}
		}
	}
	return b.String()
}

func (d *Deployment) startProxy() error {
	cfgPath := filepath.Join(d.cfg.Dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(d.haproxyConfig()), 0o600); err != nil {
		return fmt.Errorf("replicas: %w", err)
	}
	cmd := exec.Command(d.cfg.HAProxy, "-db", "-f", cfgPath)
	d.proxyOut = localrun.NewTail(4 << 10)
	w := io.MultiWriter(d.proxyOut, &lineWriter{d: d, prefix: "haproxy| "})
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("replicas: haproxy: %w", err)
	}
	d.proxy, d.proxyEnd = cmd, make(chan error, 1)
	go func() { d.proxyEnd <- cmd.Wait() }()
	for end := time.Now().Add(30 * time.Second); ; {
		select {
		case err := <-d.proxyEnd:
			d.proxyEnd <- err
			return fmt.Errorf("replicas: haproxy exited during start (%v):\n%s", err, d.proxyOut)
		case <-time.After(50 * time.Millisecond):
		}
		up := 0
		for _, a := range []string{d.relayFE, d.aggFE} {
			if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				c.Close()
				up++
			}
		}
		if up == 2 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("replicas: haproxy did not bind its frontends:\n%s", d.proxyOut)
		}
	}
}

// args are replica r's command line.
func (r *Replica) args(standby bool) []string {
	d := r.d
	var args []string
	if r.Party == Edge {
		// No state and no store: the relay's token, the owner behind the
		// relay's frontend.
		return []string{"-edge-of", d.RelayURL(), "-listen", r.Addr, "-token-file", d.tokenFile(), "-edge-name", r.Name}
	}
	if r.Party == Relay {
		args = []string{"-listen", r.Addr, "-aggregator", d.AggregatorURL(), "-wasm", d.cfg.Bins.Wasm}
		if d.cfg.RelaySchema != "" {
			args = append(args, "-store-schema", d.cfg.RelaySchema)
		}
		args = append(args, d.cfg.RelayArgs...)
	} else {
		args = []string{"serve", "-listen", r.Addr, "-relay", d.RelayURL(), "-wasm", d.cfg.Bins.Wasm, "-join-url", d.RelayURL() + "/"}
		if d.cfg.AggregatorSchema != "" {
			args = append(args, "-store-schema", d.cfg.AggregatorSchema)
		}
		args = append(args, d.cfg.AggregatorArgs...)
	}
	args = append(args, "-token-file", d.tokenFile(), "-state", r.State, "-store", d.cfg.Store)
	if standby {
		args = append(args, "-standby")
	}
	return args
}

// supervise starts r (as a standby if standby) and keeps it running:
// whenever it exits, it is started again a second later, as a standby,
// until the deployment stops.
func (r *Replica) supervise(standby bool) {
	d := r.d
	d.wg.Go(func() {
		for d.ctx.Err() == nil {
			bin := d.cfg.Bins.Relay
			if r.Party == Edge {
				standby = false
			}
			if r.Party == Aggregator {
				bin = d.cfg.Bins.Aggregator
			}
			cmd := exec.Command(bin, r.args(standby)...)
			r.mu.Lock()
			// Under r.mu: Stop cancels, then looks at r.cmd under r.mu, so
			// no process starts that Stop does not see.
			if d.ctx.Err() != nil {
				r.mu.Unlock()
				return
			}
			r.tail = localrun.NewTail(8 << 10)
			w := io.MultiWriter(r.tail, &lineWriter{d: d, prefix: r.Name + "| "})
			cmd.Stdout, cmd.Stderr = w, w
			r.killed = false
			err := cmd.Start()
			if err == nil {
				r.cmd = cmd
				r.starts++
			}
			r.mu.Unlock()
			if err != nil {
				d.Record(r.Name, fmt.Sprintf("cannot start: %v", err))
				return
			}
			role := "active"
			if standby {
				role = "standby"
			}
			d.Record(r.Name, fmt.Sprintf("started as %s (pid %d)", role, cmd.Process.Pid))
			err = cmd.Wait()
			r.mu.Lock()
			r.cmd = nil
			killed := r.killed
			r.mu.Unlock()
			if d.ctx.Err() != nil {
				return
			}
			if killed {
				d.Record(r.Name, "exited: killed by the test")
			} else {
				d.Record(r.Name, fmt.Sprintf("exited on its own (%v); its last output:\n%s", err, r.tail))
			}
			standby = true
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
}

// Kill kills r at once (SIGKILL), as a crash would; its supervisor starts
// it again as a standby.
func (r *Replica) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return fmt.Errorf("replicas: %s is not running", r.Name)
	}
	r.killed = true
	r.d.Record(r.Name, "SIGKILL")
	return r.cmd.Process.Signal(syscall.SIGKILL)
}

// Listening reports whether r listened on its port at the monitor's last
// look; Starts how many times it was started.
func (r *Replica) Listening() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listening
}

func (r *Replica) Starts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

// Running reports whether r's process runs.
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// Output is the end of r's current (or last) process's output.
func (r *Replica) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tail == nil {
		return "(not started)"
	}
	return r.tail.String()
}

// Party returns the two replicas of p.
func (d *Deployment) Party(p Party) []*Replica {
	var out []*Replica
	for _, r := range d.Replicas {
		if r.Party == p {
			out = append(out, r)
		}
	}
	return out
}

// Active returns the replica of p listening now (nil if none) and how
// many of p's replicas listen.
func (d *Deployment) Active(p Party) (*Replica, int) {
	var a *Replica
	n := 0
	for _, r := range d.Party(p) {
		if r.Listening() {
			a = r
			n++
		}
	}
	return a, n
}

// monitor looks every 100 ms whether each replica listens on its port
// and records when each began and stopped listening. Listening is a TCP
// connection the kernel accepts (a standby has no socket: refused), not
// an HTTP answer, which a server starved of CPU may give late: a dial
// that neither connects nor is refused within a second leaves the state
// as it was.
func (d *Deployment) monitor() {
	for d.ctx.Err() == nil {
		for _, r := range d.Replicas {
			c, err := net.DialTimeout("tcp", r.Addr, time.Second)
			var up bool
			switch {
			case err == nil:
				c.Close()
				up = true
			case errors.Is(err, syscall.ECONNREFUSED):
				up = false
			default:
				continue
			}
			r.mu.Lock()
			changed := up != r.listening
			r.listening = up
			r.mu.Unlock()
			if changed {
				if up {
					d.Record(r.Name, "began listening")
				} else {
					d.Record(r.Name, "stopped listening")
				}
			}
		}
		select {
		case <-d.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitHealthy waits until r listens and p's frontend answers /healthz.
func (d *Deployment) waitHealthy(ctx context.Context, p Party, r *Replica, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		if r.Listening() {
			if resp, err := http.Get(d.FrontendURL(p) + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		if time.Now().After(end) {
			return fmt.Errorf("replicas: %s did not answer within %v; its last output:\n%s", r.Name, within, r.Output())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Record adds an event to the timeline (replica "" for the test's own).
func (d *Deployment) Record(replica, what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, Event{At: time.Now(), Replica: replica, What: what})
}

// Events returns the timeline so far.
func (d *Deployment) Events() []Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Event(nil), d.events...)
}

// ProxyRunning reports whether HAProxy still runs.
func (d *Deployment) ProxyRunning() bool {
	select {
	case err := <-d.proxyEnd:
		d.proxyEnd <- err
		return false
	default:
		return true
	}
}

// Stop stops the replicas (SIGINT, SIGKILL after 10 s) and HAProxy.
func (d *Deployment) Stop() {
	d.cancel()
	var wg sync.WaitGroup
	for _, r := range d.Replicas {
		r.mu.Lock()
		if r.cmd != nil {
			r.cmd.Process.Signal(syscall.SIGINT)
			cmd := r.cmd
			wg.Go(func() {
				t := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
				defer t.Stop()
				for r.Running() {
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
		r.mu.Unlock()
	}
	wg.Wait()
	d.wg.Wait()
	if d.proxy != nil && d.ProxyRunning() {
		d.proxy.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.proxyEnd:
		case <-time.After(10 * time.Second):
			d.proxy.Process.Kill()
			<-d.proxyEnd
		}
	}
}

// freeAddrs returns n distinct free loopback addresses.
func freeAddrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("replicas: free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// lineWriter passes whole lines, prefixed, to the deployment's Log (one
// per process: exec calls its Write from one goroutine at a time).
type lineWriter struct {
	d       *Deployment
	prefix  string
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.d.logMu.Lock()
		w.d.cfg.Log.Write([]byte(w.prefix + string(w.partial[:i+1])))
		w.d.logMu.Unlock()
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// ErrNoHAProxy is returned by Check when haproxy is not on PATH.
var ErrNoHAProxy = errors.New("haproxy is not installed (Debian's haproxy package; .ci/run installs it)")

// Check returns the haproxy executable, or ErrNoHAProxy.
func Check() (string, error) {
	p, err := exec.LookPath("haproxy")
	if err != nil {
		for _, c := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
			if _, err := os.Stat(c); err == nil {
				return c, nil
			}
		}
		return "", ErrNoHAProxy
	}
	return p, nil
}
