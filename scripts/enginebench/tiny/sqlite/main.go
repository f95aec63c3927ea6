// Command sqlite is a tiny binary importing modernc.org/sqlite: put one key, read it back.
package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"
)

func main() {
	dir, _ := os.MkdirTemp("", "tiny")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t(k TEXT PRIMARY KEY, v BLOB); INSERT INTO t VALUES('k', 'v')`); err != nil {
		panic(err)
	}
	var v string
	err = db.QueryRow(`SELECT v FROM t WHERE k = 'k'`).Scan(&v)
	fmt.Println(v, err)
}
