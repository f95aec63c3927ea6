package task

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

var updatePubstats = flag.Bool("update-pubstats", false, "rewrite shared/task/pubstats from the embedded digits")

// pubstatsMaps are the maps whose standardization on the embedded digits'
// training part is shipped precomputed (the built-in digits task's).
var pubstatsMaps = []string{"scatter1"}

// TestPubstatsAreFitted: every embedded standardization is exactly
// dataset.FitStandardizer of the mapped public training part (the
// embedded digits, sample.TrainTest), byte for byte, and carries that
// part's digest; so a party that reads the file and one that fits it
// preprocess identically. It maps the 8,000 training digits (about 30 s of
// one core), so -short skips it.
func TestPubstatsAreFitted(t *testing.T) {
	if testing.Short() && !*updatePubstats {
		t.Skip("maps 8,000 digits")
	}
	train, _, err := sample.TrainTest()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range pubstatsMaps {
		tk := imageTask(t, name, PreprocessPublicStandardize)
		p := &Prep{fmap: tk.fmap, in: tk.Inputs(), out: tk.ModelFeatures(), mapName: name}
		mapped, err := p.Map(train)
		if err != nil {
			t.Fatal(err)
		}
		z, err := dataset.FitStandardizer(mapped)
		if err != nil {
			t.Fatal(err)
		}
		zb, err := z.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		d := TrainDigest(train)
		want := append(d[:], zb...)
		if *updatePubstats {
			if err := os.WriteFile(filepath.Join("pubstats", name+".bin"), want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := pubstats.ReadFile(pubstatsFile(name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("pubstats/%s.bin differs from the fitted standardization (%d vs %d bytes); rerun with -update-pubstats", name, len(got), len(want))
		}
		// FitPrep reads it (no refit) and gives the same features.
		fp, err := tk.FitPrep(train)
		if err != nil {
			t.Fatal(err)
		}
		if !fp.FromEmbedded() {
			t.Errorf("%s: FitPrep refitted instead of reading the embedded statistics", name)
		}
	}
}
