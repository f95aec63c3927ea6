// Package localrun starts Blanket's relay and aggregator as real processes on
// localhost, for `make run` (scripts/runlocal) and the end-to-end tests: it
// builds the two binaries, gives them a fresh shared token and state
// directories, waits until both answer, and stops them cleanly (SIGINT, then
// SIGKILL after a grace period). The relay and the aggregator stay separate
// processes, as in a deployment: neither can import the other's code.
package localrun

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/procmem"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/web"
)

// Binaries are the built relay and aggregator executables and the
// volunteers' wasm client module, which both servers serve.
type Binaries struct {
	Relay, Aggregator, Wasm string
}

// Build compiles ./relay and ./aggregator of the module rooted at root, and
// ./wasm for GOOS=js GOARCH=wasm, into dir.
func Build(ctx context.Context, root, dir string) (Binaries, error) {
	b := Binaries{Relay: filepath.Join(dir, "relay"), Aggregator: filepath.Join(dir, "aggregator"), Wasm: filepath.Join(dir, "blanket.wasm")}
	for _, t := range []struct {
		out, pkg string
		env      []string
	}{
		{b.Relay, "./relay", nil},
		{b.Aggregator, "./aggregator", nil},
		{b.Wasm, "./wasm", []string{"GOOS=js", "GOARCH=wasm"}},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", t.out, t.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), t.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("localrun: go build %s: %w\n%s", t.pkg, err, out)
		}
	}
	return b, nil
}

// BrotliCopy writes file.br, the brotli encoding the servers prefer for
// browsers that accept it, unless the existing copy already belongs to these
// bytes (checked by the SHA-256 recorded in file.br.sha256): compressing at
// the best quality takes about 30 s, so it is done once per module.
func BrotliCopy(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("localrun: %w", err)
	}
	sum := sha256.Sum256(raw)
	want := hex.EncodeToString(sum[:])
	if got, err := os.ReadFile(file + ".br.sha256"); err == nil && string(got) == want {
		if _, err := os.Stat(file + ".br"); err == nil {
			return nil
		}
	}
	br, err := web.CompressBrotli(raw)
	if err != nil {
		return fmt.Errorf("localrun: %w", err)
	}
	if err := os.WriteFile(file+".br", br, 0o644); err != nil {
		return fmt.Errorf("localrun: %w", err)
	}
	return os.WriteFile(file+".br.sha256", []byte(want), 0o644)
}

// Options configure a local deployment.
type Options struct {
	// Dir holds the token and the relay's and aggregator's state
	// directories; it is created if needed.
	Dir string
	// AggregatorArgs are extra flags for `aggregator serve` (protocol,
	// rounds, timeouts...).
	AggregatorArgs []string
	// RelayArgs are extra flags for the relay.
	RelayArgs []string
	// Stdout and Stderr receive the two processes' output (nil: discarded).
	// The last lines of each process's stderr are kept regardless and
	// quoted in the error when a process exits during start.
	Stdout, Stderr io.Writer
	// Host is the address both servers bind to (default 127.0.0.1). A
	// classroom uses the laptop's LAN address (LANAddress) so that phones
	// on the same network reach the join page.
	Host string
	// PublicURL, if set, is the join link shown on the dashboard and
	// encoded in the operator page's QR code, instead of the relay's own
	// http://Host:port/ (for a name, a proxy or a forwarded port).
	PublicURL string
	// OperatorToken is the operator password the aggregator requires for
	// its controls; written to Dir/operator-token (mode 0600) and passed
	// by file. Empty: the aggregator makes up its own.
	OperatorToken string
	// AggregatorDir is the aggregator's state directory (key, ledger,
	// checkpoint); default Dir/aggregator. A class is one such directory:
	// see NewClass.
	AggregatorDir string
	// NewClass offers New class on the operator page (aggregator
	// -new-class); the caller watches /api/status and calls NewClass.
	NewClass bool
}

// Cluster is a running relay and aggregator.
type Cluster struct {
	bins      Binaries
	opts      Options
	token     string
	relayAddr string
	aggAddr   string
	relay     *exec.Cmd
	agg       *exec.Cmd
	// startPaused: the aggregator was restarted for a new class, which
	// waits for the operator's Start.
	startPaused bool
}

