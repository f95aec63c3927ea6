package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestExportLedgerPostgres: `aggregator export-ledger -store ...` writes a
// PostgreSQL store's ledger byte for byte as the ledger itself does
// (Ledger.WriteTo), while the store is open (no lock taken); -state on a
// directory whose state is in PostgreSQL refuses, naming -store.
func TestExportLedgerPostgres(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	dir := t.TempDir()
	db, err := serverstore.Open(context.Background(), serverstore.Config{Dir: dir, URL: c.DSN, Schema: schema}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, _ := privacy.NewSession(1e-5)
	l, err := ledger.OpenStore(db, ledger.Options{TargetEpsilon: 1e6, TargetDelta: 1e-5, Session: s}, ledger.Former{})
	if err != nil {
		t.Fatal(err)
	}
	for r := 1; r <= 3; r++ {
		if err := l.Charge(privacy.Release{Round: r, Protocol: privacy.ProtocolSSSimple, Randomizer: privacy.RandomizerLaplace, Eps0: 0.25, D: 10, K: 10, N: 100, NP: 120}); err != nil {
			t.Fatal(err)
		}
	}
	var want bytes.Buffer
	if _, err := l.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"export-ledger", "-store", c.DSN, "-store-schema", schema}, &out, &errb); code != 0 {
		t.Fatalf("export-ledger -store: exit %d: %s", code, errb.String())
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) || strings.Count(out.String(), "\n") != 3 {
		t.Fatalf("export-ledger -store wrote\n%s\nwant the ledger's own\n%s", out.Bytes(), want.Bytes())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"export-ledger", "-state", dir}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "-store") || out.Len() != 0 {
		t.Fatalf("export-ledger -state on a PostgreSQL directory: exit %d, stderr %q, %d bytes out", code, errb.String(), out.Len())
	}
}
