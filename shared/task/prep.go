package task

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"runtime"
	"sync"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/features"
)

// Prep is a task's preprocessing of encoded examples into the features
// the model trains on: the training section's fixed feature map, applied
// to each example, then (preprocess "public-standardize") the
// standardization fitted on the mapped public training part. It is the one
// derivation every party uses (the aggregator's evaluation and simulated
// volunteers through taskdata.Open, make run's cohort, the browser's
// digits), so that they agree bit for bit on d and on every feature.
//
// Privacy: the map is a fixed public function applied per example
// (shared/features) and the standardization's statistics come from the
// public training part of a built-in public data set, never from a
// volunteer's data; a volunteer's update stays a function of its own
// examples and is clipped to C before it is encoded, so every ε the ledger
// charges is unchanged (docs/tasks.md, "Privacy of the preprocessing").
type Prep struct {
	fmap     features.FeatureMap // nil: identity
	in, out  int
	classes  int
	Z        *dataset.Standardizer // nil: no standardization
	mapName  string
	fromFile bool
}

//go:embed pubstats/*.bin
var pubstats embed.FS

// pubstatsFile is the embedded standardization of the named map on a
// built-in data set's public training part: the SHA-256 of that training
// part (TrainDigest) followed by the dataset.Standardizer's MarshalBinary.
// Mapping the 8,000 training digits takes about 30 s of one core (the
// scattering, BenchmarkScatter1): precomputed, the browser does not pay it
// and neither do the servers on every start. TestPubstatsAreFitted refits
// each file from the data and compares byte for byte; go test
// ./shared/task -run TestPubstatsAreFitted -update-pubstats rewrites them.
func pubstatsFile(mapName string) string { return "pubstats/" + mapName + ".bin" }

