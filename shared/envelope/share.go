package envelope

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Secure summation seals each volunteer's two input shares, one to each
// server: the leader's (the aggregator's X25519 key) and the helper's (the
// relay's). The HPKE info binds a sealed share to its round and its role,
//
//	info = "blanket/v1 secagg leader round " || u64be(round)   (or "helper")
//
// so a share cannot be replayed into another round, nor handed to the other
// server (it would not open under the other key anyway), nor opened as a
// sealed value (different info).

// ShareRole names the server a share is sealed to.
type ShareRole uint8

// Share roles.
const (
	ShareLeader ShareRole = 1 // the aggregator
	ShareHelper ShareRole = 2 // the relay
)

func (r ShareRole) label() (string, error) {
	switch r {
	case ShareLeader:
		return "leader", nil
	case ShareHelper:
		return "helper", nil
	}
	return "", fmt.Errorf("envelope: unknown share role %d", r)
}

// ShareInfo returns the HPKE info string a share for role is sealed under
// in round (the one derivation SealShare and the share openers use); it
// fails for an unknown role.
func ShareInfo(round uint64, role ShareRole) ([]byte, error) {
	l, err := role.label()
	if err != nil {
		return nil, err
	}
	b := []byte("blanket/v1 secagg " + l + " round ")
	return binary.BigEndian.AppendUint64(b, round), nil
}

// ShareSealedLen is the size of a sealed share of n bytes: n + Overhead.
func ShareSealedLen(n int) int { return n + Overhead }

// ErrOpenShare: a sealed share did not open (wrong length, round, role,
// key, or modified bytes).
var ErrOpenShare = errors.New("envelope: cannot open sealed share")

// SealShare seals one input share to the X25519 key pub for round and role;
// the output has ShareSealedLen(len(share)) bytes. Under js/wasm it seals
// with WebCrypto (seal.go): call it from a goroutine, not a syscall/js
// callback.
func SealShare(pub [32]byte, round uint64, role ShareRole, share []byte) ([]byte, error) {
	inf, err := ShareInfo(round, role)
	if err != nil {
		return nil, err
	}
	out, err := sealBatch(pub, inf, [][]byte{share}, nil)
	if err != nil {
		return nil, err
	}
	if len(out[0]) != ShareSealedLen(len(share)) {
		return nil, fmt.Errorf("%w: sealed share of %d bytes, want %d", ErrSeal, len(out[0]), ShareSealedLen(len(share)))
	}
	return out[0], nil
}
