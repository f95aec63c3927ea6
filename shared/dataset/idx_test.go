package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// idxImages builds an idx3-ubyte stream by hand (independently of WriteIDX):
// header (magic, n, rows, cols) followed by pix.
func idxImages(magic, n, rows, cols uint32, pix []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, magic)
	b = binary.BigEndian.AppendUint32(b, n)
	b = binary.BigEndian.AppendUint32(b, rows)
	b = binary.BigEndian.AppendUint32(b, cols)
	return append(b, pix...)
}

// idxLabels builds an idx1-ubyte stream by hand.
func idxLabels(magic, n uint32, labels []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, magic)
	b = binary.BigEndian.AppendUint32(b, n)
	return append(b, labels...)
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// validPair is 3 images of 2x3 pixels with labels 7, 0, 9.
var (
	validPix    = []byte{0, 1, 2, 3, 254, 255, 10, 20, 30, 40, 50, 60, 128, 127, 0, 0, 0, 255}
	validLabels = []byte{7, 0, 9}
	validImgs   = idxImages(idxImagesMagic, 3, 2, 3, validPix)
	validLbls   = idxLabels(idxLabelsMagic, 3, validLabels)
)

func TestReadIDXValid(t *testing.T) {
	for _, c := range []struct {
		name         string
		imgs, labels []byte
	}{
		{"raw", validImgs, validLbls},
		{"gzip", gz(t, validImgs), gz(t, validLbls)},
		{"gzip images only", gz(t, validImgs), validLbls},
		{"gzip labels only", validImgs, gz(t, validLbls)},
	} {
		s, err := ReadIDX(bytes.NewReader(c.imgs), bytes.NewReader(c.labels))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Len() != 3 || s.Features != 6 || s.Classes != idxClasses || !slices.Equal(s.Y, validLabels) {
			t.Fatalf("%s: got %d examples, %d features, %d classes, labels %v", c.name, s.Len(), s.Features, s.Classes, s.Y)
		}
		for j, v := range validPix {
			if want := float32(v) / 255; s.X[j] != want {
				t.Errorf("%s: X[%d] = %v, want %v", c.name, j, s.X[j], want)
			}
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Zero examples is a valid (empty) file pair.
	s, err := ReadIDX(bytes.NewReader(idxImages(idxImagesMagic, 0, 28, 28, nil)), bytes.NewReader(idxLabels(idxLabelsMagic, 0, nil)))
	if err != nil || s.Len() != 0 || s.Features != 784 {
		t.Errorf("empty pair: %v, %+v", err, s)
	}
}

func TestWriteIDXRoundTrip(t *testing.T) {
	s, err := ReadIDX(bytes.NewReader(validImgs), bytes.NewReader(validLbls))
	if err != nil {
		t.Fatal(err)
	}
	var img, lbl bytes.Buffer
	if err := WriteIDX(&img, &lbl, s, 2, 3); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Bytes(), validImgs) || !bytes.Equal(lbl.Bytes(), validLbls) {
		t.Errorf("WriteIDX did not reproduce the input bytes:\n%v\n%v", img.Bytes(), lbl.Bytes())
	}
	// Rounding: 0.5/255 off the grid rounds to the nearest byte.
	s2 := &Set{X: []float32{0.3 / 255, 1.6 / 255, 1}, Y: []uint8{3}, Features: 3, Classes: 10}
	img.Reset()
	lbl.Reset()
	if err := WriteIDX(&img, &lbl, s2, 1, 3); err != nil {
		t.Fatal(err)
	}
	if got := img.Bytes()[16:]; !slices.Equal(got, []byte{0, 2, 255}) {
		t.Errorf("quantized pixels = %v, want [0 2 255]", got)
	}
	bad := []struct {
		name       string
		s          *Set
		rows, cols int
	}{
		{"dims mismatch", s, 3, 3},
		{"zero rows", s, 0, 6},
		{"value > 1", &Set{X: []float32{1.5}, Y: []uint8{0}, Features: 1, Classes: 10}, 1, 1},
		{"negative value", &Set{X: []float32{-0.1}, Y: []uint8{0}, Features: 1, Classes: 10}, 1, 1},
		{"invalid set", &Set{X: []float32{0}, Y: []uint8{0}, Features: 2, Classes: 10}, 1, 2},
	}
	for _, c := range bad {
		if err := WriteIDX(io.Discard, io.Discard, c.s, c.rows, c.cols); err == nil {
			t.Errorf("%s: WriteIDX succeeded", c.name)
		}
	}
	if err := WriteIDX(nil, io.Discard, s, 2, 3); !errors.Is(err, ErrArgument) {
		t.Errorf("nil writer: err = %v", err)
	}
}

// flip returns a copy of b with byte i xored with 0xff.
func flip(b []byte, i int) []byte {
	c := slices.Clone(b)
	c[i] ^= 0xff
	return c
}

type idxCase struct {
	name         string
	imgs, labels []byte
	want         error // matched with errors.Is
}

func idxErrorCases(t testing.TB) []idxCase {
	gzImgs := gz(t, validImgs)
	return []idxCase{
		{"empty images", nil, validLbls, io.ErrUnexpectedEOF},
		{"empty labels", validImgs, nil, io.ErrUnexpectedEOF},
		{"short magic", validImgs[:3], validLbls, io.ErrUnexpectedEOF},
		{"truncated images header", validImgs[:10], validLbls, io.ErrUnexpectedEOF},
		{"truncated labels header", validImgs, validLbls[:6], io.ErrUnexpectedEOF},
		{"labels file as images", validLbls, validLbls, ErrFormat},
		{"images file as labels", validImgs, validImgs, ErrFormat},
		{"float idx3", idxImages(0x00000D03, 3, 2, 3, validPix), validLbls, ErrFormat},
		{"idx2 ubyte", idxImages(0x00000802, 3, 2, 3, validPix), validLbls, ErrFormat},
		{"count mismatch", validImgs, idxLabels(idxLabelsMagic, 2, validLabels[:2]), ErrFormat},
		{"zero rows", idxImages(idxImagesMagic, 3, 0, 3, nil), validLbls, ErrFormat},
		{"zero cols", idxImages(idxImagesMagic, 3, 2, 0, nil), validLbls, ErrFormat},
		{"label 10", validImgs, idxLabels(idxLabelsMagic, 3, []byte{1, 10, 2}), ErrFormat},
		{"label 255", validImgs, idxLabels(idxLabelsMagic, 3, []byte{1, 2, 255}), ErrFormat},
		{"truncated pixels", validImgs[:len(validImgs)-1], validLbls, io.ErrUnexpectedEOF},
		{"truncated labels", validImgs, validLbls[:len(validLbls)-1], io.ErrUnexpectedEOF},
		{"trailing image byte", append(slices.Clone(validImgs), 0), validLbls, ErrFormat},
		{"trailing label byte", validImgs, append(slices.Clone(validLbls), 0), ErrFormat},
		{"absurd count", idxImages(idxImagesMagic, math.MaxUint32, 28, 28, nil), idxLabels(idxLabelsMagic, math.MaxUint32, nil), ErrLimit},
		{"absurd label count", validImgs, idxLabels(idxLabelsMagic, math.MaxUint32, nil), ErrLimit},
		{"absurd dims", idxImages(idxImagesMagic, 1, math.MaxUint32, math.MaxUint32, nil), validLbls, ErrLimit},
		{"too many values", idxImages(idxImagesMagic, 1<<20, 256, 256, nil), idxLabels(idxLabelsMagic, 1<<20, nil), ErrLimit},
		{"gzip bad header", []byte{0x1f, 0x8b, 0, 0, 0}, validLbls, ErrFormat},
		{"gzip truncated", gzImgs[:len(gzImgs)/2], validLbls, io.ErrUnexpectedEOF},
		{"gzip bad crc", flip(gzImgs, len(gzImgs)-6), validLbls, ErrFormat},
		{"gzip trailing garbage", append(slices.Clone(gzImgs), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), validLbls, ErrFormat},
	}
}

func TestReadIDXErrors(t *testing.T) {
	for _, c := range idxErrorCases(t) {
		s, err := ReadIDX(bytes.NewReader(c.imgs), bytes.NewReader(c.labels))
		if err == nil {
			t.Errorf("%s: ReadIDX succeeded with %d examples", c.name, s.Len())
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want errors.Is %v", c.name, err, c.want)
		}
	}
	if _, err := ReadIDX(nil, bytes.NewReader(validLbls)); !errors.Is(err, ErrArgument) {
		t.Errorf("nil reader: err = %v", err)
	}
	if _, err := readIDXLimits(bytes.NewReader(validImgs), bytes.NewReader(validLbls), limits{}); !errors.Is(err, ErrArgument) {
		t.Errorf("zero limits: err = %v", err)
	}
	tight := limits{MaxExamples: 2, MaxFeatures: 784, MaxValues: 1 << 20}
	if _, err := readIDXLimits(bytes.NewReader(validImgs), bytes.NewReader(validLbls), tight); !errors.Is(err, ErrLimit) {
		t.Errorf("3 examples over a limit of 2: err = %v", err)
	}
}

// A header that declares a large body which is not there must not cost the
// declared size. 250,000 images of 28x28 (196 million values, under
// defaultLimits) would be 784 MB of float32; the stream holds 3 images.
func TestReadIDXTruncatedDoesNotAllocateDeclaredSize(t *testing.T) {
	const n = 250_000
	imgs := idxImages(idxImagesMagic, n, 28, 28, make([]byte, 3*784))
	lbls := idxLabels(idxLabelsMagic, n, make([]byte, n))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadIDX(bytes.NewReader(imgs), bytes.NewReader(lbls))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Errorf("allocated %d bytes for a truncated stream, want < 8 MiB", got)
	}
}

func TestLoadIDXFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ip := write("a-images", gz(t, validImgs))
	lp := write("a-labels", validLbls)
	s, err := loadIDX(ip, lp)
	if err != nil || s.Len() != 3 {
		t.Fatalf("LoadIDX: %v", err)
	}
	if _, err := loadIDX(filepath.Join(dir, "missing"), lp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	bad := write("bad-labels", idxLabels(idxLabelsMagic, 3, []byte{1, 2, 11}))
	if _, err := loadIDX(ip, bad); !errors.Is(err, ErrFormat) {
		t.Errorf("bad labels file: err = %v", err)
	}

	// Directory layout: every accepted spelling of the four files.
	names := map[string][]byte{
		"train-images-idx3-ubyte.gz": gz(t, validImgs),
		"train-labels.idx1-ubyte":    validLbls,
		"t10k-images.idx3-ubyte.gz":  gz(t, idxImages(idxImagesMagic, 1, 2, 3, validPix[:6])),
		"t10k-labels-idx1-ubyte":     idxLabels(idxLabelsMagic, 1, []byte{4}),
	}
	idxDir := filepath.Join(dir, "idx")
	if err := os.Mkdir(idxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range names {
		if err := os.WriteFile(filepath.Join(idxDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	train, test, err := loadIDXDir(idxDir)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 3 || test.Len() != 1 || test.Y[0] != 4 {
		t.Errorf("LoadIDXDir: train %d, test %d examples", train.Len(), test.Len())
	}
	if _, _, err := loadIDXDir(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory without IDX files: err = %v", err)
	}
	// Train and test with different image sizes are rejected.
	if err := os.WriteFile(filepath.Join(idxDir, "t10k-images.idx3-ubyte.gz"),
		idxImages(idxImagesMagic, 1, 1, 6, validPix[:6]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadIDXDir(idxDir); err != nil {
		t.Errorf("1x6 vs 2x3 is the same feature count and should load: %v", err)
	}
	if err := os.WriteFile(filepath.Join(idxDir, "t10k-images.idx3-ubyte.gz"),
		idxImages(idxImagesMagic, 1, 1, 5, validPix[:5]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadIDXDir(idxDir); !errors.Is(err, ErrFormat) {
		t.Errorf("train 6 features, test 5: err = %v", err)
	}
}

// FuzzReadIDX checks that arbitrary image and label streams never panic,
// fail only with a classified error, and that whatever loads is a valid Set
// that WriteIDX reproduces exactly.
func FuzzReadIDX(f *testing.F) {
	f.Add(validImgs, validLbls)
	f.Add(gz(f, validImgs), gz(f, validLbls))
	for _, c := range idxErrorCases(f) {
		f.Add(c.imgs, c.labels)
	}
	lim := limits{MaxExamples: 1 << 10, MaxFeatures: 1 << 10, MaxValues: 1 << 16}
	f.Fuzz(func(t *testing.T, imgs, labels []byte) {
		s, err := readIDXLimits(bytes.NewReader(imgs), bytes.NewReader(labels), lim)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrLimit) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("loaded an invalid set: %v", err)
		}
		var img, lbl bytes.Buffer
		if err := WriteIDX(&img, &lbl, s, 1, s.Features); err != nil {
			t.Fatalf("WriteIDX of a loaded set: %v", err)
		}
		back, err := readIDXLimits(&img, &lbl, lim)
		if err != nil {
			t.Fatalf("re-reading: %v", err)
		}
		if !slices.Equal(back.X, s.X) || !slices.Equal(back.Y, s.Y) {
			t.Fatal("round trip changed the set")
		}
	})
}

func BenchmarkReadIDXGzip(b *testing.B) {
	// 1,000 random-ish 28x28 images.
	pix := make([]byte, 1000*784)
	for i := range pix {
		pix[i] = byte(i * 7 % 251)
	}
	imgs := gz(b, idxImages(idxImagesMagic, 1000, 28, 28, pix))
	lbls := gz(b, idxLabels(idxLabelsMagic, 1000, make([]byte, 1000)))
	b.SetBytes(int64(len(pix)))
	for b.Loop() {
		if _, err := ReadIDX(bytes.NewReader(imgs), bytes.NewReader(lbls)); err != nil {
			b.Fatal(err)
		}
	}
}
