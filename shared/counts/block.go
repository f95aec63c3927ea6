package counts

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"

	"github.com/blanket-fl/blanket/shared/pine"
)

// Kind is what a block counts.
type Kind uint8

const (
	// KindEval is a volunteer's evaluation of the current model on its own
	// rows: (correct, evaluated), 0 <= correct <= evaluated <= Rows.
	KindEval Kind = 1
	// KindQuestion is one answer to a survey question of Options options.
	KindQuestion Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindEval:
		return "eval"
	case KindQuestion:
		return "question"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// PINE algorithm identifiers of the count blocks, in the VDAF private-use
// range (0xFFFF0000 and above) next to the reference's 0xFFFF1004: they
// enter every domain separation tag, so a count block's shares, proofs
// and joint randomness never verify as an update's or another kind's.
const (
	evalID     = 0xFFFF1C01
	questionID = 0xFFFF1C02
)

// Blanket's PINE choices (shared/pine/blanket.go), kept for the blocks:
// 100 of 100 wraparound checks (2^-100 per grinding attempt), 3 + 2
// proofs (VDAF-11 Section 9.6 for Field64 with joint randomness), alpha
// 8.7.
const (
	wrChecks           = 100
	proofs, proofsNorm = 3, 2
	alpha              = 8.7
)

// gridBits: the honest radius spans at least 2^gridBits fixed-point units,
// so that rounding the bound B up to an integer adds less than 2^-gridBits
// of it (0.4%).
const gridBits = 8

// MaxRows bounds Block rows (B^2 must stay far below Field64's q/3);
// MaxOptions bounds a question's options.
const (
	MaxRows    = 1 << 20
	MaxOptions = 1 << 10
)

// Block is one count vector of a volunteer's report: its encoding, the
// PINE instance whose proof bounds it, and the decoding of its sum.
//
// Encoding (docs/counts.md, "The measurement"): the honest values are the
// vertices (or points) of a polytope; the volunteer sends its point minus
// the polytope's circumcentre, scaled to integers, so that the L2 ball
// that PINE enforces is the polytope's circumscribed ball, the smallest
// ball containing every honest value:
//
//   - KindEval, (c, e) with 0 <= c <= e <= R: the triangle (0,0), (0,R),
//     (R,R) has a right angle at (0,R), circumcentre (R/2, R/2), radius
//     R/√2. Sent: y = (2c − R, 2e − R) (integers), ‖y‖² ≤ 2R².
//   - KindQuestion with k options: answer j is a vertex of the simplex of
//     K = 2^⌈log2 k⌉ options (k of them real, K − k never answered by an
//     honest volunteer); in the Hadamard basis of the simplex's hyperplane
//     the answer is the column j of the Sylvester matrix H_K without its
//     first (all-ones) row: y_i = (−1)^popcount(i&j), i = 1..K−1, integers
//     ±1, ‖y‖² = K − 1. H_K^T H_K = K·I recovers the counts exactly.
//
// PINE's grid: NumFracBits f is the smallest with 2^f·radius ≥ 2^8, and
// L2NormBound B = ⌈2^f·radius⌉ exactly (integer square root), so every
// honest value is accepted and the ball's radius exceeds the polytope's by
// less than one unit (< 0.4%).
type Block struct {
	kind    Kind
	rows    int // KindEval
	options int // KindQuestion: k
	k2      int // KindQuestion: K (power of two >= 2)
	p       *pine.Pine
}

// NewEval returns the evaluation block for volunteers who evaluate at most
// rows rows each.
func NewEval(rows int) (*Block, error) {
	if rows < 1 || rows > MaxRows {
		return nil, fmt.Errorf("counts: rows %d outside [1, %d]", rows, MaxRows)
	}
	// radius² = 2 rows² (in units of y).
	p, err := newPine(2, new(big.Int).Mul(big.NewInt(2), new(big.Int).Mul(big.NewInt(int64(rows)), big.NewInt(int64(rows)))), evalID)
	if err != nil {
		return nil, fmt.Errorf("counts: eval block of %d rows: %w", rows, err)
	}
	return &Block{kind: KindEval, rows: rows, p: p}, nil
}

// NewQuestion returns the block of one survey question with options
// options (an honest answer picks exactly one; a question that may be
// left unanswered has an explicit "no answer" option).
func NewQuestion(options int) (*Block, error) {
	if options < 2 || options > MaxOptions {
		return nil, fmt.Errorf("counts: %d options outside [2, %d]", options, MaxOptions)
	}
	k2 := 1 << bits.Len(uint(options-1))
	p, err := newPine(k2-1, big.NewInt(int64(k2-1)), questionID)
	if err != nil {
		return nil, fmt.Errorf("counts: question of %d options: %w", options, err)
	}
	return &Block{kind: KindQuestion, options: options, k2: k2, p: p}, nil
}

// newPine builds the PINE instance of dimension d whose ball has radius²
// r2 (in encoding units before the grid): f the smallest with
// 2^(2f)·r2 >= 2^(2·gridBits), B = ⌈√(2^(2f)·r2)⌉.
func newPine(d int, r2 *big.Int, id uint32) (*pine.Pine, error) {
	target := new(big.Int).Lsh(big.NewInt(1), 2*gridBits)
	f := 0
	scaled := new(big.Int).Set(r2)
	for scaled.Cmp(target) < 0 {
		f++
		scaled.Lsh(r2, uint(2*f))
	}
	b := new(big.Int).Sqrt(scaled)
	if new(big.Int).Mul(b, b).Cmp(scaled) < 0 {
		b.Add(b, big.NewInt(1))
	}
	if !b.IsUint64() || b.Uint64() > 1<<31 {
		return nil, errors.New("norm bound too large for Field64")
	}
	bound := b.Uint64()
	cfg := pine.Config{
		Dimension: d, NumFracBits: f, L2NormBound: bound,
		ChunkLength: 1, ChunkLengthNormEquality: bestChunk(d, 1, 0),
		Proofs: proofs, ProofsNormEquality: proofsNorm,
		NumWrChecks: wrChecks, NumWrSuccesses: wrChecks,
		Alpha: alpha, ID: id,
	}
	cfg.ChunkLength = bestChunk(bitCheckedLen(bound), 2, wrChecks)
	p, err := pine.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("counts: pine: %w", err)
	}
	return p, nil
}

