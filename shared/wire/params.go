package wire

import (
	"fmt"
	"math"
	"strings"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Protocol is the FLAME encoding a round uses (Liu et al., AAAI 2021).
type Protocol uint8

// Protocols.
const (
	ProtocolSSSimple Protocol = 1 // all D coordinates, randomizer at EpsL/D
	ProtocolSSDouble Protocol = 2 // K sampled coordinates, randomizer at EpsL/K
	ProtocolSSTopk   Protocol = 3 // top K plus K(L-1) decoys, randomizer at EpsL/K
	// ProtocolSecAgg is secure summation through the relay (PINE,
	// shared/secagg): one report of two sealed input shares per volunteer,
	// discrete Gaussian noise from both servers.
	ProtocolSecAgg Protocol = 4
	// ProtocolAPES is APES (Liu et al., "Echo of Neighbors", AAAI 2023):
	// every client reports all D coordinates with Clip-Laplace at its own
	// budget of at most EpsL, and sends that budget as one more message in
	// a separate column (index D). ProtocolSAPES is S-APES: the same with
	// post-sparsification to the K largest perturbed coordinates (the rest
	// replaced by data-independent centre draws). Both use
	// RandomizerClipLaplace and D+1 columns of width-1 messages.
	ProtocolAPES  Protocol = 5
	ProtocolSAPES Protocol = 6
)

// IsAPES reports whether p is APES or S-APES (D value columns plus one
// budget column).
func (p Protocol) IsAPES() bool { return p == ProtocolAPES || p == ProtocolSAPES }

// String returns the protocol's name as used on command lines.
func (p Protocol) String() string {
	switch p {
	case ProtocolSSSimple:
		return "ss-simple"
	case ProtocolSSDouble:
		return "ss-double"
	case ProtocolSSTopk:
		return "ss-topk"
	case ProtocolSecAgg:
		return "secagg"
	case ProtocolAPES:
		return "apes"
	case ProtocolSAPES:
		return "s-apes"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol parses "ss-simple", "ss-double", "ss-topk", "secagg",
// "apes" or "s-apes".
func ParseProtocol(s string) (Protocol, error) {
	for _, p := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk, ProtocolSecAgg, ProtocolAPES, ProtocolSAPES} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("wire: unknown protocol %q (want ss-simple, ss-double, ss-topk, secagg, apes or s-apes)", s)
}

// Randomizer is the local randomizer a round uses.
type Randomizer uint8

// Randomizers.
const (
	RandomizerLaplace  Randomizer = 1
	RandomizerRGB      Randomizer = 2
	RandomizerGaussian Randomizer = 3
	// RandomizerDiscreteGaussian is secure summation's noise (the servers
	// add it, not the volunteers); only with ProtocolSecAgg.
	RandomizerDiscreteGaussian Randomizer = 4
	// RandomizerClipLaplace is APES's Clip-Laplace (truncated Laplace on a
	// bounded range); only with ProtocolAPES and ProtocolSAPES.
	RandomizerClipLaplace Randomizer = 5
)

// String returns the randomizer's name as used on command lines.
func (r Randomizer) String() string {
	switch r {
	case RandomizerLaplace:
		return "laplace"
	case RandomizerRGB:
		return "rgb"
	case RandomizerGaussian:
		return "gaussian"
	case RandomizerDiscreteGaussian:
		return "discrete-gaussian"
	case RandomizerClipLaplace:
		return "clip-laplace"
	}
	return fmt.Sprintf("randomizer(%d)", uint8(r))
}

// ParseRandomizer parses "laplace", "rgb", "gaussian",
// "discrete-gaussian" or "clip-laplace".
func ParseRandomizer(s string) (Randomizer, error) {
	for _, r := range []Randomizer{RandomizerLaplace, RandomizerRGB, RandomizerGaussian, RandomizerDiscreteGaussian, RandomizerClipLaplace} {
		if strings.EqualFold(s, r.String()) {
			return r, nil
		}
	}
	return 0, fmt.Errorf("wire: unknown randomizer %q (want laplace, rgb, gaussian, discrete-gaussian or clip-laplace)", s)
}

// maxMessages is the largest number of messages per client report (the
// Report's count field is a u16).
const maxMessages = math.MaxUint16

// Params is a round's configuration as announced (bytes 18..84 of the
// Announcement). Validate states the constraints.
type Params struct {
	Protocol   Protocol
	Randomizer Randomizer
	D          uint32 // model dimension, 1 .. 1<<20
	K          uint32 // coordinates perturbed per client (D for ss-simple)
	L          uint32 // ss-topk groups (1 otherwise)
	Width      uint32 // entries per message; divides K*L
	NP         uint32 // padding target per dimension (>= 1)
	Buckets    uint32 // rgb b (1 .. 1<<30); 0 otherwise
	MinBatch   uint32 // fewer reporting clients: the round aborts (>= 1)
	Quota      uint32 // the round closes early at this many reports; 0 = none
	EpsL       float64
	DeltaL     float64 // gaussian: in (0, 1); 0 otherwise
	Clip       float64
	CheckInP   float64 // in (0, 1]
	// Secure summation only (0 otherwise); encoded in the slots of
	// Buckets and EpsL, which secagg does not use:
	Bits  uint32  // 0: secure summation is PINE (no bits per entry)
	Sigma float64 // σ of each server's discrete Gaussian noise, PINE fixed-point units
	// Counts are the round's private count blocks (secure summation only;
	// shared/counts, docs/counts.md): at most one evaluation block, first,
	// then one block per survey question. Their number is announced in
	// the np slot (0 for secagg without counts) and the blocks between
	// the relay's key and the model (announcement.go).
	Counts CountList
}

// CountList is a list of count blocks held in its encoded form, so that
// Params stays comparable (the relay and the client compare announced
// Params with ==). The zero value is the empty list.
type CountList struct{ enc string }

// NewCountList returns the list of blocks bs (not validated: Params.Validate
// does).
func NewCountList(bs ...CountBlock) CountList {
	b := make([]byte, countBlockSize*len(bs))
	for i, c := range bs {
		putCountBlock(b[countBlockSize*i:], c)
	}
	return CountList{enc: string(b)}
}

// Len is the number of blocks.
func (l CountList) Len() int { return len(l.enc) / countBlockSize }

// At returns block i (0 <= i < Len()).
func (l CountList) At(i int) CountBlock {
	return getCountBlock([]byte(l.enc[countBlockSize*i : countBlockSize*(i+1)]))
}

// Blocks returns the blocks in order (nil when empty).
func (l CountList) Blocks() []CountBlock {
	if l.Len() == 0 {
		return nil
	}
	out := make([]CountBlock, l.Len())
	for i := range out {
		out[i] = l.At(i)
	}
	return out
}

func putCountBlock(b []byte, c CountBlock) {
	b[0] = c.Kind
	be.PutUint32(b[1:], c.N)
	putF64(b[5:], c.Sigma)
}

func getCountBlock(b []byte) CountBlock {
	return CountBlock{Kind: b[0], N: be.Uint32(b[1:]), Sigma: getF64(b[5:])}
}

// Count block kinds (shared/counts.KindEval, KindQuestion).
const (
	CountEval     uint8 = 1
	CountQuestion uint8 = 2
)

// Limits of the count blocks (shared/counts: MaxBlocks, MaxRows,
// MaxOptions) and of their σ (shared/counts.Aggregate.AddNoise).
const (
	MaxCountBlocks  = 256
	maxCountRows    = 1 << 20
	maxCountOptions = 1 << 10
	minCountSigma   = 4
	maxCountSigma   = 0x1p40
)

// CountBlock is one announced count block: what a volunteer needs to
// encode and shard it (Kind and N) and to recompute the round's joint
// privacy charge (Sigma; the block's sensitivity follows from Kind and N,
// shared/counts.Block.Sensitivity).
type CountBlock struct {
	// Kind is CountEval (the current model's correct and evaluated rows on
	// the volunteer's own data) or CountQuestion (one survey answer).
	Kind uint8
	// N is the evaluation's row bound R per volunteer (1 .. 2^20), or the
	// question's number of options k (2 .. 1024).
	N uint32
	// Sigma is the σ of each server's discrete Gaussian noise on every
	// coordinate of the block, in the block's fixed-point units (>= 4).
	Sigma float64
}

// countBlockSize is the encoded size of one CountBlock: kind u8 | n u32 |
// sigma f64.
const countBlockSize = 13

// validateCounts checks secure summation's count blocks: at most
// MaxCountBlocks; at most one evaluation block, and only first; an
// evaluation's N in [1, 2^20], a question's in [2, 1024]; Sigma finite in
// [4, 2^40].
func validateCounts(l CountList) error {
	if len(l.enc)%countBlockSize != 0 {
		return malformed(ErrParams, "count list of %d bytes", len(l.enc))
	}
	if l.Len() > MaxCountBlocks {
		return malformed(ErrParams, "%d count blocks, at most %d", l.Len(), MaxCountBlocks)
	}
	for i, c := range l.Blocks() {
		switch c.Kind {
		case CountEval:
			if i != 0 {
				return malformed(ErrParams, "count block %d: the evaluation block must be the first and only one", i)
			}
			if c.N < 1 || c.N > maxCountRows {
				return malformed(ErrParams, "count block %d: %d evaluation rows outside [1, %d]", i, c.N, maxCountRows)
			}
		case CountQuestion:
			if c.N < 2 || c.N > maxCountOptions {
				return malformed(ErrParams, "count block %d: %d options outside [2, %d]", i, c.N, maxCountOptions)
			}
		default:
			return malformed(ErrParams, "count block %d: unknown kind %d", i, c.Kind)
		}
		if !check.Finite(c.Sigma) || c.Sigma < minCountSigma || c.Sigma > maxCountSigma {
			return malformed(ErrParams, "count block %d: sigma %v outside [%d, 2^40]", i, c.Sigma, minCountSigma)
		}
	}
	return nil
}

// Validate checks the configuration:
//
//   - Protocol and Randomizer known; 1 <= D <= 1<<20.
//   - ss-simple: K = D, L = 1. ss-double: 1 <= K <= D, L = 1.
//     ss-topk: K >= 1, L >= 1, K*L <= D (a client's K*L indices are
//     distinct; see shared/mechanism topk.go).
//   - 1 <= Width, Width divides K*L, and M = K*L/Width <= 65535.
//   - NP >= 1 and D*NP a multiple of Width (the relay pads every dimension
//     to NP with whole messages).
//   - rgb: 1 <= Buckets <= 1<<30; other randomizers: Buckets = 0.
//   - MinBatch >= 1; Quota = 0 or Quota >= MinBatch.
//   - EpsL finite and > 0; Clip finite and > 0; CheckInP in (0, 1];
//     gaussian: DeltaL in (0, 1); others: DeltaL = 0.
//   - apes, s-apes: see validateAPES.
func (p Params) Validate() error {
	bad := func(format string, args ...any) error {
		return malformed(ErrParams, format, args...)
	}
	switch p.Protocol {
	case ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk:
	case ProtocolSecAgg:
		return p.validateSecAgg()
	case ProtocolAPES, ProtocolSAPES:
		return p.validateAPES()
	default:
		return bad("unknown protocol %d", uint8(p.Protocol))
	}
	if p.Counts.Len() != 0 {
		return bad("count blocks are secagg's, got %d for %v", p.Counts.Len(), p.Protocol)
	}
	if p.Bits != 0 || p.Sigma != 0 || math.Signbit(p.Sigma) {
		return bad("bits and sigma are secagg's, got %d and %v for %v", p.Bits, p.Sigma, p.Protocol)
	}
	switch p.Randomizer {
	case RandomizerLaplace, RandomizerRGB, RandomizerGaussian:
	default:
		return bad("unknown randomizer %d", uint8(p.Randomizer))
	}
	if p.D < 1 || p.D > maxD {
		return bad("d = %d outside [1, %d]", p.D, maxD)
	}
	switch p.Protocol {
	case ProtocolSSSimple:
		if p.K != p.D || p.L != 1 {
			return bad("ss-simple needs k = d and l = 1, got k = %d, l = %d, d = %d", p.K, p.L, p.D)
		}
	case ProtocolSSDouble:
		if p.K < 1 || p.K > p.D || p.L != 1 {
			return bad("ss-double needs 1 <= k <= d and l = 1, got k = %d, l = %d, d = %d", p.K, p.L, p.D)
		}
	case ProtocolSSTopk:
		if p.K < 1 || p.L < 1 || uint64(p.K)*uint64(p.L) > uint64(p.D) {
			return bad("ss-topk needs k, l >= 1 and k*l <= d, got k = %d, l = %d, d = %d", p.K, p.L, p.D)
		}
	}
	kl := uint64(p.K) * uint64(p.L)
	if p.Width < 1 || kl%uint64(p.Width) != 0 {
		return bad("width %d does not divide k*l = %d", p.Width, kl)
	}
	if m := kl / uint64(p.Width); m > maxMessages {
		return bad("%d messages per client, above %d", m, maxMessages)
	}
	if p.NP < 1 {
		return bad("np must be >= 1")
	}
	if (uint64(p.D)*uint64(p.NP))%uint64(p.Width) != 0 {
		return bad("d*np = %d*%d is not a multiple of width %d", p.D, p.NP, p.Width)
	}
	if p.Randomizer == RandomizerRGB {
		if p.Buckets < 1 || p.Buckets > 1<<30 {
			return bad("rgb buckets %d outside [1, %d]", p.Buckets, 1<<30)
		}
	} else if p.Buckets != 0 {
		return bad("buckets = %d for %v, want 0", p.Buckets, p.Randomizer)
	}
	if p.MinBatch < 1 {
		return bad("minBatch must be >= 1")
	}
	if p.Quota != 0 && p.Quota < p.MinBatch {
		return bad("quota %d below minBatch %d", p.Quota, p.MinBatch)
	}
	if !check.Finite(p.EpsL) || p.EpsL <= 0 {
		return bad("epsL = %v, want finite > 0", p.EpsL)
	}
	if !check.Finite(p.Clip) || p.Clip <= 0 {
		return bad("clip = %v, want finite > 0", p.Clip)
	}
	if !(p.CheckInP > 0 && p.CheckInP <= 1) {
		return bad("checkInP = %v, want in (0, 1]", p.CheckInP)
	}
	if p.Randomizer == RandomizerGaussian {
		if !(p.DeltaL > 0 && p.DeltaL < 1) {
			return bad("gaussian deltaL = %v, want in (0, 1)", p.DeltaL)
		}
	} else if p.DeltaL != 0 || math.Signbit(p.DeltaL) {
		return bad("deltaL = %v for %v, want 0", p.DeltaL, p.Randomizer)
	}
	return nil
}

// validateSecAgg checks a secure-summation configuration: randomizer
// discrete-gaussian; 1 <= D <= 1<<20; K = L = Width = 1 (one report) and
// NP = Buckets = 0; EpsL = DeltaL = 0 (the servers' noise is Sigma); Bits =
// 0 (PINE's proof bounds the L2 norm; it has no bits per entry); Sigma, Clip finite and > 0; CheckInP in (0, 1]; MinBatch >= 1 and
// Quota >= MinBatch (required: the field arithmetic is sized for at most
// Quota reports).
func (p Params) validateSecAgg() error {
	bad := func(format string, args ...any) error {
		return malformed(ErrParams, format, args...)
	}
	switch {
	case p.Randomizer != RandomizerDiscreteGaussian:
		return bad("secagg needs the discrete-gaussian randomizer, got %v", p.Randomizer)
	case p.D < 1 || p.D > maxD:
		return bad("d = %d outside [1, %d]", p.D, maxD)
	case p.K != 1 || p.L != 1 || p.Width != 1 || p.NP != 0 || p.Buckets != 0:
		return bad("secagg needs k = l = width = 1 and np = buckets = 0, got %d, %d, %d, %d, %d", p.K, p.L, p.Width, p.NP, p.Buckets)
	case p.EpsL != 0 || math.Signbit(p.EpsL) || p.DeltaL != 0 || math.Signbit(p.DeltaL):
		return bad("secagg has no local budget: epsL = %v, deltaL = %v, want 0", p.EpsL, p.DeltaL)
	case p.Bits != 0:
		return bad("secagg is PINE (no bits per entry): bits = %d, want 0", p.Bits)
	case !check.Finite(p.Sigma) || p.Sigma <= 0:
		return bad("secagg sigma = %v, want finite > 0", p.Sigma)
	case !check.Finite(p.Clip) || p.Clip <= 0:
		return bad("clip = %v, want finite > 0", p.Clip)
	case !(p.CheckInP > 0 && p.CheckInP <= 1):
		return bad("checkInP = %v, want in (0, 1]", p.CheckInP)
	case p.MinBatch < 1:
		return bad("minBatch must be >= 1")
	case p.Quota < p.MinBatch:
		return bad("secagg needs a quota >= minBatch (the field is sized for it), got %d < %d", p.Quota, p.MinBatch)
	}
	if p.Counts.Len() > 0 && p.Sigma < minCountSigma {
		return bad("secagg sigma %v with count blocks: the joint release needs every sigma >= %d", p.Sigma, minCountSigma)
	}
	return validateCounts(p.Counts)
}

// validateAPES checks an APES or S-APES configuration: randomizer
// clip-laplace; 1 <= D < MaxD (the batch has D+1 columns); L = Width = 1;
// apes: K = D; s-apes: 1 <= K < D (K is b, the coordinates kept after
// post-sparsification); NP >= 1; Buckets = Bits = 0, Sigma = DeltaL = 0;
// EpsL (the largest report budget a client may choose) and Clip finite and
// > 0; CheckInP in (0, 1]; MinBatch >= 1; Quota = 0 or >= MinBatch.
func (p Params) validateAPES() error {
	bad := func(format string, args ...any) error {
		return malformed(ErrParams, format, args...)
	}
	switch {
	case p.Randomizer != RandomizerClipLaplace:
		return bad("%v needs the clip-laplace randomizer, got %v", p.Protocol, p.Randomizer)
	case p.D < 1 || p.D >= maxD:
		return bad("d = %d outside [1, %d)", p.D, maxD)
	case p.L != 1 || p.Width != 1:
		return bad("%v needs l = width = 1, got %d and %d", p.Protocol, p.L, p.Width)
	case p.Protocol == ProtocolAPES && p.K != p.D:
		return bad("apes needs k = d, got k = %d, d = %d", p.K, p.D)
	case p.Protocol == ProtocolSAPES && (p.K < 1 || p.K >= p.D):
		return bad("s-apes needs 1 <= k < d (k is b), got k = %d, d = %d", p.K, p.D)
	case p.NP < 1:
		return bad("np must be >= 1")
	case p.Buckets != 0 || p.Bits != 0 || p.Sigma != 0 || math.Signbit(p.Sigma) || p.Counts != (CountList{}):
		return bad("buckets, bits, sigma and count blocks must be 0 for %v", p.Protocol)
	case p.DeltaL != 0 || math.Signbit(p.DeltaL):
		return bad("deltaL = %v for %v, want 0", p.DeltaL, p.Protocol)
	case !check.Finite(p.EpsL) || p.EpsL <= 0:
		return bad("epsL = %v, want finite > 0", p.EpsL)
	case !check.Finite(p.Clip) || p.Clip <= 0:
		return bad("clip = %v, want finite > 0", p.Clip)
	case !(p.CheckInP > 0 && p.CheckInP <= 1):
		return bad("checkInP = %v, want in (0, 1]", p.CheckInP)
	case p.MinBatch < 1:
		return bad("minBatch must be >= 1")
	case p.Quota != 0 && p.Quota < p.MinBatch:
		return bad("quota %d below minBatch %d", p.Quota, p.MinBatch)
	}
	return nil
}

// Columns returns the number of dimensions (message indices) of a round's
// reports and batch: D, or D+1 for APES and S-APES, whose index D is the
// budget column.
func (p Params) Columns() uint32 {
	if p.Protocol.IsAPES() {
		return p.D + 1
	}
	return p.D
}

// Messages returns M = K*L/Width, the number of Report frames per client
// (0 if Width is 0); for APES and S-APES, D+1 (every coordinate and the
// budget, width 1).
func (p Params) Messages() int {
	if p.Width == 0 {
		return 0
	}
	if p.Protocol.IsAPES() {
		return int(p.D) + 1
	}
	return int(uint64(p.K) * uint64(p.L) / uint64(p.Width))
}

// ReportFrameSize returns the size of every Report frame of the round:
// 18 + 4*Width + SealedLen(Width). It depends only on Width.
func (p Params) ReportFrameSize() int {
	return reportHeader + 4*int(p.Width) + envelope.SealedLen(int(p.Width))
}

// BatchMessages returns the number of messages of a batch padded to np per
// dimension: Columns()*np/Width (0 if Width is 0).
func (p Params) BatchMessages(np uint32) int {
	if p.Width == 0 {
		return 0
	}
	return int(uint64(p.Columns()) * uint64(np) / uint64(p.Width))
}

// PerCoordinateEpsilon returns the budget of the randomizer applied to one
// coordinate: EpsL/D for ss-simple (every coordinate is reported), EpsL/K
// otherwise (K coordinates carry the client's data; basic composition over
// the coordinates of one report, FLAME Algorithms 2 and 4). It returns 0
// for an invalid configuration with D or K zero. For APES and S-APES it is
// the largest per-coordinate budget, EpsL/D (every coordinate is
// perturbed; a client's own budget may be lower).
func (p Params) PerCoordinateEpsilon() float64 {
	if p.Protocol == ProtocolSecAgg {
		return 0
	}
	n := p.K
	if p.Protocol == ProtocolSSSimple || p.Protocol.IsAPES() {
		n = p.D
	}
	if n == 0 {
		return 0
	}
	return p.EpsL / float64(n)
}

// paramsSize is the encoded size of Params (announcement bytes 18..84).
const paramsSize = 66

// putParams writes p at b[0:66] in announcement order.
func putParams(b []byte, p Params) {
	b[0] = byte(p.Protocol)
	b[1] = byte(p.Randomizer)
	be.PutUint32(b[2:], p.D)
	be.PutUint32(b[6:], p.K)
	be.PutUint32(b[10:], p.L)
	be.PutUint32(b[14:], p.Width)
	be.PutUint32(b[18:], p.NP)
	be.PutUint32(b[22:], p.Buckets)
	be.PutUint32(b[26:], p.MinBatch)
	be.PutUint32(b[30:], p.Quota)
	putF64(b[34:], p.EpsL)
	if p.Protocol == ProtocolSecAgg {
		be.PutUint32(b[18:], uint32(p.Counts.Len()))
		be.PutUint32(b[22:], p.Bits)
		putF64(b[34:], p.Sigma)
	}
	putF64(b[42:], p.DeltaL)
	putF64(b[50:], p.Clip)
	putF64(b[58:], p.CheckInP)
}

// getParams reads Params from b[0:66]. For secure summation the np slot
// is the number of count blocks, returned as blocks (Params.Counts is
// read by ParseAnnouncement, which knows where the blocks are).
func getParams(b []byte) (p Params, blocks uint32) {
	p = Params{
		Protocol:   Protocol(b[0]),
		Randomizer: Randomizer(b[1]),
		D:          be.Uint32(b[2:]),
		K:          be.Uint32(b[6:]),
		L:          be.Uint32(b[10:]),
		Width:      be.Uint32(b[14:]),
		NP:         be.Uint32(b[18:]),
		Buckets:    be.Uint32(b[22:]),
		MinBatch:   be.Uint32(b[26:]),
		Quota:      be.Uint32(b[30:]),
		EpsL:       getF64(b[34:]),
		DeltaL:     getF64(b[42:]),
		Clip:       getF64(b[50:]),
		CheckInP:   getF64(b[58:]),
	}
	if p.Protocol == ProtocolSecAgg {
		p.Bits, p.Buckets = p.Buckets, 0
		p.Sigma, p.EpsL = p.EpsL, 0
		blocks, p.NP = p.NP, 0
	}
	return p, blocks
}
