package ledger

import (
	"path/filepath"
	"testing"
)

// BenchmarkCharge measures one charge: validation, composition of the
// growing ledger by the basic composer, one write and one fsync. The fsync
// dominates on real disks; t.TempDir may be tmpfs.
func BenchmarkCharge(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "l"), opts(1e18))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	round := 0
	for b.Loop() {
		round++
		if err := l.Charge(rel(round, 0.25)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen1000 measures a restart: opening and replaying a ledger of
// 1000 rounds (parse, CRC, validation, one composition).
func BenchmarkOpen1000(b *testing.B) {
	path := filepath.Join(b.TempDir(), "l")
	l, err := Open(path, opts(1e18))
	if err != nil {
		b.Fatal(err)
	}
	for r := 1; r <= 1000; r++ {
		if err := l.Charge(rel(r, 0.25)); err != nil {
			b.Fatal(err)
		}
	}
	l.Close()
	b.ReportAllocs()
	for b.Loop() {
		l, err := Open(path, opts(1e18))
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}
