package dataset

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
)

// IDX magic numbers: two zero bytes, the element type (0x08 = unsigned
// byte) and the number of dimensions.
const (
	idxImagesMagic = 0x00000803 // idx3-ubyte: count, rows, cols
	idxLabelsMagic = 0x00000801 // idx1-ubyte: count
)

// idxClasses is the number of classes of MNIST and Fashion-MNIST; IDX
// label files with a label >= idxClasses are rejected.
const idxClasses = 10

// limits bounds the sizes a loader accepts from an untrusted header. A
// header that declares more is rejected with ErrLimit before anything is
// allocated for it; below the limits, memory still grows only as data
// actually arrives, so a truncated file never costs its declared size.
type limits struct {
	// MaxExamples bounds the number of images or labels in one file.
	MaxExamples int
	// MaxFeatures bounds the features per example (rows*cols for IDX,
	// and 784 is fixed for the npm format).
	MaxFeatures int
	// MaxValues bounds examples*features, the float32 values of one Set.
	MaxValues int64
}

// defaultLimits returns limits that admit every MNIST-family file
// (60,000 x 784 for the training sets) with room to spare: 2^20 examples,
// 2^16 features (256x256 images) and 2^28 values (1 GiB of float32).
func defaultLimits() limits {
	return limits{MaxExamples: 1 << 20, MaxFeatures: 1 << 16, MaxValues: 1 << 28}
}

// Validate reports whether all limits are positive.
func (l limits) Validate() error {
	if l.MaxExamples <= 0 || l.MaxFeatures <= 0 || l.MaxValues <= 0 {
		return fmt.Errorf("dataset: limits %+v: every limit must be positive: %w", l, ErrArgument)
	}
	return nil
}

// ReadIDX reads a Set from an IDX images stream (idx3-ubyte) and the
// matching IDX labels stream (idx1-ubyte), each gzipped or not (detected by
// the gzip magic bytes 1f 8b). Pixels are scaled to [0,1] as byte/255,
// Features is rows*cols and Classes is idxClasses. It applies defaultLimits.
func ReadIDX(images, labels io.Reader) (*Set, error) {
	return readIDXLimits(images, labels, defaultLimits())
}

// readIDXLimits is ReadIDX with explicit limits.
//
// Both headers are read and cross-checked (same count) before either body
// is read. Each stream must end right after its body: trailing bytes are a
// format error, and reading to the end verifies a gzip stream's checksum.
func readIDXLimits(images, labels io.Reader, lim limits) (*Set, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if images == nil || labels == nil {
		return nil, fmt.Errorf("dataset: idx: nil reader: %w", ErrArgument)
	}
	imgR, err := decompress(images)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx images: %w", err)
	}
	lblR, err := decompress(labels)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx labels: %w", err)
	}
	n, rows, cols, err := readImagesHeader(imgR, lim)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx images: %w", err)
	}
	nl, err := readLabelsHeader(lblR, lim)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx labels: %w", err)
	}
	if n != nl {
		return nil, fmt.Errorf("dataset: idx: %d images but %d labels: %w", n, nl, ErrFormat)
	}
	x, err := readPixels(imgR, n, rows*cols)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx images: %w", err)
	}
	y, err := readLabelBytes(lblR, n, idxClasses)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx labels: %w", err)
	}
	return &Set{X: x, Y: y, Features: rows * cols, Classes: idxClasses}, nil
}

// loadIDX reads a Set from an IDX images file and an IDX labels file.
func loadIDX(imagesPath, labelsPath string) (*Set, error) {
	fi, err := os.Open(imagesPath)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer fi.Close()
	fl, err := os.Open(labelsPath)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer fl.Close()
	s, err := ReadIDX(fi, fl)
	if err != nil {
		return nil, fmt.Errorf("%w (files %s, %s)", err, imagesPath, labelsPath)
	}
	return s, nil
}

// idxFileNames returns, in the order they are tried, the file names
// readIDXFS accepts for one part ("train" or "t10k") and kind ("images" or
// "labels"): the standard name (train-images-idx3-ubyte), the same with a
// dot before idx (train-images.idx3-ubyte, as some mirrors spell it), each
// gzipped (.gz) or not.
func idxFileNames(part, kind string) []string {
	dims := "3"
	if kind == "labels" {
		dims = "1"
	}
	var out []string
	for _, sep := range []string{"-", "."} {
		base := part + "-" + kind + sep + "idx" + dims + "-ubyte"
		out = append(out, base+".gz", base)
	}
	return out
}

// readIDXFS reads the standard four-file layout of MNIST and Fashion-MNIST
// from the root of fsys: train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each possibly gzipped
// (see idxFileNames).
func readIDXFS(fsys fs.FS) (train, test *Set, err error) {
	train, err = readIDXPart(fsys, "train")
	if err != nil {
		return nil, nil, err
	}
	test, err = readIDXPart(fsys, "t10k")
	if err != nil {
		return nil, nil, err
	}
	if train.Features != test.Features {
		return nil, nil, fmt.Errorf("dataset: idx: train has %d features, test %d: %w",
			train.Features, test.Features, ErrFormat)
	}
	return train, test, nil
}