// Start launches the relay, then the aggregator, on free loopback ports and
// waits until both answer their health checks.
func Start(ctx context.Context, bins Binaries, opts Options) (*Cluster, error) {
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("localrun: %w", err)
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.AggregatorDir == "" {
		opts.AggregatorDir = filepath.Join(opts.Dir, "aggregator")
	}
	if opts.OperatorToken != "" {
		if err := os.WriteFile(filepath.Join(opts.Dir, "operator-token"), []byte(opts.OperatorToken), 0o600); err != nil {
			return nil, fmt.Errorf("localrun: write operator token: %w", err)
		}
	}
	c := &Cluster{bins: bins, opts: opts}
	tokenPath := filepath.Join(opts.Dir, "token")
	if b, err := os.ReadFile(tokenPath); err == nil && len(b) > 0 {
		c.token = string(b)
	} else {
		var raw [16]byte
		rand.Read(raw[:])
		c.token = hex.EncodeToString(raw[:])
		if err := os.WriteFile(tokenPath, []byte(c.token), 0o600); err != nil {
			return nil, fmt.Errorf("localrun: write token: %w", err)
		}
	}
	var err error
	if c.relayAddr, err = freeAddr(opts.Host); err != nil {
		return nil, err
	}
	if c.aggAddr, err = freeAddr(opts.Host); err != nil {
		return nil, err
	}
	if err := c.StartRelay(ctx); err != nil {
		return nil, err
	}
	if err := c.StartAggregator(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// JoinURL is the volunteers' join page (served by the relay); DashboardURL
// the teacher's dashboard (served by the aggregator).
// JoinURL is Options.PublicURL when set.
func (c *Cluster) JoinURL() string {
	if c.opts.PublicURL != "" {
		return c.opts.PublicURL
	}
	return c.RelayURL() + "/"
}
func (c *Cluster) DashboardURL() string { return c.AggregatorURL() + "/" }

// OperatorURL is the aggregator's operator page.
func (c *Cluster) OperatorURL() string { return c.AggregatorURL() + "/operator" }

// AggregatorDir is the current class's aggregator state directory.
func (c *Cluster) AggregatorDir() string { return c.opts.AggregatorDir }

// RelayURL is the relay's HTTP base URL; WebSocketURL its client endpoint.
func (c *Cluster) RelayURL() string     { return "http://" + c.relayAddr }
func (c *Cluster) WebSocketURL() string { return "ws://" + c.relayAddr + "/ws" }

// AggregatorURL is the aggregator's HTTP base URL.
func (c *Cluster) AggregatorURL() string { return "http://" + c.aggAddr }

// StartRelay (re)starts the relay process with its persistent state.
func (c *Cluster) StartRelay(ctx context.Context) error {
	args := append([]string{"-listen", c.relayAddr, "-aggregator", c.AggregatorURL(),
		"-token-file", filepath.Join(c.opts.Dir, "token"), "-state", filepath.Join(c.opts.Dir, "relay"),
		"-wasm", c.bins.Wasm}, relayAgreed(c.opts.AggregatorArgs, c.opts.RelayArgs)...)
	cmd, err := c.launch(ctx, c.bins.Relay, args, c.RelayURL()+"/healthz")
	if err != nil {
		return fmt.Errorf("localrun: relay: %w", err)
	}
	c.relay = cmd
	return nil
}

// relayAgreed returns the relay's arguments: relay, plus what the relay
// must agree with the aggregator on and relay does not set itself, taken
// from the aggregator's arguments: its privacy target (-epsilon, -delta:
// the relay refuses a secure-summation announcement with another target)
// and its minimum batch (the relay's own floor, which no announcement
// lowers). One operator starting both servers, as here, gives both the
// same numbers; two organizations agree on them (docs/threat-model.md).
func relayAgreed(aggregator, relay []string) []string {
	out := append([]string(nil), relay...)
	for _, f := range [][2]string{{"-epsilon", "-target-epsilon"}, {"-delta", "-target-delta"}, {"-min-batch", "-min-batch"}} {
		if flagValue(relay, f[1]) != "" {
			continue
		}
		if v := flagValue(aggregator, f[0]); v != "" {
			out = append(out, f[1], v)
		}
	}
	return out
}

// flagValue returns the last value given to flag name in args ("-name v"
// or "-name=v"), "" if none.
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		switch {
		case a == name && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, name+"="):
			v = strings.TrimPrefix(a, name+"=")
		}
	}
	return v
}

