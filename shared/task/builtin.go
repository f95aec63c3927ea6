package task

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed digits.json
var digitsJSON []byte

// DigitsName is the name of the built-in digits task.
const DigitsName = "digits"

// Digits returns the built-in task that describes the default pipeline:
// the embedded MNIST digits (784 pixels in [0, 1], standardized with the
// public training part's per-pixel statistics, labels 0-9), d = 7850,
// secure summation at ε = 4 over 5 rounds. Running without -task is
// running this task. Each call returns a fresh Task; the error (a build
// defect, which TestDigits rules out) wraps ErrInvalid.
func Digits() (*Task, error) {
	t, err := Parse(digitsJSON)
	if err != nil {
		return nil, fmt.Errorf("task: the built-in digits task: %w", err)
	}
	return t, nil
}

// Load returns the task of the operator's -task flag and the directory
// its relative paths (holdout, simulation) are resolved against: "" or
// DigitsName gives Digits (directory ""), anything else is read as a
// task definition file.
func Load(path string) (*Task, string, error) {
	if path == "" || path == DigitsName {
		t, err := Digits()
		return t, "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("task: %w", err)
	}
	defer f.Close()
	t, err := Decode(f)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return t, filepath.Dir(path), nil
}

// Path resolves a path of the task definition (Holdout, Simulation)
// against dir, the task file's directory; "" stays "".
func Path(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
