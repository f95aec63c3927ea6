package pine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"math/bits"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Config holds the parameters of a PINE instance over Field64 with
// XofHmacSha256Aes128 (the draft's user and operational parameters, plus
// the number of proofs and chunk lengths of the reference's Pine class).
type Config struct {
	// Dimension is the length of the gradient.
	Dimension int
	// NumFracBits: each entry x is encoded as round(x * 2^NumFracBits),
	// rounding half to even.
	NumFracBits int
	// L2NormBound is the draft's l2_norm_bound, in fixed-point units (a
	// float bound b corresponds to b * 2^NumFracBits): an accepted
	// gradient g has sum g_i^2 <= L2NormBound^2 over the integers (except
	// with the soundness error, see the package doc).
	L2NormBound uint64
	// ChunkLength is the ParallelSum chunk of the main circuit;
	// ChunkLengthNormEquality that of the norm-equality circuit.
	ChunkLength, ChunkLengthNormEquality int
	// Proofs and ProofsNormEquality are the numbers of independent proofs
	// of each circuit (VDAF-11 Section 7.1.2).
	Proofs, ProofsNormEquality int
	// NumWrChecks wraparound checks are run; exactly NumWrSuccesses of
	// them must be reported successful.
	NumWrChecks, NumWrSuccesses int
	// Alpha sets the wraparound check range (the reference's ALPHA = 8.7).
	Alpha float64
	// ID is the VDAF algorithm identifier in the domain separation tags
	// (0xFFFF1004 for the reference's Pine64HmacSha256Aes128).
	ID uint32
}

// Pine64HmacSha256Aes128ID is the reference's algorithm ID of
// Pine64HmacSha256Aes128.
const Pine64HmacSha256Aes128ID = 0xFFFF1004

// Usages of the domain separation tag (VDAF-11 Section 7.2, and the PINE
// reference's three wraparound usages).
const (
	usageMeasShare      = 1
	usageProofShare     = 2
	usageJointRandomnes = 3
	usageProveRand      = 4
	usageQueryRand      = 5
	usageJointRandSeed  = 6
	usageJointRandPart  = 7
	usageWrJointRand    = 8
	usageWrJointSeed    = 9
	usageWrJointPart    = 10
)

// draftVersion is the PINE reference's VERSION byte in its domain
// separation tags (VERSION || ID || usage).
const draftVersion = 1

const (
	nonceSize     = 16
	randSize      = 7 * seedSize // RAND_SIZE for two aggregators
	publicSize    = 4 * seedSize
	helperSize    = 4 * seedSize
	prepMsgSize   = 2 * seedSize
	verifyKeySize = seedSize
)

// Pine is one PINE instance with two aggregators: the leader (aggregator 0)
// receives its measurement and proof shares in full, the helper
// (aggregator 1) receives four 32-byte seeds. A Pine is immutable and safe
// for concurrent use (a Verifier is not).
type Pine struct {
	cfg Config

	sqNormBound   uint64
	numBitsSqNorm int
	wrBound       uint64
	numBitsWr     int
	gradNormLen   int // dimension + 2*numBitsSqNorm
	bitCheckedLen int
	measLen       int // MEAS_LEN of the VDAF (what is shared)
	flpMeasLen    int // + num_wr_checks dot products

	flpNE, flp *flpParams
	dsts       [11][7]byte
}

