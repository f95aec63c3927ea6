package server

import (
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/wire"
)

func TestDefaultParams(t *testing.T) {
	p, err := DefaultParams(7850, 200)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 7850, K: 157, L: 5,
		Width: 1, NP: 20, MinBatch: DefaultMinBatch, EpsL: 78.5, Clip: 0.01, CheckInP: 1}
	if p != want {
		t.Fatalf("DefaultParams = %+v, want %+v", p, want)
	}
	if p.Messages() != 785 || p.BatchMessages(p.NP) != 157000 || p.PerCoordinateEpsilon() != 0.5 {
		t.Fatalf("messages %d, batch %d, eps0 %v", p.Messages(), p.BatchMessages(p.NP), p.PerCoordinateEpsilon())
	}
	ps, err := setupProtocol(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.releaseFor(1, 200, 20).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBuildParams(t *testing.T) {
	base := paramFlags{protocol: "ss-topk", randomizer: "laplace", epsL: 78.5, clip: 0.01, checkIn: 1}
	p, lr, err := buildParams(7850, 200, base)
	if err != nil || p.K != 157 || p.L != 5 || p.NP != 20 || lr != 50 {
		t.Fatalf("ss-topk: %+v lr %v err %v", p, lr, err)
	}
	f := base
	f.protocol = "ss-simple"
	if p, lr, err = buildParams(7850, 200, f); err != nil || p.K != 7850 || p.L != 1 || p.Width != 1 || p.NP != 200 || p.Quota != 200 || lr != 1 {
		t.Fatalf("ss-simple: %+v lr %v err %v", p, lr, err)
	}
	f = base
	f.protocol, f.k = "ss-double", 785
	if p, _, err = buildParams(7850, 200, f); err != nil || p.K != 785 || p.L != 1 || p.Width != 1 || p.NP != 20 {
		t.Fatalf("ss-double: %+v err %v", p, err)
	}
	for name, f := range map[string]paramFlags{
		"protocol":   {protocol: "ss-nope", randomizer: "laplace", epsL: 1, clip: 1, checkIn: 1},
		"epsl":       {protocol: "ss-topk", randomizer: "laplace", epsL: -1, clip: 1, checkIn: 1},
		"checkin":    {protocol: "ss-topk", randomizer: "laplace", epsL: 1, clip: 1, checkIn: 1.5},
		"width":      {protocol: "ss-topk", randomizer: "laplace", epsL: 1, clip: 1, checkIn: 1, width: 5},
		"rgb":        {protocol: "ss-topk", randomizer: "rgb", epsL: 1, clip: 1, checkIn: 1},
		"negative k": {protocol: "ss-topk", randomizer: "laplace", epsL: 1, clip: 1, checkIn: 1, k: -3},
	} {
		if _, _, err := buildParams(7850, 200, f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	good := Config{Params: testParams(), RelayURL: "http://127.0.0.1:1", Token: testToken, StateDir: t.TempDir(),
		TargetEpsilon: 1, TargetDelta: 1e-5, Test: testSet(t)}
	if _, err := good.withDefaults(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"short token": func(c *Config) { c.Token = "short" },
		"relay url":   func(c *Config) { c.RelayURL = "ftp://x" },
		"no state":    func(c *Config) { c.StateDir = "" },
		"epsilon":     func(c *Config) { c.TargetEpsilon = 0 },
		"delta":       func(c *Config) { c.TargetDelta = 1 },
		"d mismatch":  func(c *Config) { c.Params.D, c.Params.NP = 10, 2 },
		"rounds":      func(c *Config) { c.Rounds = -1 },
		"timeout":     func(c *Config) { c.RoundTimeout = -1 },
		"server lr":   func(c *Config) { c.ServerLR = -1 },
		"params":      func(c *Config) { c.Params.EpsL = 0 },
	} {
		c := good
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := good
	c.ExpectedN = 100 // 100*2*2/8 = 50 real entries per dimension > n_p = 4
	if _, err := New(c); err == nil || !strings.Contains(err.Error(), "expected n") {
		t.Errorf("expected n beyond the padding: %v", err)
	}
}

func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.bin")
	k1, created, err := sealkey.LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode().Perm(), err)
	}
	k2, created, err := sealkey.LoadOrCreateKey(path)
	if err != nil || created || !k2.Public().Equal(k1.Public()) {
		t.Fatal("reloaded key differs", created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sealkey.LoadOrCreateKey(path); err == nil {
		t.Fatal("a world-readable key was accepted")
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sealkey.LoadOrCreateKey(path); err == nil {
		t.Fatal("a corrupt key was accepted")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestCorruptCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(`{"version":1,"round":1,"model":[0],"unknown":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{Params: testParams(), RelayURL: "http://127.0.0.1:1", Token: testToken, StateDir: dir,
		TargetEpsilon: 1, TargetDelta: 1e-5, Test: testSet(t)}
	if _, err := New(c); err == nil {
		t.Fatal("a corrupt checkpoint was accepted")
	}
}
