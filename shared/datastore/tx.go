package datastore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// overlay is one transaction's writes to one bucket, for reads through
// it: if cleared, the bucket was emptied first (DeleteBucket); then keys
// holds each key's last value (nil: deleted).
type overlay struct {
	cleared bool
	keys    map[string][]byte
}

// writes is a transaction's writes by bucket.
type writes map[string]*overlay

func (w writes) bucket(b string) *overlay {
	o := w[b]
	if o == nil {
		o = &overlay{keys: map[string][]byte{}}
		w[b] = o
	}
	return o
}

// Reader is what ReadTx and Tx share.
type Reader interface {
	// Get returns the value of key in bucket; the slice must not be
	// modified.
	Get(bucket, key string) ([]byte, bool)
	// Keys returns bucket's keys, sorted.
	Keys(bucket string) []string
}

// ReadTx reads the durable state: View's transactions see only what a
// completed Update made durable.
type ReadTx struct {
	s *Store
	// src reads a Backend's snapshot (nil: the log's state); err is its
	// first failure, which View returns.
	src Source
	err error
}

// Get implements Reader.
func (tx *ReadTx) Get(bucket, key string) ([]byte, bool) {
	if tx.src != nil {
		v, ok, err := tx.src.Get(bucket, key)
		if err != nil {
			tx.err = cmp.Or(tx.err, err)
			return nil, false
		}
		return v, ok
	}
	v, ok := tx.s.state[bucket][key]
	return v, ok
}

// Keys implements Reader.
func (tx *ReadTx) Keys(bucket string) []string {
	if tx.src != nil {
		ks, err := tx.src.Keys(bucket)
		if err != nil {
			tx.err = cmp.Or(tx.err, err)
			return nil
		}
		return ks
	}
	ks := make([]string, 0, len(tx.s.state[bucket]))
	for k := range tx.s.state[bucket] {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Tx is a read-write transaction: it reads the durable state, then the
// transactions committed before it whose fsync is still under way (they
// are durable before this one is, or this one fails with them), then its
// own writes.
type Tx struct {
	s   *Store
	ops []op
	w   writes
	// src reads a Backend's state in this transaction (nil: the log's);
	// err is its first failure, which fails the Update.
	src Source
	err error
}

// Get implements Reader.
func (tx *Tx) Get(bucket, key string) ([]byte, bool) {
	if o := tx.w[bucket]; o != nil {
		if v, ok := o.keys[key]; ok {
			return v, v != nil
		}
		if o.cleared {
			return nil, false
		}
	}
	if tx.src != nil {
		v, ok, err := tx.src.Get(bucket, key)
		if err != nil {
			tx.err = cmp.Or(tx.err, err)
			return nil, false
		}
		return v, ok
	}
	for i := len(tx.s.unsynced) - 1; i >= 0; i-- {
		if o := tx.s.unsynced[i].w[bucket]; o != nil {
			if v, ok := o.keys[key]; ok {
				return v, v != nil
			}
			if o.cleared {
				return nil, false
			}
		}
	}
	v, ok := tx.s.state[bucket][key]
	return v, ok
}

// Keys implements Reader.
func (tx *Tx) Keys(bucket string) []string {
	set := map[string]bool{}
	if tx.src != nil {
		ks, err := tx.src.Keys(bucket)
		if err != nil {
			tx.err = cmp.Or(tx.err, err)
			return nil
		}
		if o := tx.w[bucket]; o == nil || len(o.keys) == 0 && !o.cleared {
			return ks // nothing of its own to merge: already sorted
		}
		for _, k := range ks {
			set[k] = true
		}
	} else {
		for k := range tx.s.state[bucket] {
			set[k] = true
		}
	}
	apply := func(o *overlay) {
		if o == nil {
			return
		}
		if o.cleared {
			clear(set)
		}
		for k, v := range o.keys {
			if v == nil {
				delete(set, k)
			} else {
				set[k] = true
			}
		}
	}
	if tx.src == nil {
		for _, p := range tx.s.unsynced {
			apply(p.w[bucket])
		}
	}
	apply(tx.w[bucket])
	ks := make([]string, 0, len(set))
	for k := range set {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Put sets key in bucket to a copy of value (an empty value is stored as
// empty, not deleted).
func (tx *Tx) Put(bucket, key string, value []byte) {
	v := make([]byte, len(value))
	copy(v, value)
	tx.ops = append(tx.ops, op{kind: opPut, bucket: bucket, key: key, value: v})
	tx.w.bucket(bucket).keys[key] = v
}

// Delete removes key from bucket (absent: nothing).
func (tx *Tx) Delete(bucket, key string) {
	tx.ops = append(tx.ops, op{kind: opDelete, bucket: bucket, key: key})
	tx.w.bucket(bucket).keys[key] = nil
}

// DeleteBucket removes every key of bucket.
func (tx *Tx) DeleteBucket(bucket string) {
	tx.ops = append(tx.ops, op{kind: opDeleteBucket, bucket: bucket})
	o := tx.w.bucket(bucket)
	o.cleared = true
	clear(o.keys)
}

// GetJSON unmarshals the value of key into v; false if it is absent.
func GetJSON(r Reader, bucket, key string, v any) (bool, error) {
	b, ok := r.Get(bucket, key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("datastore: %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// PutJSON stores v marshaled as JSON.
func PutJSON(tx *Tx, bucket, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("datastore: %s/%s: %w", bucket, key, err)
	}
	tx.Put(bucket, key, b)
	return nil
}
