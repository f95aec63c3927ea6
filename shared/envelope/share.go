package envelope

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Secure summation seals each volunteer's two input shares, one to each
// server: the leader's (the aggregator's X25519 key) and the helper's (the
// relay's). The HPKE info binds a sealed share to its round and its role,
// and the leader's share to the consent text the volunteer agreed to,
//
//	info = "blanket/v2 secagg leader round " || u64be(round) || consent   (32 bytes)
//	info = "blanket/v2 secagg helper round " || u64be(round)
//
// where consent is task.ConsentHash of the study's task. So a share cannot
// be replayed into another round, nor handed to the other server (it would
// not open under the other key anyway), nor opened as a sealed value
// (different info), and a leader share sealed under another consent text
// does not open at the aggregator, which derives the hash from its own
// task: every report the aggregator opens was sealed by a client that held
// the hash of the consent text the study records (aggregator/internal/
// study). The helper's share is not bound: the relay does not record the
// study, and the leader's share alone decides whether a report opens.
// (v1 had no consent; a v1 share does not open under v2.)

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
// in round, bound for the leader to consent (task.ConsentHash of the
// study's task): the one derivation SealShare and the share openers use.
// It fails for an unknown role, and for a helper share given a consent
// hash (the helper's share is not bound: pass the zero hash), so that a
// caller cannot believe it bound what is not.
func ShareInfo(round uint64, role ShareRole, consent [32]byte) ([]byte, error) {
	l, err := role.label()
	if err != nil {
		return nil, err
	}
	if role == ShareHelper && consent != ([32]byte{}) {
		return nil, errors.New("envelope: the helper's share is not bound to a consent text (pass the zero hash)")
	}
	b := binary.BigEndian.AppendUint64([]byte("blanket/v2 secagg "+l+" round "), round)
	if role == ShareLeader {
		b = append(b, consent[:]...)
	}
	return b, nil
}

// ShareSealedLen is the size of a sealed share of n bytes: n + Overhead.
func ShareSealedLen(n int) int { return n + Overhead }

// ErrOpenShare: a sealed share did not open (wrong length, round, role,
// key, consent text, or modified bytes).
var ErrOpenShare = errors.New("envelope: cannot open sealed share")

// SealShare seals one input share to the X25519 key pub for round and role,
// the leader's bound to consent (ShareInfo; the zero hash for the helper);
// the output has ShareSealedLen(len(share)) bytes. Under js/wasm it seals
// with WebCrypto (seal.go): call it from a goroutine, not a syscall/js
// callback.
func SealShare(pub [32]byte, round uint64, role ShareRole, consent [32]byte, share []byte) ([]byte, error) {
	inf, err := ShareInfo(round, role, consent)
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
