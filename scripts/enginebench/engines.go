package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	_ "modernc.org/sqlite"

	"enginebench/minilog"
)

// Engine is the workload's view of a store: one durable transaction per call.
type Engine interface {
	// Commit durably writes recs (key->value) and, if agg != nil, the aggregate, in ONE transaction.
	Commit(recs [][2][]byte, agg []byte) error
	// CloseRound writes the round record and deletes the nonces, in ONE transaction.
	CloseRound(key, val []byte, nonces [][]byte) error
	// ReadState is the "first read of the state" after Open: the aggregate and the nonce count.
	ReadState() (aggLen, nonces int, err error)
	Close() error
}

var engines = map[string]func(dir string) (Engine, error){
	"bbolt":       func(d string) (Engine, error) { return openBolt(d, false) },
	"bbolt-batch": func(d string) (Engine, error) { return openBolt(d, true) },
	"sqlite":      openSQLite,
	"minilog":     openMini,
}

var (
	bNonce = []byte("secagg/nonce")
	bAgg   = []byte("secagg/agg")
	bRound = []byte("secagg/round")
	kAgg   = []byte("aggregate")
)

// ---- bbolt ----

type boltEng struct {
	db    *bolt.DB
	batch bool
}

func openBolt(dir string, batch bool) (Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "store.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	if batch {
		db.MaxBatchSize = 4 // = the 4 goroutines of the concurrent variant
		db.MaxBatchDelay = 2 * time.Millisecond
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bNonce, bAgg, bRound} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	return &boltEng{db, batch}, err
}

func (e *boltEng) Commit(recs [][2][]byte, agg []byte) error {
	fn := func(tx *bolt.Tx) error {
		b := tx.Bucket(bNonce)
		for _, r := range recs {
			if err := b.Put(r[0], r[1]); err != nil {
				return err
			}
		}
		if agg != nil {
			return tx.Bucket(bAgg).Put(kAgg, agg)
		}
		return nil
	}
	if e.batch {
		return e.db.Batch(fn)
	}
	return e.db.Update(fn)
}

func (e *boltEng) CloseRound(key, val []byte, nonces [][]byte) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bRound).Put(key, val); err != nil {
			return err
		}
		b := tx.Bucket(bNonce)
		for _, k := range nonces {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *boltEng) ReadState() (a, n int, err error) {
	err = e.db.View(func(tx *bolt.Tx) error {
		a = len(tx.Bucket(bAgg).Get(kAgg))
		c := tx.Bucket(bNonce).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return
}

func (e *boltEng) Close() error { return e.db.Close() }

// ---- modernc sqlite: WAL, synchronous=FULL (each COMMIT fsyncs the WAL) ----

type sqlEng struct{ db *sql.DB }

func openSQLite(dir string) (Engine, error) {
	dsn := "file:" + filepath.Join(dir, "store.sqlite") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer connection; concurrent chunks queue on it
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS nonce(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS agg(id INTEGER PRIMARY KEY, v BLOB NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS round(k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`,
	} {
		if _, err := db.Exec(q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return &sqlEng{db}, nil
}

func (e *sqlEng) Commit(recs [][2][]byte, agg []byte) error {
	tx, err := e.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.Prepare(`INSERT INTO nonce(k, v) VALUES(?, ?)`)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := st.Exec(r[0], r[1]); err != nil {
			return err
		}
	}
	st.Close()
	if agg != nil {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO agg(id, v) VALUES(1, ?)`, agg); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (e *sqlEng) CloseRound(key, val []byte, nonces [][]byte) error {
	tx, err := e.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT OR REPLACE INTO round(k, v) VALUES(?, ?)`, key, val); err != nil {
		return err
	}
	st, err := tx.Prepare(`DELETE FROM nonce WHERE k = ?`)
	if err != nil {
		return err
	}
	for _, k := range nonces {
		if _, err := st.Exec(k); err != nil {
			return err
		}
	}
	st.Close()
	return tx.Commit()
}

func (e *sqlEng) ReadState() (a, n int, err error) {
	var v []byte
	err = e.db.QueryRow(`SELECT v FROM agg WHERE id = 1`).Scan(&v)
	if err == sql.ErrNoRows {
		err = nil
	}
	if err != nil {
		return
	}
	a = len(v)
	err = e.db.QueryRow(`SELECT count(*) FROM nonce`).Scan(&n)
	return
}

func (e *sqlEng) Close() error { return e.db.Close() }

// ---- minilog (own fallback append-only log) ----

type miniEng struct{ s *minilog.Store }

func openMini(dir string) (Engine, error) {
	s, err := minilog.Open(dir)
	return &miniEng{s}, err
}

func (e *miniEng) Commit(recs [][2][]byte, agg []byte) error {
	return e.s.Update(func(tx *minilog.Tx) error {
		for _, r := range recs {
			tx.Put(string(bNonce), string(r[0]), r[1])
		}
		if agg != nil {
			tx.Put(string(bAgg), string(kAgg), agg)
		}
		return nil
	})
}

func (e *miniEng) CloseRound(key, val []byte, nonces [][]byte) error {
	return e.s.Update(func(tx *minilog.Tx) error {
		tx.Put(string(bRound), string(key), val)
		for _, k := range nonces {
			tx.Delete(string(bNonce), string(k))
		}
		return nil
	})
}

func (e *miniEng) ReadState() (int, int, error) {
	v, _ := e.s.Get(string(bAgg), string(kAgg))
	return len(v), e.s.Count(string(bNonce)), nil
}

func (e *miniEng) Close() error { return e.s.Close() }

func dirSize(dir string) (int64, []string) {
	var tot int64
	var files []string
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() {
			tot += fi.Size()
			files = append(files, fmt.Sprintf("%s=%d", de.Name(), fi.Size()))
		}
	}
	return tot, files
}
