// Command datastore is a tiny binary importing the lead's shared/datastore: put one key, read it back.
package main

import (
	"fmt"
	"os"

	"github.com/blanket-fl/blanket/shared/datastore"
)

func main() {
	dir, _ := os.MkdirTemp("", "tiny")
	defer os.RemoveAll(dir)
	s, err := datastore.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	err = s.Update(func(tx *datastore.Tx) error { tx.Put("b", "k", []byte("v")); return nil })
	var v []byte
	s.View(func(tx *datastore.ReadTx) error { v, _ = tx.Get("b", "k"); return nil })
	fmt.Println(string(v), err)
}