// TrainDigest is the SHA-256 of a set's features (the feature count, the
// row count, then every value's float32 bits, big-endian): it identifies
// the public training part a precomputed standardization was fitted on.
func TrainDigest(s *dataset.Set) [32]byte {
	h := sha256.New()
	b := binary.BigEndian.AppendUint32(nil, uint32(s.Features))
	b = binary.BigEndian.AppendUint32(b, uint32(s.Len()))
	h.Write(b)
	buf := make([]byte, 0, 4096)
	for _, v := range s.X {
		buf = binary.BigEndian.AppendUint32(buf, math.Float32bits(v))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// FitPrep returns t's preprocessing for examples encoded as t encodes them
// (Inputs columns), fitted on train, a built-in data set's public training
// part (unused, and may be nil, unless t standardizes). With a feature map
// and standardization, the statistics of the mapped training part are read
// from the embedded file when train is the part it was fitted on
// (TrainDigest), and otherwise computed (every example mapped on
// GOMAXPROCS goroutines).
func (t *Task) FitPrep(train *dataset.Set) (*Prep, error) {
	p := &Prep{fmap: t.fmap, in: t.Inputs(), out: t.ModelFeatures(), classes: len(t.Label.Classes), mapName: t.Recipe().FeatureMap}
	if t.Preprocess != PreprocessPublicStandardize {
		return p, nil
	}
	if train == nil || train.Features != p.in {
		return nil, fmt.Errorf("task: preprocessing: a public training part of %d features is needed to standardize", p.in)
	}
	if p.fmap != nil {
		if z, ok, err := p.embedded(train); err != nil {
			return nil, err
		} else if ok {
			p.Z, p.fromFile = z, true
			return p, nil
		}
	}
	mapped, err := p.Map(train)
	if err != nil {
		return nil, err
	}
	if p.Z, err = dataset.FitStandardizer(mapped); err != nil {
		return nil, fmt.Errorf("task: preprocessing: %w", err)
	}
	return p, nil
}

// embedded returns the embedded standardization of p's map for train, if
// there is one fitted on exactly train.
func (p *Prep) embedded(train *dataset.Set) (*dataset.Standardizer, bool, error) {
	b, err := pubstats.ReadFile(pubstatsFile(p.mapName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil || len(b) < 32 {
		return nil, false, fmt.Errorf("task: preprocessing: embedded statistics of %s: %d bytes, %v", p.mapName, len(b), err)
	}
	d := TrainDigest(train)
	if !bytes.Equal(b[:32], d[:]) {
		return nil, false, nil
	}
	z, err := dataset.UnmarshalStandardizer(b[32:], p.out)
	if err != nil {
		return nil, false, fmt.Errorf("task: preprocessing: embedded statistics of %s: %w", p.mapName, err)
	}
	return z, true, nil
}

// Features is the number of features Apply outputs (Task.ModelFeatures).
func (p *Prep) Features() int { return p.out }

// FromEmbedded reports whether the standardization was read from the
// embedded statistics rather than computed.
func (p *Prep) FromEmbedded() bool { return p.fromFile }

// Map applies only the feature map to every example of s (a new Set; s is
// not modified), on GOMAXPROCS goroutines.
func (p *Prep) Map(s *dataset.Set) (*dataset.Set, error) {
	if s == nil || s.Features != p.in {
		return nil, fmt.Errorf("task: preprocessing: examples of %d features, want %d", featuresOf(s), p.in)
	}
	if p.fmap == nil {
		return s.Clone(), nil
	}
	n := s.Len()
	m := &dataset.Set{X: make([]float32, n*p.out), Y: append([]uint8(nil), s.Y...), Features: p.out, Classes: s.Classes}
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, dst := make([]float64, p.in), make([]float64, p.out)
			for i := w; i < n; i += workers {
				for j, v := range s.Row(i) {
					src[j] = float64(v)
				}
				if err := p.fmap.Apply(dst, src); err != nil {
					errs[w] = fmt.Errorf("task: preprocessing example %d: %w", i, err)
					return
				}
				row := m.X[i*p.out : (i+1)*p.out]
				for j, v := range dst {
					row[j] = float32(v)
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Apply maps every example of s and standardizes it (a new Set of
// Features columns; s is not modified).
func (p *Prep) Apply(s *dataset.Set) (*dataset.Set, error) {
	m, err := p.Map(s)
	if err != nil {
		return nil, err
	}
	if p.Z == nil {
		return m, nil
	}
	out, err := p.Z.Apply(m)
	if err != nil {
		return nil, fmt.Errorf("task: preprocessing: %w", err)
	}
	return out, nil
}

func featuresOf(s *dataset.Set) int {
	if s == nil {
		return 0
	}
	return s.Features
}

// ImageTask is a built-in 28 x 28 digits task (the digits' layout: one
// numeric feature "pixel" of ImagePixels columns in [0, 1], 10 classes,
// the embedded data set, preprocess "public-standardize") training with
// recipe r's feature map and recipe. It is for the browser, which builds
// the digits' preprocessing without decoding a definition (DigitsRecipe,
// or the recipe of the definition the page gave it).
func ImageTask(r Recipe) (*Task, error) {
	lo, hi := 0.0, 1.0
	classes := make([]string, 10)
	for i := range classes {
		classes[i] = fmt.Sprint(i)
	}
	return New(Task{Version: Version, Name: DigitsName, Title: "Handwritten digits", Consent: "(built in)", Source: SourceBuiltin,
		Dataset: "mnist-sample", Preprocess: PreprocessPublicStandardize,
		Features: []Feature{{Name: "pixel", Type: TypeNumeric, Min: &lo, Max: &hi, Count: ImagePixels}},
		Label:    Label{Name: "digit", Classes: classes}, Model: Model{Type: ModelLogReg},
		Training: Training{Clip: r.Clip, ServerOptimizer: r.ServerOptimizer, ServerMomentum: r.ServerMomentum, ServerLR: r.ServerLR,
			LocalEpochs: r.LocalEpochs, LocalLR: r.LocalLR, FeatureMap: r.FeatureMap}})
}

// PrepWith is t's preprocessing with a standardization already fitted (a
// server's, fetched by a volunteer that has only its own drawings): valid
// only without a feature map, since z must be of the features the model
// trains on and a volunteer cannot check a mapped one against the data.
func (t *Task) PrepWith(z *dataset.Standardizer) (*Prep, error) {
	if t.fmap != nil {
		return nil, fmt.Errorf("task: preprocessing: feature map %q: fit on the public training part (FitPrep)", t.Recipe().FeatureMap)
	}
	if t.Preprocess != PreprocessPublicStandardize || z == nil || len(z.Mean) != t.Inputs() || z.Validate() != nil {
		return nil, fmt.Errorf("task: preprocessing: a standardization of %d features for task %q", t.Inputs(), t.Name)
	}
	return &Prep{in: t.Inputs(), out: t.Inputs(), classes: len(t.Label.Classes), Z: z, mapName: "identity"}, nil
}
