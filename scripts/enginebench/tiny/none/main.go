// Command none is the build-time baseline: the same program shape with os only.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir, _ := os.MkdirTemp("", "tiny")
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte("v"), 0o600); err != nil {
		panic(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "k"))
	fmt.Println(string(b), err)
}