// StartAggregator (re)starts the aggregator process with its persistent
// state (key, ledger, checkpoint).
func (c *Cluster) StartAggregator(ctx context.Context) error {
	args := []string{"serve", "-listen", c.aggAddr, "-relay", c.RelayURL(),
		"-token-file", filepath.Join(c.opts.Dir, "token"), "-state", c.opts.AggregatorDir,
		"-wasm", c.bins.Wasm, "-join-url", c.JoinURL()}
	if c.opts.NewClass {
		args = append(args, "-new-class")
	}
	if c.opts.OperatorToken != "" {
		args = append(args, "-operator-token-file", filepath.Join(c.opts.Dir, "operator-token"))
	}
	args = append(args, c.opts.AggregatorArgs...)
	if c.startPaused {
		args = append(args, "-paused")
	}
	cmd, err := c.launch(ctx, c.bins.Aggregator, args, c.AggregatorURL()+"/healthz")
	if err != nil {
		return fmt.Errorf("localrun: aggregator: %w", err)
	}
	c.agg = cmd
	return nil
}

// StopRelay and StopAggregator stop one process (SIGINT, then SIGKILL after
// 10 s); KillRelay kills the relay at once, as a crash would.
func (c *Cluster) StopRelay() error      { return stop(c.relay, syscall.SIGINT) }
func (c *Cluster) StopAggregator() error { return stop(c.agg, syscall.SIGINT) }
func (c *Cluster) KillRelay() error      { return stop(c.relay, syscall.SIGKILL) }
func (c *Cluster) KillAggregator() error { return stop(c.agg, syscall.SIGKILL) }

// PeakMemory returns the highest resident set (VmHWM, bytes) the running
// relay and aggregator have had, -1 for one that is down or on a system
// without /proc. A new class's aggregator counts from its restart.
func (c *Cluster) PeakMemory() (relay, aggregator int64) {
	peak := func(cmd *exec.Cmd) int64 {
		if cmd == nil || cmd.Process == nil {
			return -1
		}
		return procmem.OfPID(cmd.Process.Pid, procmem.Peak)
	}
	return peak(c.relay), peak(c.agg)
}

// Stop stops the aggregator, then the relay.
func (c *Cluster) Stop() error {
	return errors.Join(stop(c.agg, syscall.SIGINT), stop(c.relay, syscall.SIGINT))
}

// SetArgs replaces the servers' extra arguments (Options.AggregatorArgs,
// RelayArgs) for their next starts: NewClass restarts both.
func (c *Cluster) SetArgs(aggregator, relay []string) {
	c.opts.AggregatorArgs, c.opts.RelayArgs = aggregator, relay
}

// NewClass starts a new class: it stops the aggregator and starts it again,
// on the same address, paused, with a fresh state directory dir, so the new
// class has its own privacy ledger and model and starts when the operator
// presses Start. The new class learns the task the operator chose for it
// on the operator page, or else the previous class's (classTask: from the
// old class's datastore into the new one's, once the old aggregator has
// stopped). The previous class's directory, ledger included, stays on disk
// untouched. The key file is copied so
// that the fingerprint volunteers compare stays the same (the relay keeps
// running and need not refetch it).
//
// It reads and writes the servers' stores in their state directories: a
// cluster whose servers run on PostgreSQL (-store in their arguments) is
// refused, as a new class there is a new schema, not a new directory.
func (c *Cluster) NewClass(ctx context.Context, dir string) error {
	if flagValue(c.opts.AggregatorArgs, "-store") != "" || flagValue(c.opts.RelayArgs, "-store") != "" {
		return errors.New("localrun: new class: the servers run on PostgreSQL (-store): a new class is supported on the embedded store only")
	}
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("localrun: new class: %s already exists", dir)
	}
	key, err := aggregatorKey(c.opts.AggregatorDir)
	if err != nil {
		return fmt.Errorf("localrun: new class: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("localrun: new class: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), key, 0o600); err != nil {
		return fmt.Errorf("localrun: new class: %w", err)
	}
	if err := c.StopAggregator(); err != nil {
		return err
	}
	// The old aggregator is stopped: its choice for the next class can no
	// longer change.
	if err := classTask(c.opts.AggregatorDir, dir); err != nil {
		return err
	}
	// The relay anchors the aggregator's ledger and keeps its own noise
	// ledger (docs/threat-model.md): a fresh ledger is a rollback to it
	// unless its operator (here the same) archives both with the class.
	if err := c.archiveRelayLedgers(ctx); err != nil {
		return err
	}
	c.opts.AggregatorDir, c.startPaused = dir, true
	return c.StartAggregator(ctx)
}

