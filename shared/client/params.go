package client

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// roundSetup is everything the client derives from one announcement's
// parameters, all of it through roundspec (the derivation the relay and the
// aggregator use too): the encoder (protocol, randomizer at the
// per-coordinate budget, clip, width, personal level) and the check-in coin.
type roundSetup struct {
	params wire.Params
	spec   *roundspec.Spec
	// enc is the shuffle protocols' encoder (nil for secure summation,
	// which shards instead: spec.SecAggRound).
	enc     *mechanism.Encoder
	checkIn mechanism.CheckIn
	// release describes one report of this configuration for the local
	// accountant (see Client.Privacy).
	release privacy.Release
	// noiseStd is the de-biased per-coordinate noise in update units.
	noiseStd float64
	// personal is set when the volunteer's personal level is applied.
	personal bool
}

// setupRound validates announced parameters against what this client can
// do (its model dimension d) and builds the matching encoder, cross-checked
// against the announcement: width, message count and per-coordinate budget.
// personal in (0, 1) is the volunteer's fraction of the announced budget
// (roundspec.Spec.Encoder: sound for every randomizer, and it weakens
// nobody else's guarantee).
func setupRound(p wire.Params, d int, personal float64) (*roundSetup, error) {
	if int(p.D) != d {
		return nil, fmt.Errorf("announced model dimension %d, this client trains %d parameters", p.D, d)
	}
	spec, err := roundspec.New(p)
	if err != nil {
		return nil, err
	}
	if !spec.IsShuffle() {
		return setupSecAgg(p, spec)
	}
	if !(personal > 0 && personal < 1) {
		personal = 0
	}
	enc, err := spec.Encoder(personal)
	if err != nil {
		return nil, fmt.Errorf("encoder: %w", err)
	}
	sh := enc.Shape()
	if sh.Width != int(p.Width) || sh.Messages != p.Messages() {
		return nil, fmt.Errorf("announced %d messages of width %d, the encoder makes %d of width %d", p.Messages(), p.Width, sh.Messages, sh.Width)
	}
	if got, want := enc.CoordinateEpsilon(), p.PerCoordinateEpsilon(); got > want*(1+1e-12) || (personal == 0 && got != want) {
		return nil, fmt.Errorf("per-coordinate epsilon %v disagrees with the announced %v", got, want)
	}
	ci, err := mechanism.NewCheckIn(p.CheckInP)
	if err != nil {
		return nil, fmt.Errorf("check-in: %w", err)
	}
	std, err := spec.NoiseStd()
	if err != nil {
		return nil, err
	}
	return &roundSetup{
		params:   p,
		spec:     spec,
		enc:      enc,
		checkIn:  ci,
		release:  spec.LocalRelease(personal),
		noiseStd: std,
		personal: personal > 0,
	}, nil
}

// setupSecAgg is setupRound for secure summation: no local randomizer (a
// personal level does not apply: the volunteer's guarantee is the servers'
// noise), one Shares frame, the check-in coin.
func setupSecAgg(p wire.Params, spec *roundspec.Spec) (*roundSetup, error) {
	if p.Messages() != 1 {
		return nil, fmt.Errorf("secagg announced %d messages, want 1", p.Messages())
	}
	if _, _, err := spec.SharesSizes(); err != nil {
		return nil, err
	}
	ci, err := mechanism.NewCheckIn(p.CheckInP)
	if err != nil {
		return nil, fmt.Errorf("check-in: %w", err)
	}
	std, err := spec.NoiseStd()
	if err != nil {
		return nil, err
	}
	return &roundSetup{params: p, spec: spec, checkIn: ci, release: spec.LocalRelease(0), noiseStd: std}, nil
}