// New checks cfg as the reference does (flp_pine.py, PineValidBase) and
// returns the instance.
func New(cfg Config) (*Pine, error) {
	c := cfg
	switch {
	case c.Dimension <= 0:
		return nil, errors.New("pine: dimension must be positive")
	case c.NumFracBits < 0 || c.NumFracBits > 62:
		return nil, errors.New("pine: num_frac_bits must be in [0, 62]")
	case c.L2NormBound == 0 || c.L2NormBound > modulus/2:
		return nil, errors.New("pine: l2_norm_bound must be positive")
	case c.ChunkLength <= 0 || c.ChunkLengthNormEquality <= 0:
		return nil, errors.New("pine: chunk lengths must be positive")
	case c.Proofs < 1 || c.Proofs > 255 || c.ProofsNormEquality < 1 || c.ProofsNormEquality > 255:
		return nil, errors.New("pine: numbers of proofs must be in [1, 255]")
	case c.NumWrChecks < 1 || c.NumWrSuccesses < 1 || c.NumWrSuccesses > c.NumWrChecks:
		return nil, errors.New("pine: need 1 <= num_wr_successes <= num_wr_checks")
	case !(c.Alpha > 0) || math.IsInf(c.Alpha, 0):
		return nil, errors.New("pine: alpha must be positive")
	}
	p := &Pine{cfg: c}
	// (q / B <= B): B^2 must stay below q; and q > 3 * B^2 + 2 (Figure 1).
	hi, lo := bits.Mul64(c.L2NormBound, c.L2NormBound)
	if hi != 0 || lo >= modulus || (modulus-2)/lo <= 3 || ((modulus-2)/lo == 3 && (modulus-2)%lo == 0) {
		return nil, fmt.Errorf("pine: l2_norm_bound %d too large for Field64's range check", c.L2NormBound)
	}
	p.sqNormBound = lo
	p.numBitsSqNorm = bits.Len64(lo)
	ab := math.Ceil(c.Alpha * float64(c.L2NormBound))
	if ab >= 1<<52 {
		return nil, errors.New("pine: alpha * l2_norm_bound too large")
	}
	p.wrBound = uint64(nextPow2(int(ab) + 1))
	// Lemma 3.3 of [ROCT23] as checked by the reference.
	q := float64(modulus)
	wr := float64(p.wrBound)
	if q/float64(c.NumWrChecks) < 2 || q/wr < 2600 || wr*wr/q > 4000 {
		return nil, errors.New("pine: wraparound check infeasible in Field64 for this bound")
	}
	p.numBitsWr = bits.Len64(2*p.wrBound - 1)
	p.gradNormLen = c.Dimension + 2*p.numBitsSqNorm
	p.bitCheckedLen = 2*p.numBitsSqNorm + (p.numBitsWr+1)*c.NumWrChecks
	p.measLen = c.Dimension + p.bitCheckedLen
	p.flpMeasLen = p.measLen + c.NumWrChecks
	var err error
	if p.flpNE, err = newFlp(normEqCircuit{p}); err != nil {
		return nil, err
	}
	if p.flp, err = newFlp(mainCircuit{p}); err != nil {
		return nil, err
	}
	for u := range p.dsts {
		d := &p.dsts[u]
		d[0] = draftVersion
		binary.BigEndian.PutUint32(d[1:5], c.ID)
		binary.BigEndian.PutUint16(d[5:7], uint16(u))
	}
	return p, nil
}

// Config returns the parameters.
func (p *Pine) Config() Config { return p.cfg }

func (p *Pine) dst(usage int) []byte { return p.dsts[usage][:] }

func (p *Pine) proofsLen() int {
	return p.flpNE.proofLen*p.cfg.ProofsNormEquality + p.flp.proofLen*p.cfg.Proofs
}

func (p *Pine) verifiersLen() int {
	return p.flpNE.verifierLen*p.cfg.ProofsNormEquality + p.flp.verifierLen*p.cfg.Proofs
}

// LeaderShareSize, HelperShareSize and PublicShareSize are the encoded
// sizes of the messages a client uploads; PrepShareSize and PrepMsgSize
// those the aggregators exchange per report.
func (p *Pine) LeaderShareSize() int { return elemSize*(p.measLen+p.proofsLen()) + 2*seedSize }

// HelperShareSize is the helper's input share: four seeds.
func (p *Pine) HelperShareSize() int { return helperSize }

// PublicShareSize is the two pairs of joint randomness parts.
func (p *Pine) PublicShareSize() int { return publicSize }

// PrepShareSize is the verifier share plus two joint randomness parts.
func (p *Pine) PrepShareSize() int { return elemSize*p.verifiersLen() + 2*seedSize }

// PrepMsgSize is the two joint randomness seeds.
func (p *Pine) PrepMsgSize() int { return prepMsgSize }