// loadIDXDir reads the standard four IDX files from a directory (see
// readIDXFS).
func loadIDXDir(dir string) (train, test *Set, err error) {
	train, test, err = readIDXFS(os.DirFS(dir))
	if err != nil {
		return nil, nil, fmt.Errorf("%w (directory %s)", err, dir)
	}
	return train, test, nil
}

func readIDXPart(fsys fs.FS, part string) (*Set, error) {
	imgName, err := findFile(fsys, idxFileNames(part, "images"))
	if err != nil {
		return nil, err
	}
	lblName, err := findFile(fsys, idxFileNames(part, "labels"))
	if err != nil {
		return nil, err
	}
	fi, err := fsys.Open(imgName)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer fi.Close()
	fl, err := fsys.Open(lblName)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer fl.Close()
	s, err := ReadIDX(fi, fl)
	if err != nil {
		return nil, fmt.Errorf("%w (files %s, %s)", err, imgName, lblName)
	}
	return s, nil
}

// findFile returns the first of names that exists as a regular file (or a
// link to one) in fsys.
func findFile(fsys fs.FS, names []string) (string, error) {
	for _, name := range names {
		if st, err := fs.Stat(fsys, name); err == nil && !st.IsDir() {
			return name, nil
		}
	}
	return "", fmt.Errorf("dataset: none of %v found: %w", names, fs.ErrNotExist)
}

// WriteIDX writes s as an IDX images stream (rows x cols per example) and
// an IDX labels stream, uncompressed (wrap the writers in gzip.Writer to
// compress). Each feature x in [0,1] is stored as the byte round(255*x), so
// a Set read by ReadIDX is written back bit-for-bit. Features outside
// [0,1] or NaN, labels above 255 or rows*cols != s.Features are errors.
func WriteIDX(images, labels io.Writer, s *Set, rows, cols int) error {
	if images == nil || labels == nil {
		return fmt.Errorf("dataset: write idx: nil writer: %w", ErrArgument)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("dataset: write idx: %w", err)
	}
	if rows <= 0 || cols <= 0 || rows > math.MaxUint32/cols || rows*cols != s.Features {
		return fmt.Errorf("dataset: write idx: %dx%d images do not have %d features: %w",
			rows, cols, s.Features, ErrArgument)
	}
	if uint64(s.Len()) > math.MaxUint32 {
		return fmt.Errorf("dataset: write idx: %d examples do not fit a uint32 count: %w", s.Len(), ErrArgument)
	}
	var hdr [16]byte
	binary.BigEndian.PutUint32(hdr[0:], idxImagesMagic)
	binary.BigEndian.PutUint32(hdr[4:], uint32(s.Len()))
	binary.BigEndian.PutUint32(hdr[8:], uint32(rows))
	binary.BigEndian.PutUint32(hdr[12:], uint32(cols))
	if _, err := images.Write(hdr[:]); err != nil {
		return fmt.Errorf("dataset: write idx images: %w", err)
	}
	buf := make([]byte, 0, 1<<16)
	for j, v := range s.X {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("dataset: write idx: example %d feature %d = %v outside [0,1]: %w",
				j/s.Features, j%s.Features, v, ErrArgument)
		}
		buf = append(buf, uint8(math.Round(float64(v)*255)))
		if len(buf) == cap(buf) || j == len(s.X)-1 {
			if _, err := images.Write(buf); err != nil {
				return fmt.Errorf("dataset: write idx images: %w", err)
			}
			buf = buf[:0]
		}
	}
	binary.BigEndian.PutUint32(hdr[0:], idxLabelsMagic)
	binary.BigEndian.PutUint32(hdr[4:], uint32(s.Len()))
	if _, err := labels.Write(hdr[:8]); err != nil {
		return fmt.Errorf("dataset: write idx labels: %w", err)
	}
	if _, err := labels.Write(s.Y); err != nil {
		return fmt.Errorf("dataset: write idx labels: %w", err)
	}
	return nil
}

// decompress returns r, transparently gunzipped if it starts with the gzip
// magic bytes 1f 8b. (IDX files start with 00 00, so there is no clash.)
func decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err != nil {
		// Too short for either format; let the header read report it.
		return br, nil
	}
	if magic[0] != 0x1f || magic[1] != 0x8b {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("gzip header: %w: %w", ErrFormat, eofIsUnexpected(err))
	}
	return zr, nil
}

