// Package volunteer is the JavaScript-independent logic of Blanket's browser
// client (docs/web.md): validating the options of blanket.start, checking the
// aggregator key against a pinned fingerprint, preparing the volunteer's local
// examples (the standard split and standardizer of the embedded digits, a
// shard chosen locally, or the volunteer's own drawings), and turning the
// client core's events into the plain records the page receives.
//
// It is plain Go: its tests run natively and under GOOS=js with Node.js. The
// syscall/js glue lives in wasm/internal/browser and wasm/internal/jsws.
//
// Privacy: nothing here sends anything. The shard choice and the drawings stay
// in the browser; only the client core's randomized, sealed report frames
// (docs/protocol.md) leave it.
package volunteer

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
)

const (
	// ShardSize is the number of training examples of a volunteer who
	// trains on a shard of the embedded digits.
	ShardSize = 20
	// Pixels is the number of features of a drawing (28 x 28).
	Pixels = 28 * 28
	// Classes is the number of digit labels (0..9).
	Classes = 10
	// MaxDrawings bounds the drawings kept in memory (a page cannot grow
	// the module's memory without bound).
	MaxDrawings = 1000
	// MaxSeed is the largest shard seed: JavaScript numbers are exact
	// integers up to 2^53.
	MaxSeed = 1 << 53
)

// Sources of local examples (the option "source" of blanket.start).
const (
	SourceShard    = "shard"
	SourceDrawings = "drawings"
)

// ErrOption marks an invalid option of blanket.start or blanket.addDrawing.
var ErrOption = errors.New("volunteer: invalid option")

// Train is the local training a browser volunteer runs for the recipe r
// (task.Recipe.Train: the FLAME experiments' setting, batch 7, L2 0.001,
// at the recipe's local epochs and learning rate; the built-in digits: 10
// epochs at 0.1, as the native load generator, scripts/internal/cohort).
func Train(r task.Recipe) logreg.TrainConfig { return r.Train() }

// Options are the options of blanket.start (docs/web.md).
type Options struct {
	// Relay is the websocket URL of the relay (ws:// or wss://).
	Relay string
	// Fingerprint is the aggregator key fingerprint the volunteer pins;
	// empty means trust on first use (the fetched key's fingerprint is
	// reported to the page so the volunteer can compare it).
	Fingerprint string
	// Source is SourceShard or SourceDrawings.
	Source string
	// ShardSeed chooses the shard (0: random, from crypto.getRandomValues).
	// It is never sent.
	ShardSeed uint64
	// EpsLevel is the optional personal privacy level: the fraction of
	// the announced local budget the volunteer is willing to spend per
	// report (0 or 1: the announced budget). It becomes
	// client.Config.PersonalFraction, which applies it where that is sound
	// (Laplace and Gaussian randomizers) and reports the budget in use.
	EpsLevel float64
}

// Validate checks the options: a ws:// or wss:// relay URL, a fingerprint
// that is empty or of the printed form, a known source, a seed of at most
// MaxSeed and a finite, non-negative EpsLevel.
func (o *Options) Validate() error {
	if !strings.HasPrefix(o.Relay, "ws://") && !strings.HasPrefix(o.Relay, "wss://") || len(o.Relay) <= len("wss://") {
		return fmt.Errorf("%w: relay %q is not a ws:// or wss:// URL", ErrOption, o.Relay)
	}
	if o.Fingerprint != "" {
		f, err := NormalizeFingerprint(o.Fingerprint)
		if err != nil {
			return err
		}
		o.Fingerprint = f
	}
	if o.Source != SourceShard && o.Source != SourceDrawings {
		return fmt.Errorf("%w: source %q (want %q or %q)", ErrOption, o.Source, SourceShard, SourceDrawings)
	}
	if o.ShardSeed > MaxSeed {
		return fmt.Errorf("%w: shard seed %d above 2^53", ErrOption, o.ShardSeed)
	}
	if math.IsNaN(o.EpsLevel) || o.EpsLevel < 0 || o.EpsLevel > 1 {
		return fmt.Errorf("%w: privacy level %v (want a fraction of the announced budget in [0, 1])", ErrOption, o.EpsLevel)
	}
	return nil
}

// SeedFromNumber converts a JavaScript number to a shard seed: a
// non-negative integer of at most MaxSeed.
func SeedFromNumber(f float64) (uint64, error) {
	if math.IsNaN(f) || f < 0 || f > MaxSeed || f != math.Trunc(f) {
		return 0, fmt.Errorf("%w: shard seed %v (want an integer in [0, 2^53])", ErrOption, f)
	}
	return uint64(f), nil
}