// macVec streams encode_vec(v) into m.
func macVec(m hash.Hash, v []fp) {
	var buf [512]byte
	for len(v) > 0 {
		n := min(len(v), len(buf)/elemSize)
		for i := range n {
			binary.LittleEndian.PutUint64(buf[elemSize*i:], u64(&v[i]))
		}
		m.Write(buf[:elemSize*n])
		v = v[n:]
	}
}

// jointRandPart is derive_seed(blind, dst(usage), byte(agg) || nonce ||
// encode_vec(share)).
func (p *Pine) jointRandPart(blind []byte, usage int, agg byte, nonce []byte, share []fp) ([seedSize]byte, error) {
	m := newMac(blind, p.dst(usage))
	m.Write([]byte{agg})
	m.Write(nonce)
	macVec(m, share)
	x, err := xofFromMac(m)
	var out [seedSize]byte
	if err != nil {
		return out, err
	}
	x.read(out[:])
	return out, nil
}

// jointRandSeed is derive_seed(zeros, dst(usage), part0 || part1).
func (p *Pine) jointRandSeed(usage int, part0, part1 []byte) ([seedSize]byte, error) {
	var zero [seedSize]byte
	return deriveSeed(zero[:], p.dst(usage), part0, part1)
}

func (p *Pine) vfJointRands(seed []byte) ([]fp, error) {
	out := make([]fp, 3*p.cfg.Proofs)
	err := expandVec(out, seed, p.dst(usageJointRandomnes), []byte{byte(p.cfg.Proofs)})
	return out, err
}

func (p *Pine) helperProofs(dst []fp, seed []byte) error {
	return expandVec(dst, seed, p.dst(usageProofShare),
		[]byte{byte(p.cfg.ProofsNormEquality), byte(p.cfg.Proofs), 1})
}

func (p *Pine) wrXof(seed []byte) (*xof, error) {
	return newXof(seed, p.dst(usageWrJointRand))
}

// errWrRetry: the client passed fewer than num_wr_successes wraparound
// checks and must retry with fresh randomness (draft Section 4.1.4).
var errWrRetry = errors.New("pine: too few wraparound checks passed")

// cheat lets the attack tests deviate from the honest client; nil in
// production.
type cheat struct {
	// normBits writes the 2*numBitsSqNorm norm bits instead of the honest
	// encoding (which refuses an out-of-range norm).
	normBits func(p *Pine, grad []fp, dst []fp)
	// lieWr sets the success bit of failed wraparound checks with an
	// in-range v (a lie the quadratic check must catch).
	lieWr bool
	// ignoreWrCount shards even with too few successes (honest bits).
	ignoreWrCount bool
	// editBits edits the encoded measurement after the wraparound
	// checks, before the verification joint randomness and the proofs
	// (only entries from gradNormLen on: the wraparound joint randomness
	// already covers the others).
	editBits func(p *Pine, meas []fp)
	// tamper edits the leader's measurement and proof shares last.
	tamper func(leaderMeas, leaderProofs []fp)
	// wrPassed receives the number of passed checks.
	wrPassed *int
}

// Shard encodes measurement (one float per entry, see Encode), proves it
// and splits it into the public share, the leader's input share and the
// helper's input share. The randomness (224 bytes, and again after each
// wraparound retry) is drawn from src: noise.Secure() in production.
func (p *Pine) Shard(measurement []float64, nonce [16]byte, src noise.Source) (public, leader, helper []byte, err error) {
	grad, err := p.encodeField(measurement)
	if err != nil {
		return nil, nil, nil, err
	}
	var rand [randSize]byte
	// An honest client fails a round of checks with probability at most
	// num_wr_checks * 2exp(-alpha^2) (package doc); 64 tries cannot all
	// fail in practice, and the bound keeps Shard total.
	for range 64 {
		for i := 0; i < randSize; i += 8 {
			binary.LittleEndian.PutUint64(rand[i:], src.Uint64())
		}
		public, leader, helper, err = p.shard(grad, nonce[:], rand[:], nil)
		if !errors.Is(err, errWrRetry) {
			return public, leader, helper, err
		}
	}
	return nil, nil, nil, err
}