// readHeader reads the 4-byte magic and the ndims big-endian uint32
// dimensions that follow it.
func readHeader(r io.Reader, wantMagic uint32, kind string) ([]uint32, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:4]); err != nil {
		return nil, fmt.Errorf("reading header: %w", wrapRead(err))
	}
	magic := binary.BigEndian.Uint32(b[:4])
	if magic != wantMagic {
		return nil, fmt.Errorf("magic number 0x%08x, want 0x%08x (%s): %w", magic, wantMagic, kind, ErrFormat)
	}
	ndims := int(wantMagic & 0xff)
	if _, err := io.ReadFull(r, b[:4*ndims]); err != nil {
		return nil, fmt.Errorf("reading header: %w", wrapRead(err))
	}
	dims := make([]uint32, ndims)
	for i := range dims {
		dims[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	return dims, nil
}

func readImagesHeader(r io.Reader, lim limits) (n, rows, cols int, err error) {
	dims, err := readHeader(r, idxImagesMagic, "idx3-ubyte images")
	if err != nil {
		return 0, 0, 0, err
	}
	// Compare in uint64 so that no product overflows, whatever the header says.
	n64, r64, c64 := uint64(dims[0]), uint64(dims[1]), uint64(dims[2])
	if n64 > uint64(lim.MaxExamples) {
		return 0, 0, 0, fmt.Errorf("header declares %d images, limit %d: %w", n64, lim.MaxExamples, ErrLimit)
	}
	if r64 == 0 || c64 == 0 {
		return 0, 0, 0, fmt.Errorf("header declares %dx%d images: %w", r64, c64, ErrFormat)
	}
	features := r64 * c64 // < 2^64 as both are < 2^32
	if features > uint64(lim.MaxFeatures) {
		return 0, 0, 0, fmt.Errorf("header declares %dx%d images, limit %d pixels: %w", r64, c64, lim.MaxFeatures, ErrLimit)
	}
	if n64 > 0 && features > uint64(lim.MaxValues)/n64 { // n*features > MaxValues, without overflow
		return 0, 0, 0, fmt.Errorf("header declares %d images of %dx%d, limit %d values: %w",
			n64, r64, c64, lim.MaxValues, ErrLimit)
	}
	return int(n64), int(r64), int(c64), nil
}

func readLabelsHeader(r io.Reader, lim limits) (int, error) {
	dims, err := readHeader(r, idxLabelsMagic, "idx1-ubyte labels")
	if err != nil {
		return 0, err
	}
	if uint64(dims[0]) > uint64(lim.MaxExamples) {
		return 0, fmt.Errorf("header declares %d labels, limit %d: %w", dims[0], lim.MaxExamples, ErrLimit)
	}
	return int(dims[0]), nil
}

// pixelScale[v] = v/255 in float32 (correctly rounded).
var pixelScale = func() (t [256]float32) {
	for v := range t {
		t[v] = float32(v) / 255
	}
	return t
}()

// chunkBytes is how much of a body is read at a time.
const chunkBytes = 1 << 16

// readPixels reads n images of features bytes each, then checks for EOF.
// The result grows as data arrives (never beyond n*features), so a header
// that overstates the count costs no more memory than the data present.
func readPixels(r io.Reader, n, features int) ([]float32, error) {
	total := n * features // bounded by Limits.MaxValues by the caller
	per := max(1, chunkBytes/features)
	buf := make([]byte, min(n, per)*features)
	x := make([]float32, 0, len(buf))
	for done := 0; done < n; {
		k := min(per, n-done)
		b := buf[:k*features]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("reading images %d..%d of %d: %w", done, done+k-1, n, wrapRead(err))
		}
		if len(x)+len(b) > cap(x) {
			grown := make([]float32, len(x), min(total, max(2*cap(x), len(x)+len(b))))
			copy(grown, x)
			x = grown
		}
		dst := x[len(x) : len(x)+len(b)]
		for i, v := range b {
			dst[i] = pixelScale[v]
		}
		x = x[:len(x)+len(b)]
		done += k
	}
	if err := expectEOF(r); err != nil {
		return nil, err
	}
	return x, nil
}

// readLabelBytes reads n labels, each < classes, then checks for EOF.
func readLabelBytes(r io.Reader, n, classes int) ([]uint8, error) {
	y := make([]uint8, 0, min(n, chunkBytes))
	buf := make([]byte, min(n, chunkBytes))
	for done := 0; done < n; {
		b := buf[:min(len(buf), n-done)]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("reading labels %d..%d of %d: %w", done, done+len(b)-1, n, wrapRead(err))
		}
		for i, v := range b {
			if int(v) >= classes {
				return nil, fmt.Errorf("label %d of example %d is >= %d classes: %w", v, done+i, classes, ErrFormat)
			}
		}
		y = append(y, b...)
		done += len(b)
	}
	if err := expectEOF(r); err != nil {
		return nil, err
	}
	return y, nil
}

// expectEOF checks that r has nothing left. For a gzip reader, reaching
// EOF is also what verifies the CRC-32 and length trailer.
func expectEOF(r io.Reader) error {
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n > 0 {
			return fmt.Errorf("trailing data after the declared body: %w", ErrFormat)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("after body: %w", wrapRead(err))
		}
	}
}

// wrapRead classifies a read error: a short read stays io.ErrUnexpectedEOF,
// a gzip/flate corruption is marked ErrFormat.
func wrapRead(err error) error {
	err = eofIsUnexpected(err)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	var corrupt flate.CorruptInputError
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt) {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return err
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