// bitCheckedLen is PINE's bit-checked length for bound B (pine.New's
// derivation: 2·bitlen(B²) + (bitlen(2·wr − 1) + 1)·checks, wr =
// nextPow2(⌈alpha·B⌉ + 1)).
func bitCheckedLen(b uint64) int {
	nb := bits.Len64(b * b)
	wr := uint64(1) << bits.Len64(uint64(math.Ceil(alpha*float64(b))))
	nw := bits.Len64(2*wr - 1)
	return 2*nb + (nw+1)*wrChecks
}

// bestChunk minimises one ParallelSum proof's length a·c + 2(P − 1) + 1,
// P = nextPow2(1 + calls), over the chunk c, with calls = ⌈n/c⌉ +
// ⌈extra/c⌉ (shared/pine's bestChunk and bestChunkMain).
func bestChunk(n, a, extra int) int {
	best, bl := 1, math.MaxInt
	for c := 1; c <= n+extra; c++ {
		calls := (n+c-1)/c + (extra+c-1)/c
		p := 1 << bits.Len(uint(calls))
		if l := a*c + 2*(p-1) + 1; l < bl {
			best, bl = c, l
		}
	}
	return best
}

// Kind returns what the block counts.
func (b *Block) Kind() Kind { return b.kind }

// Rows is the evaluation block's row bound (0 for a question).
func (b *Block) Rows() int { return b.rows }

// Options is a question's number of options (0 for an evaluation block).
func (b *Block) Options() int { return b.options }

// Dim is the length of the encoded vector (2, or K − 1 for a question).
func (b *Block) Dim() int { return b.p.Config().Dimension }

// Pine is the block's PINE instance (what the servers prepare with).
func (b *Block) Pine() *pine.Pine { return b.p }

// Scale is 2^NumFracBits: fixed-point units per encoding unit.
func (b *Block) Scale() float64 { return b.p.Scale() }

// Sensitivity is PINE's L2NormBound B in fixed-point units: the L2 norm
// of ANY accepted report's encoded block, honest or not, except with
// PINE's soundness error (pine.Pine.Sensitivity; 2^-114 per report,
// 2^-100 per grinding attempt). Add/remove of one report moves the block's
// integer sum by at most B, replacing one volunteer's data by at most 2B
// (the honest polytope's diameter equals the ball's: 2B up to the grid's
// rounding). It is the Δ of this block's part in a joint release
// (privacy.SecAggPart).
func (b *Block) Sensitivity() float64 { return b.p.Sensitivity() }

