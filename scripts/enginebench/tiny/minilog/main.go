// Command minilog is a tiny binary importing the fallback minilog: put one key, read it back.
package main

import (
	"fmt"
	"os"

	"enginebench/minilog"
)

func main() {
	dir, _ := os.MkdirTemp("", "tiny")
	defer os.RemoveAll(dir)
	s, err := minilog.Open(dir)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	err = s.Update(func(tx *minilog.Tx) error { tx.Put("b", "k", []byte("v")); return nil })
	v, _ := s.Get("b", "k")
	fmt.Println(string(v), err)
}
