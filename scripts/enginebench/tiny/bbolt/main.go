// Command bbolt is a tiny binary importing bbolt: put one key, read it back.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

func main() {
	dir, _ := os.MkdirTemp("", "tiny")
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "db"), 0o600, nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})
	var v string
	db.View(func(tx *bolt.Tx) error { v = string(tx.Bucket([]byte("b")).Get([]byte("k"))); return nil })
	fmt.Println(v, err)
}
