// Package pgtest gives the datastore's tests a PostgreSQL server: the
// database of BLANKET_PG_DSN when it is set, or else a throwaway cluster
// of Debian's postgresql package (initdb into a temporary directory, a
// free loopback port, its unix socket in that directory, run as the
// unprivileged user postgres, or nobody, when the tests run as root),
// started once per test binary and stopped by Stop. Without either the
// PostgreSQL tier is skipped with the reason, unless
// BLANKET_REQUIRE_POSTGRES=1 (CI sets it), when it fails.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is the tests' PostgreSQL server.
type Cluster struct {
	// DSN connects to its database.
	DSN string
	// How says where it comes from (for the tests' log).
	How string

	owned            bool
	bin, dir, data   string
	sock, port, user string
	schemas          atomic.Int64
}

var (
	once   sync.Once
	shared *Cluster
	whyNot error
	// startErr: Check found a server to start, and it did not start.
	startErr error
	stopped  sync.Once
)

// Get returns the test binary's server, starting it on first use. When
// there is none (Check's reason) it skips t, or fails t if
// BLANKET_REQUIRE_POSTGRES=1; a server that is there but does not start
// fails t.
func Get(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() {
		if _, whyNot = Check(); whyNot == nil {
			shared, startErr = start()
		}
	})
	if whyNot != nil {
		if os.Getenv("BLANKET_REQUIRE_POSTGRES") == "1" && runtime.GOOS != "js" {
			t.Fatalf("PostgreSQL tier: %v; BLANKET_REQUIRE_POSTGRES=1 requires it", whyNot)
		}
		t.Skipf("PostgreSQL tier skipped: %v", whyNot)
	}
	if startErr != nil {
		t.Fatalf("PostgreSQL tier: %v", startErr)
	}
	return shared
}

// Check says which server the tier would use, or why there is none,
// without starting one.
func Check() (string, error) {
	if dsn := os.Getenv("BLANKET_PG_DSN"); dsn != "" {
		return "the server of BLANKET_PG_DSN (" + redact(dsn) + ")", nil
	}
	if runtime.GOOS == "js" {
		return "", errors.New("js/wasm runs no processes (the native tier runs it)")
	}
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	how := "a throwaway cluster of " + bin
	if os.Geteuid() == 0 {
		u, err := serverUser()
		if err != nil {
			return "", err
		}
		how += " run as user " + u
	}
	return how, nil
}

// serverUser is the unprivileged user the server runs as when the tests
// run as root (initdb and postgres refuse root).
func serverUser() (string, error) {
	if _, err := exec.LookPath("runuser"); err != nil {
		return "", errors.New("running as root, and runuser (util-linux) is missing to run PostgreSQL as an unprivileged user")
	}
	for _, name := range []string{"postgres", "nobody"} {
		if _, err := user.Lookup(name); err == nil {
			return name, nil
		}
	}
	return "", errors.New("running as root, and there is no unprivileged user postgres or nobody to run PostgreSQL as")
}

// Stop stops the cluster if this binary started one and removes its
// directory (TestMain calls it after the tests).
func Stop() {
	stopped.Do(func() {
		if shared != nil && shared.owned {
			shared.Kill()
			os.RemoveAll(shared.dir)
		}
	})
}

// Start starts a throwaway cluster for a program that is not a test
// (scripts/benchscale): BLANKET_PG_DSN's server if set, else a new cluster
// as Get starts one. The caller stops it with Close.
func StartCluster() (*Cluster, error) {
	if _, err := Check(); err != nil {
		return nil, err
	}
	return start()
}

// Close stops a cluster StartCluster started and removes its directory
// (nothing for BLANKET_PG_DSN's server).
func (c *Cluster) Close() error {
	if !c.owned {
		return nil
	}
	err := c.Kill()
	if rerr := os.RemoveAll(c.dir); err == nil {
		err = rerr
	}
	return err
}

// Restart restarts the server as an operator would (pg_ctl restart -m
// fast: its sessions are terminated, a shutdown checkpoint is written,
// and it starts again on the same port).
func (c *Cluster) Restart() error {
	if !c.owned {
		return errors.New("pgtest: the server of BLANKET_PG_DSN is not the tests' to restart")
	}
	if err := c.ctl("stop", "-m", "fast"); err != nil {
		return err
	}
	return c.Start()
}

// FailCommit runs update, one Update (or a server's step that makes
// some) of the store in schema, so that its commit fails with its outcome
// unknown: another session holds the schema's table (kv) in EXCLUSIVE
// mode, which lets reads through and holds back writes, so the Update's
// reads run and its batch of writes (and COMMIT) is sent and waits; the
// server is killed (pg_ctl stop -m immediate) while it waits, and started
// again. It returns update's error (one wrapping datastore.ErrNotDurable
// for a lone Update). It skips t on a server that is not the tests'.
func (c *Cluster) FailCommit(t testing.TB, schema string, update func() error) error {
	t.Helper()
	if !c.Owned() {
		t.Skip("the server of BLANKET_PG_DSN is not the tests' to kill")
	}
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE "+pgx.Identifier{schema, "kv"}.Sanitize()+" IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- update() }()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("the Update returned %v while its lock was held", err)
		default:
		}
		if err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return err
}

// Owned reports whether the tests started the server (and so may kill
// and restart it).
func (c *Cluster) Owned() bool { return c.owned }

// Schema returns a schema name no other test of any process uses, and
// drops the schema when t ends.
func (c *Cluster) Schema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("dstest_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000, c.schemas.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			return // the server is down: the test said why
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return name
}