// ResolveSeed returns seed, or for seed 0 a random seed in [1, MaxSeed]
// drawn from src (noise.Secure() in the browser: crypto.getRandomValues).
// MaxSeed is a power of two dividing 2^64, so the reduction is unbiased.
func ResolveSeed(seed uint64, src noise.Source) uint64 {
	if seed != 0 {
		return seed
	}
	return 1 + src.Uint64()%MaxSeed
}

// NormalizeFingerprint returns f in the printed form of
// envelope.PublicKey.Fingerprint (8 groups of 4 lowercase hex digits joined
// by '-'), accepting upper case, surrounding spaces and missing or
// space-separated group separators.
func NormalizeFingerprint(f string) (string, error) {
	var hex []byte
	for _, r := range strings.ToLower(f) {
		switch {
		case r >= '0' && r <= '9' || r >= 'a' && r <= 'f':
			hex = append(hex, byte(r))
		case r == '-' || r == ' ' || r == ':':
		default:
			return "", fmt.Errorf("%w: fingerprint %q has a character other than hex digits and '-'", ErrOption, f)
		}
	}
	if len(hex) != 32 {
		return "", fmt.Errorf("%w: fingerprint %q has %d hex digits, want 32", ErrOption, f, len(hex))
	}
	var b strings.Builder
	for i := 0; i < 32; i += 4 {
		if i > 0 {
			b.WriteByte('-')
		}
		b.Write(hex[i : i+4])
	}
	return b.String(), nil
}

// ErrFingerprint: the relay served an aggregator key whose fingerprint is
// not the pinned one.
var ErrFingerprint = errors.New("volunteer: aggregator key does not match the pinned fingerprint")

// KeyFields are the string fields of the JSON of /api/key, the form
// envelope.PublicKey.MarshalJSON writes: the two public keys in standard
// base64 and the fingerprint. The page parses the JSON (JSON.parse), which
// keeps encoding/json's reflection-based decoder out of the module (about
// 76 KB of its gzipped size).
type KeyFields struct {
	Sign        string
	HPKE        string
	Fingerprint string
}

// CheckKey builds the aggregator key from the fields of /api/key and checks
// it exactly as envelope.PublicKey.UnmarshalJSON does (valid keys; an
// embedded fingerprint, when present, must match them); then, if pinned is
// not empty, it requires the key's fingerprint to equal pinned. With an
// empty pinned fingerprint the key is trusted on first use; the caller shows
// key.Fingerprint() to the volunteer.
func CheckKey(f KeyFields, pinned string) (envelope.PublicKey, error) {
	sign, err := base64.StdEncoding.DecodeString(f.Sign)
	if err != nil {
		return envelope.PublicKey{}, fmt.Errorf("volunteer: aggregator key: sign: %w", err)
	}
	hp, err := base64.StdEncoding.DecodeString(f.HPKE)
	if err != nil {
		return envelope.PublicKey{}, fmt.Errorf("volunteer: aggregator key: hpke: %w", err)
	}
	k, err := envelope.ParsePublicKey(sign, hp)
	if err != nil {
		return envelope.PublicKey{}, fmt.Errorf("volunteer: aggregator key: %w", err)
	}
	if f.Fingerprint != "" && f.Fingerprint != k.Fingerprint() {
		return envelope.PublicKey{}, fmt.Errorf("volunteer: aggregator key: embedded fingerprint %q does not match the keys (%s)", f.Fingerprint, k.Fingerprint())
	}
	if pinned == "" {
		return k, nil
	}
	want, err := NormalizeFingerprint(pinned)
	if err != nil {
		return envelope.PublicKey{}, err
	}
	if got := k.Fingerprint(); got != want {
		return envelope.PublicKey{}, fmt.Errorf("%w: the relay serves %s, pinned %s", ErrFingerprint, got, want)
	}
	return k, nil
}

// Digits are the embedded digits as the aggregator sees them: the training
// part of dataset.DefaultSplit (raw pixels) and the digits task's
// preprocessing fitted on it (task.Prep: the recipe's feature map, then
// the public standardization of the mapped training part).
type Digits struct {
	Train *dataset.Set
	Prep  *task.Prep
}

// PrepareDigits reads the digits the relay serves (/digits.idx.gz and
// /labels.idx.gz, gzipped IDX), splits them with dataset.DefaultSplit and
// fits the preprocessing of the digits task of recipe r on the training
// part (task.ImageTask(r).FitPrep: exactly what the aggregator evaluates
// with and the native volunteers train on; a feature map's statistics come
// from the embedded file fitted on these very digits, checked by their
// digest, so the browser does not map 8,000 digits). The test part is
// dropped: the browser never evaluates. The training part is kept raw;
// Shard preprocesses only the chosen rows.
func PrepareDigits(images, labels io.Reader, r task.Recipe) (*Digits, error) {
	s, err := dataset.ReadIDX(images, labels)
	if err != nil {
		return nil, fmt.Errorf("volunteer: digits: %w", err)
	}
	if s.Features != Pixels || s.Classes != Classes {
		return nil, fmt.Errorf("volunteer: digits have %d features and %d classes, want %d and %d", s.Features, s.Classes, Pixels, Classes)
	}
	train, _, err := dataset.DefaultSplit(s)
	if err != nil {
		return nil, fmt.Errorf("volunteer: split: %w", err)
	}
	tk, err := task.ImageTask(r)
	if err != nil {
		return nil, fmt.Errorf("volunteer: %w", err)
	}
	p, err := tk.FitPrep(train)
	if err != nil {
		return nil, fmt.Errorf("volunteer: %w", err)
	}
	return &Digits{Train: train, Prep: p}, nil
}