// shard is the reference's Pine.shard for one rand string (seeds: helper
// measurement, proof, wr blind, vf blind; leader wr blind, vf blind;
// prove).
func (p *Pine) shard(grad []fp, nonce, rand []byte, ch *cheat) (public, leader, helper []byte, err error) {
	if len(rand) != randSize || len(nonce) != nonceSize || len(grad) != p.cfg.Dimension {
		return nil, nil, nil, errors.New("pine: shard: wrong input length")
	}
	seed := func(i int) []byte { return rand[i*seedSize : (i+1)*seedSize] }
	kHMeas, kHProof, kHWr, kHVf := seed(0), seed(1), seed(2), seed(3)
	kLWr, kLVf, kProve := seed(4), seed(5), seed(6)
	d, nb := p.cfg.Dimension, p.numBitsSqNorm

	meas := make([]fp, p.flpMeasLen) // encoded measurement || wr results
	copy(meas, grad)
	if ch != nil && ch.normBits != nil {
		ch.normBits(p, grad, meas[d:d+2*nb])
	} else if err := p.encodeNorm(grad, meas[d:d+2*nb]); err != nil {
		return nil, nil, nil, err
	}

	helperMeas := make([]fp, p.measLen)
	if err := expandVec(helperMeas, kHMeas, p.dst(usageMeasShare), []byte{1}); err != nil {
		return nil, nil, nil, err
	}
	leaderMeas := make([]fp, p.measLen)
	for i := range p.gradNormLen {
		leaderMeas[i].Sub(&meas[i], &helperMeas[i])
	}
	wrL, err := p.jointRandPart(kLWr, usageWrJointPart, 0, nonce, leaderMeas[:p.gradNormLen])
	if err != nil {
		return nil, nil, nil, err
	}
	wrH, err := p.jointRandPart(kHWr, usageWrJointPart, 1, nonce, helperMeas[:p.gradNormLen])
	if err != nil {
		return nil, nil, nil, err
	}
	wrSeed, err := p.jointRandSeed(usageWrJointSeed, wrL[:], wrH[:])
	if err != nil {
		return nil, nil, nil, err
	}
	wx, err := p.wrXof(wrSeed[:])
	if err != nil {
		return nil, nil, nil, err
	}
	wrResults := meas[p.measLen:]
	p.runWrChecks(wrResults, grad, wx, nil, nil)
	passed := p.encodeWrChecks(meas[d+2*nb:p.measLen], wrResults, ch != nil && ch.lieWr)
	if ch != nil && ch.wrPassed != nil {
		*ch.wrPassed = passed
	}
	if passed < p.cfg.NumWrSuccesses && (ch == nil || !(ch.lieWr || ch.ignoreWrCount)) {
		return nil, nil, nil, errWrRetry
	}
	if ch != nil && ch.editBits != nil {
		ch.editBits(p, meas[:p.measLen])
	}
	for i := p.gradNormLen; i < p.measLen; i++ {
		leaderMeas[i].Sub(&meas[i], &helperMeas[i])
	}
	vfL, err := p.jointRandPart(kLVf, usageJointRandPart, 0, nonce, leaderMeas)
	if err != nil {
		return nil, nil, nil, err
	}
	vfH, err := p.jointRandPart(kHVf, usageJointRandPart, 1, nonce, helperMeas)
	if err != nil {
		return nil, nil, nil, err
	}
	vfSeed, err := p.jointRandSeed(usageJointRandSeed, vfL[:], vfH[:])
	if err != nil {
		return nil, nil, nil, err
	}
	jr, err := p.vfJointRands(vfSeed[:])
	if err != nil {
		return nil, nil, nil, err
	}
	pne, pm := p.cfg.ProofsNormEquality, p.cfg.Proofs
	proveRands := make([]fp, p.flpNE.proveRand*pne+p.flp.proveRand*pm)
	if err := expandVec(proveRands, kProve, p.dst(usageProveRand), []byte{byte(pne), byte(pm)}); err != nil {
		return nil, nil, nil, err
	}
	proofs := make([]fp, 0, p.proofsLen())
	for range pne {
		pr, err := p.flpNE.prove(meas, proveRands[:p.flpNE.proveRand], nil)
		if err != nil {
			return nil, nil, nil, err
		}
		proveRands = proveRands[p.flpNE.proveRand:]
		proofs = append(proofs, pr...)
	}
	for k := range pm {
		pr, err := p.flp.prove(meas, proveRands[:p.flp.proveRand], jr[3*k:3*k+3])
		if err != nil {
			return nil, nil, nil, err
		}
		proveRands = proveRands[p.flp.proveRand:]
		proofs = append(proofs, pr...)
	}
	hp := make([]fp, p.proofsLen())
	if err := p.helperProofs(hp, kHProof); err != nil {
		return nil, nil, nil, err
	}
	for i := range proofs {
		proofs[i].SubAssign(&hp[i])
	}
	if ch != nil && ch.tamper != nil {
		ch.tamper(leaderMeas, proofs)
	}
	public = make([]byte, 0, publicSize)
	public = append(append(append(append(public, wrL[:]...), wrH[:]...), vfL[:]...), vfH[:]...)
	leader = make([]byte, 0, p.LeaderShareSize())
	leader = appendVec(leader, leaderMeas)
	leader = appendVec(leader, proofs)
	leader = append(append(leader, kLWr...), kLVf...)
	helper = append(append(append(append(make([]byte, 0, helperSize), kHMeas...), kHProof...), kHWr...), kHVf...)
	return public, leader, helper, nil
}