// Kill stops the server at once, as a crash would (pg_ctl stop -m
// immediate: no checkpoint, recovery replays the WAL at the next start).
func (c *Cluster) Kill() error {
	if !c.owned {
		return errors.New("pgtest: the server of BLANKET_PG_DSN is not the tests' to stop")
	}
	return c.ctl("stop", "-m", "immediate")
}

// Start starts the server again after Kill.
func (c *Cluster) Start() error {
	if !c.owned {
		return errors.New("pgtest: the server of BLANKET_PG_DSN is not the tests' to start")
	}
	return c.ctl("start", "-l", filepath.Join(c.dir, "server.log"),
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %s -c unix_socket_directories=%s -c max_connections=40 -c shared_buffers=16MB", c.port, c.sock))
}

func (c *Cluster) ctl(args ...string) error {
	args = append(args, "-D", c.data, "-w", "-t", "300")
	out, err := c.run(filepath.Join(c.bin, "pg_ctl"), args...)
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl %s: %w\n%s%s", args[0], err, out, c.serverLog())
	}
	return nil
}

func (c *Cluster) serverLog() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// run runs a PostgreSQL program, as c.user when that is set.
func (c *Cluster) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(prog, args...)
	if c.user != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.user, "--", prog}, args...)...)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// BinDir finds initdb and pg_ctl: on PATH, or in Debian's
// /usr/lib/postgresql/VERSION/bin (the newest).
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb and pg_ctl on PATH nor in /usr/lib/postgresql/*/bin (Debian's postgresql package), and BLANKET_PG_DSN is not set")
}

func start() (*Cluster, error) {
	if dsn := os.Getenv("BLANKET_PG_DSN"); dsn != "" {
		c := &Cluster{DSN: dsn, How: "BLANKET_PG_DSN"}
		return c, c.ping()
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{owned: true, bin: bin}
	if os.Geteuid() == 0 {
		if c.user, err = serverUser(); err != nil {
			return nil, err
		}
	}
	base := os.TempDir()
	if fi, err := os.Stat(base); c.user != "" && (err != nil || fi.Mode().Perm()&0o001 == 0) {
		base = "/tmp" // the server's user must reach its directory
	}
	c.reapStale(base)
	if c.dir, err = os.MkdirTemp(base, "blanket-pgtest-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// Whose cluster it is: a test binary killed before Stop (a timeout)
	// leaves it running, and the next one stops it.
	if err := os.WriteFile(filepath.Join(c.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c.data, c.sock = filepath.Join(c.dir, "data"), filepath.Join(c.dir, "sock")
	if err := os.Mkdir(c.sock, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if c.user != "" {
		if out, err := exec.Command("chown", "-R", c.user, c.dir).CombinedOutput(); err != nil {
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("pgtest: chown %s: %w: %s", c.dir, err, out)
		}
	}
	if out, err := c.run(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("pgtest: initdb (%s): %w\n%s", bin, err, out)
	}
	// A free loopback port; another process may take it before the server
	// does, so a failed start is tried again on a new one.
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		c.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		if err = c.Start(); err == nil {
			break
		}
		if attempt == 2 {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
	c.DSN = "postgres://postgres@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
	c.How = "a throwaway cluster of " + bin + " on port " + c.port + " in " + c.dir
	if c.user != "" {
		c.How += " as user " + c.user
	}
	if err := c.ping(); err != nil {
		c.Kill()
		os.RemoveAll(c.dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		return fmt.Errorf("pgtest: connecting to %s: %w", redact(c.DSN), err)
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// redact drops a password from a DSN for messages.
func redact(dsn string) string {
	if i, j := strings.Index(dsn, "://"), strings.LastIndex(dsn, "@"); i >= 0 && j > i {
		if k := strings.Index(dsn[i+3:j], ":"); k >= 0 {
			return dsn[:i+3+k] + ":***" + dsn[j:]
		}
	}
	return dsn
}

// ServerCPU is the CPU time (user + system) the server's processes have
// used so far: the postmaster's own and its reaped children's, and its
// live children's (/proc, in ticks of 10 ms: Linux's USER_HZ is 100).
// For benchmarks, beside the client process's own CPU time.
func (c *Cluster) ServerCPU() (time.Duration, error) {
	if !c.owned {
		return 0, errors.New("pgtest: not the tests' server")
	}
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	pid := strings.SplitN(string(b), "\n", 2)[0]
	// stat returns fields 4 (ppid) and 14-17 (utime, stime, cutime,
	// cstime) of /proc/PID/stat; field 2 (comm) may hold spaces, so
	// fields are counted after its closing parenthesis.
	stat := func(p string) (ppid string, ticks [4]int64, err error) {
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			return "", ticks, err
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 15 {
			return "", ticks, fmt.Errorf("pgtest: /proc/%s/stat: %d fields", p, len(f))
		}
		for i := range 4 {
			ticks[i], _ = strconv.ParseInt(f[11+i], 10, 64)
		}
		return f[1], ticks, nil
	}
	_, t, err := stat(pid)
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	total := t[0] + t[1] + t[2] + t[3]
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil || p.Name() == pid {
			continue
		}
		if ppid, t, err := stat(p.Name()); err == nil && ppid == pid {
			total += t[0] + t[1]
		}
	}
	return time.Duration(total) * 10 * time.Millisecond, nil
}

// reapStale stops and removes the clusters in base whose test binary is
// gone (killed before Stop ran).
func (c *Cluster) reapStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "blanket-pgtest-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b))); err == nil {
			continue // its test binary still runs
		}
		old := &Cluster{owned: true, bin: c.bin, dir: d, data: filepath.Join(d, "data"), user: c.user}
		if _, err := os.Stat(filepath.Join(old.data, "postmaster.pid")); err == nil {
			old.Kill()
		}
		os.RemoveAll(d)
	}
}