// ShardIndices returns size distinct indices of [0, n), uniformly among all
// size-subsets, in random order (the first size steps of a Fisher-Yates
// shuffle driven by src). A seeded src makes the choice reproducible.
func ShardIndices(n, size int, src noise.Source) ([]int, error) {
	if src == nil {
		return nil, fmt.Errorf("volunteer: shard: nil source")
	}
	if size < 1 || size > n {
		return nil, fmt.Errorf("volunteer: shard of %d examples out of %d", size, n)
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for i := range size {
		j := i + noise.Intn(src, n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm[:size:size], nil
}

// Shard returns ShardSize training examples chosen by seed (>= 1; see
// ResolveSeed), standardized, and their indices in the training part. The
// choice is a deterministic function of seed, made in the browser, and never
// sent.
func (d *Digits) Shard(seed uint64) (*dataset.Set, []int, error) {
	if seed == 0 {
		return nil, nil, fmt.Errorf("%w: shard seed 0 (resolve it first)", ErrOption)
	}
	idx, err := ShardIndices(d.Train.Len(), ShardSize, noise.NewSeeded(seed))
	if err != nil {
		return nil, nil, err
	}
	s, err := d.Train.Subset(idx)
	if err != nil {
		return nil, nil, fmt.Errorf("volunteer: shard: %w", err)
	}
	if s, err = d.Prep.Apply(s); err != nil {
		return nil, nil, fmt.Errorf("volunteer: shard: %w", err)
	}
	return s, idx, nil
}

// Drawings holds the volunteer's own drawings (pixels in [0,1], labels
// 0..9). The zero value is empty and ready.
type Drawings struct {
	x []float32
	y []uint8
}

// Add validates one drawing (Pixels values, each finite and in [0,1]; a label
// in 0..Classes-1), stores a copy and returns the number of drawings.
func (d *Drawings) Add(pixels []float32, label int) (int, error) {
	if len(pixels) != Pixels {
		return d.Len(), fmt.Errorf("%w: a drawing has %d pixels, want %d", ErrOption, len(pixels), Pixels)
	}
	if label < 0 || label >= Classes {
		return d.Len(), fmt.Errorf("%w: label %d (want 0..9)", ErrOption, label)
	}
	for i, v := range pixels {
		if !(v >= 0 && v <= 1) { // also rejects NaN
			return d.Len(), fmt.Errorf("%w: pixel %d is %v (want a value in [0,1])", ErrOption, i, v)
		}
	}
	if d.Len() >= MaxDrawings {
		return d.Len(), fmt.Errorf("%w: at most %d drawings", ErrOption, MaxDrawings)
	}
	d.x = append(d.x, pixels...)
	d.y = append(d.y, uint8(label))
	return d.Len(), nil
}

// Len returns the number of drawings.
func (d *Drawings) Len() int { return len(d.y) }

// Set returns the drawings preprocessed by p (the digits task's feature
// map and the aggregator's standardization, see PrepareDigits) as a new
// Set; d is unchanged.
func (d *Drawings) Set(p *task.Prep) (*dataset.Set, error) {
	if d.Len() == 0 {
		return nil, fmt.Errorf("%w: no drawings yet (add some, or train on a shard)", ErrOption)
	}
	s := &dataset.Set{X: append([]float32(nil), d.x...), Y: append([]uint8(nil), d.y...), Features: Pixels, Classes: Classes}
	out, err := p.Apply(s)
	if err != nil {
		return nil, fmt.Errorf("volunteer: drawings: %w", err)
	}
	return out, nil
}

// LocalData returns the volunteer's standardized examples for opts.Source:
// the shard chosen by seed (already resolved, >= 1), or the drawings.
func LocalData(d *Digits, draw *Drawings, source string, seed uint64) (logreg.Dataset, error) {
	var (
		s   *dataset.Set
		err error
	)
	switch source {
	case SourceShard:
		s, _, err = d.Shard(seed)
	case SourceDrawings:
		s, err = draw.Set(d.Prep)
	default:
		err = fmt.Errorf("%w: source %q", ErrOption, source)
	}
	if err != nil {
		return logreg.Dataset{}, err
	}
	return client.LocalDataset(s)
}