// encodeNorm writes the range-checked squared norm: v bits of ||g||^2 and
// u bits of sq_norm_bound - ||g||^2 (mod q), refusing a norm out of range.
func (p *Pine) encodeNorm(grad []fp, dst []fp) error {
	var sq, t fp
	for i := range grad {
		t.Sqr(&grad[i])
		sq.AddAssign(&t)
	}
	v := u64(&sq)
	if v > p.sqNormBound {
		return fmt.Errorf("pine: squared norm %d exceeds the bound %d", v, p.sqNormBound)
	}
	nb := p.numBitsSqNorm
	bitsOf(dst[:nb], v)
	bitsOf(dst[nb:], p.sqNormBound-v)
	return nil
}

// encodeWrChecks writes, for each check, the v bits of result + wr_bound -
// 1 and the success bit g (1 for the first num_wr_successes checks in
// [-wr_bound + 1, wr_bound]); it returns the number of successes.
func (p *Pine) encodeWrChecks(dst, results []fp, lie bool) int {
	nw := p.numBitsWr
	off := fpU(p.wrBound - 1)
	passed := 0
	for i := range results {
		var v fp
		v.Add(&results[i], &off)
		vv := u64(&v)
		in := vv <= 2*p.wrBound-1
		var g fp
		if in && passed < p.cfg.NumWrSuccesses {
			passed++
			g = fpOne()
		} else if lie && !in && passed < p.cfg.NumWrSuccesses {
			// Claim success with some in-range value.
			passed++
			g = fpOne()
			vv = p.wrBound - 1
		} else if !in {
			vv = 0 // not checked when g = 0; send no information
		}
		bitsOf(dst[i*(nw+1):i*(nw+1)+nw], vv)
		dst[i*(nw+1)+nw] = g
	}
	return passed
}

// arena hands out zeroed scratch slices for one report; after the first
// report it holds enough for the next ones (a nil arena allocates).
type arena struct {
	buf       []fp
	off, used int
}

func (a *arena) get(n int) []fp {
	if a == nil {
		return make([]fp, n)
	}
	a.used += n
	if a.off+n > len(a.buf) {
		return make([]fp, n)
	}
	s := a.buf[a.off : a.off+n : a.off+n]
	a.off += n
	clear(s)
	return s
}

func (a *arena) reset() {
	if a.used > len(a.buf) {
		a.buf = make([]fp, a.used)
	}
	a.off, a.used = 0, 0
}