// encode maps a volunteer's value to the float vector PINE encodes
// (integers, exact on PINE's grid).
func (b *Block) encode(v Value) ([]float64, error) {
	switch b.kind {
	case KindEval:
		if v.Correct < 0 || v.Correct > v.Evaluated || v.Evaluated > b.rows {
			return nil, fmt.Errorf("counts: need 0 <= correct (%d) <= evaluated (%d) <= rows (%d)", v.Correct, v.Evaluated, b.rows)
		}
		r := float64(b.rows)
		return []float64{2*float64(v.Correct) - r, 2*float64(v.Evaluated) - r}, nil
	case KindQuestion:
		if v.Answer < 0 || v.Answer >= b.options {
			return nil, fmt.Errorf("counts: answer %d outside [0, %d)", v.Answer, b.options)
		}
		out := make([]float64, b.k2-1)
		for i := range out {
			out[i] = hadamard(i+1, v.Answer)
		}
		return out, nil
	}
	return nil, fmt.Errorf("counts: unknown block kind %v", b.kind)
}

// hadamard is the Sylvester Hadamard entry (−1)^popcount(i&j).
func hadamard(i, j int) float64 {
	if bits.OnesCount(uint(i&j))%2 == 1 {
		return -1
	}
	return 1
}

// Value is one volunteer's value of a block: Correct and Evaluated for
// KindEval, Answer (0-based option) for KindQuestion.
type Value struct {
	Correct, Evaluated int
	Answer             int
}

// decode maps a block's unsharded integer sum (fixed-point units) over n
// accepted reports to count sums: (correct, evaluated) for KindEval, the
// K options' counts for KindQuestion (the first Options() are the real
// options, the rest must be 0 for honest volunteers). Exact for honest
// reports without noise; linear, so noise passes through (CountSD).
func (b *Block) decode(sum []int64, n int) ([]float64, error) {
	if len(sum) != b.Dim() {
		return nil, fmt.Errorf("counts: %d sums for a block of dimension %d", len(sum), b.Dim())
	}
	if n < 0 {
		return nil, errors.New("counts: negative report count")
	}
	s := b.Scale()
	switch b.kind {
	case KindEval:
		r := float64(b.rows) * float64(n)
		return []float64{(float64(sum[0])/s + r) / 2, (float64(sum[1])/s + r) / 2}, nil
	case KindQuestion:
		out := make([]float64, b.k2)
		for j := range out {
			acc := float64(n)
			for i := 1; i < b.k2; i++ {
				acc += hadamard(i, j) * float64(sum[i-1]) / s
			}
			out[j] = acc / float64(b.k2)
		}
		return out, nil
	}
	return nil, fmt.Errorf("counts: unknown block kind %v", b.kind)
}

// CountSD is the standard deviation, in counts, of the noise on each
// decoded count when each of the two servers adds N_Z(0, sigma²) per
// coordinate of the block (fixed-point units): the decoding is linear, so
// KindEval: √2·σ/(2·Scale) per count, the two counts' noises independent;
// KindQuestion: √(2(K−1))·σ/(K·Scale) per count, covariance −2σ²/(K·Scale)²
// between two counts. (The discrete Gaussian's variance is at most σ²,
// Canonne-Kamath-Steinke 2020 Cor. 9: the figure is an upper bound.)
func (b *Block) CountSD(sigma float64) float64 {
	s := b.Scale()
	switch b.kind {
	case KindEval:
		return math.Sqrt2 * sigma / (2 * s)
	case KindQuestion:
		return math.Sqrt(2*float64(b.k2-1)) * sigma / (float64(b.k2) * s)
	}
	return math.NaN()
}

// Influence is the range of one accepted report's contribution to each
// decoded count, honest or not (PINE bounds ‖y‖ ≤ B; by Cauchy-Schwarz a
// count, a linear function a·y + c of y, moves within c ± ‖a‖·B): for an
// honest volunteer [0, Rows] or [0, 1]. Lo and Hi of each count:
// KindEval: correct and evaluated both in [(R − B/s)/2, (R + B/s)/2] ≈
// [−0.207R, 1.207R]; KindQuestion: every option (real or not) in
// [(1 − √(K−1)·B/s)/K, (1 + √(K−1)·B/s)/K] ≈ [2/K − 1, 1], and the K
// options of one report always sum to exactly 1 (the all-ones row is not
// sent: it is the report count).
func (b *Block) Influence() (lo, hi float64) {
	bs := b.Sensitivity() / b.Scale()
	switch b.kind {
	case KindEval:
		r := float64(b.rows)
		return (r - bs) / 2, (r + bs) / 2
	case KindQuestion:
		k := float64(b.k2)
		a := math.Sqrt(k-1) * bs
		return (1 - a) / k, (1 + a) / k
	}
	return math.NaN(), math.NaN()
}