// archiveRelayLedgers stops the relay, moves everything it keeps for the
// class into a class-<unix ms> directory of its state: its noise ledger,
// the aggregator head it holds, and its outbox (every round's marker,
// batch, close, share or abort not yet delivered). Only its helper key
// stays, so the links and the key volunteers seal to do not change. Then
// it starts the relay again.
//
// The outbox goes too: its round numbers belong to the old class. Kept, a
// relay that had run round 5 refused the new class's round 1 as stale
// ("round 1 is not after round 5") and the new class never trained, and an
// old round's undelivered abort would have been sent to the new class's
// aggregator as if it were for its own round of that number (issue 23).
func (c *Cluster) archiveRelayLedgers(ctx context.Context) error {
	if err := c.StopRelay(); err != nil {
		return err
	}
	state := filepath.Join(c.opts.Dir, "relay")
	arch := filepath.Join(state, fmt.Sprintf("class-%d", time.Now().UnixMilli()))
	if err := os.MkdirAll(arch, 0o700); err != nil {
		return fmt.Errorf("localrun: new class: %w", err)
	}
	ents, err := os.ReadDir(state)
	if err != nil {
		return fmt.Errorf("localrun: new class: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == relayHelperKeyFile {
			continue
		}
		if err := os.Rename(filepath.Join(state, e.Name()), filepath.Join(arch, e.Name())); err != nil {
			return fmt.Errorf("localrun: new class: %w", err)
		}
	}
	if err := carryRelayKeys(arch, state); err != nil {
		return fmt.Errorf("localrun: new class: %w", err)
	}
	return c.StartRelay(ctx)
}

// relayKeysBucket is the relay's datastore bucket of its keys
// (relay/internal/relaystore.BucketKeys).
const relayKeysBucket = "relay/keys"

// carryRelayKeys copies the relay's keys from the datastore archived in
// arch into a new datastore in state: the new class's relay starts with
// its helper key and nothing else.
func carryRelayKeys(arch, state string) error {
	if _, err := os.Stat(filepath.Join(arch, datastore.LogFile)); errors.Is(err, os.ErrNotExist) {
		return nil // a relay of the former format: helper.key stayed
	}
	old, err := datastore.Open(arch, nil)
	if err != nil {
		return err
	}
	keys := map[string][]byte{}
	err = old.View(func(tx *datastore.ReadTx) error {
		for _, k := range tx.Keys(relayKeysBucket) {
			v, _ := tx.Get(relayKeysBucket, k)
			keys[k] = bytes.Clone(v)
		}
		return nil
	})
	if err := errors.Join(err, old.Close()); err != nil {
		return err
	}
	db, err := datastore.Open(state, nil)
	if err != nil {
		return err
	}
	err = db.Update(func(tx *datastore.Tx) error {
		for k, v := range keys {
			tx.Put(relayKeysBucket, k, v)
		}
		return nil
	})
	return errors.Join(err, db.Close())
}

// relayHelperKeyFile is the relay's helper key file in a state directory
// of the former format (relay/internal/helperkey.File): kept by a new
// class; today the key is in the relay's datastore (carryRelayKeys).
const relayHelperKeyFile = "helper.key"

// keyFile is the aggregator's key file in a state directory of the former
// format (aggregator/internal/server.KeyFile): a new class gets the old
// one's key as this file, which its first start imports into its
// datastore.
const keyFile = "key.bin"

