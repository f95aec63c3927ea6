package secagg

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// DeriveVerifyKey returns the Prio3 verification key of a round, derived by
// both servers from the secret they already share (the relay-aggregator
// bearer token) and the round number: HKDF-SHA256 with the secret as input
// keying material, salt "blanket/v1 secagg verify key" and the round
// (u64 big-endian) as info.
//
// Security: the FLP's soundness needs the verification key to be unknown to
// the volunteers (a volunteer who knows it can craft a proof that passes
// for an out-of-range input); volunteers never see the token, and a fresh
// key per round keeps one round's key from serving another. Both servers
// call this one function, so they agree by construction
// (TestDeriveVerifyKey). secret must have at least 16 bytes.
func DeriveVerifyKey(secret []byte, round uint64) ([]byte, error) {
	if len(secret) < 16 {
		return nil, errors.New("secagg: verify key secret shorter than 16 bytes")
	}
	if round < 1 {
		return nil, errors.New("secagg: verify key for round 0")
	}
	info := binary.BigEndian.AppendUint64(nil, round)
	k, err := hkdf.Key(sha256.New, secret, []byte("blanket/v1 secagg verify key"), string(info), VerifyKeySize)
	if err != nil {
		return nil, fmt.Errorf("secagg: verify key: %w", err)
	}
	return k, nil
}
