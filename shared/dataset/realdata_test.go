package dataset

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// realDataRoot is where `make data` puts the full datasets:
// $BLANKET_DATA_DIR, or the repository's data/ directory.
func realDataRoot() string {
	if d := os.Getenv("BLANKET_DATA_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "data")
}

// TestRealData loads each full dataset that is present on this machine
// (after `make data`, or Debian's dataset-fashion-mnist package) and checks
// its published shape. Datasets that are absent are skipped by name.
func TestRealData(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the full datasets (hundreds of MB of float32)")
	}
	want := map[string][2]int{
		MNISTIDX:     {60000, 10000},
		fashionMNIST: {60000, 10000},
		mnistNPM:     {8000, 2000},
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			train, test, err := Open(name, realDataRoot())
			if errors.Is(err, fs.ErrNotExist) {
				t.Skipf("not present: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if train.Len() != want[name][0] || test.Len() != want[name][1] || train.Features != 784 || test.Features != 784 {
				t.Fatalf("train %d x %d, test %d x %d; want %v x 784", train.Len(), train.Features, test.Len(), test.Features, want[name])
			}
			for _, s := range []*Set{train, test} {
				if err := s.Validate(); err != nil {
					t.Fatal(err)
				}
				for k, c := range s.ClassCounts() {
					// Every class holds 7-13% of each part in all three.
					if frac := float64(c) / float64(s.Len()); frac < 0.07 || frac > 0.13 {
						t.Errorf("class %d is %.3f of %d examples", k, frac, s.Len())
					}
				}
			}
		})
	}
}