// aggregatorKey reads the aggregator's key from the datastore of dir,
// read-only (datastore.Scan: the aggregator may be running), in bucket
// aggregator/keys, key "aggregator" (aggregator/internal/sealkey), or
// from the key file of a directory of the former format.
func aggregatorKey(dir string) ([]byte, error) {
	var key []byte
	_, err := datastore.Scan(dir, 0, func(ops []datastore.Op) error {
		for _, o := range ops {
			if o.Bucket == "aggregator/keys" && o.Key == "aggregator" && o.Kind == "put" {
				key = bytes.Clone(o.Value)
			}
		}
		return nil
	})
	if key != nil {
		return key, nil
	}
	if b, ferr := os.ReadFile(filepath.Join(dir, keyFile)); ferr == nil {
		return b, nil
	} else if err == nil {
		err = ferr
	}
	return nil, err
}

func (c *Cluster) launch(ctx context.Context, bin string, args []string, health string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	tail := NewTail(4 << 10)
	cmd.Stdout = c.opts.Stdout
	cmd.Stderr = tail
	if c.opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(c.opts.Stderr, tail)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("%s exited during start (%w); its last output:\n%s", filepath.Base(bin), err, tail.String())
		case <-ctx.Done():
			cmd.Process.Kill()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// Keep reaping the process; Wait must run exactly once.
				procs.Store(cmd, exited)
				return cmd, nil
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, fmt.Errorf("%s did not answer %s; its last output:\n%s", filepath.Base(bin), health, tail.String())
		}
	}
}

// Status is the part of the aggregator's /api/status the runner prints.
type Status struct {
	Round         int      `json:"round"`
	RoundsOK      int      `json:"rounds_ok"`
	Accuracy      *float64 `json:"accuracy"`
	Loss          *float64 `json:"loss"`
	Epsilon       float64  `json:"epsilon"`
	Delta         float64  `json:"delta"`
	Method        string   `json:"method"`
	TargetEpsilon float64  `json:"target_epsilon"`
	Fingerprint   string   `json:"fingerprint"`
	Running       bool     `json:"running"`
	Stopped       string   `json:"stopped"`
}

// Round is the part of one /api/rounds record the runner prints.
type Round struct {
	Round           int      `json:"round"`
	Status          string   `json:"status"`
	Detail          string   `json:"detail"`
	Accuracy        *float64 `json:"accuracy"`
	Loss            *float64 `json:"loss"`
	N               int      `json:"n"`
	NP              int      `json:"n_p"`
	Reports         int      `json:"reports"` // secure summation: the reports the relay sent (N: accepted)
	CheckedIn       int      `json:"checked_in"`
	CheckInRate     float64  `json:"check_in_rate"`
	EpsilonTightest *float64 `json:"epsilon_tightest"`
	Method          string   `json:"method"`
}

// GetJSON fetches a JSON document from the aggregator.
func (c *Cluster) GetJSON(ctx context.Context, path string, v any) error {
	return c.GetJSONFrom(ctx, c.AggregatorURL(), path, v)
}

// GetJSONFrom is GetJSON from the server at base (the relay's, an
// edge's).
func (c *Cluster) GetJSONFrom(ctx context.Context, base, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Rounds returns the aggregator's round history.
func (c *Cluster) Rounds(ctx context.Context) ([]Round, error) {
	var r struct {
		Rounds []Round `json:"rounds"`
	}
	err := c.GetJSON(ctx, "/api/rounds", &r)
	return r.Rounds, err
}

func freeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("localrun: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WaitVolunteers polls the relay's GET /api/round until at least want
// volunteers are connected, or timeout passes (an error saying how many
// were). Volunteers that preprocess their data first (the digits'
// feature map takes seconds for thousands of digits) connect later than
// the servers are up: a test that counts rounds from the start waits for
// them with this.
func (c *Cluster) WaitVolunteers(ctx context.Context, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	have := 0
	for {
		var info struct {
			Volunteers int `json:"volunteers"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.RelayURL()+"/api/round", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			if json.NewDecoder(resp.Body).Decode(&info) == nil {
				have = info.Volunteers
			}
			resp.Body.Close()
			if have >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localrun: %d of %d volunteers connected after %v", have, want, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
