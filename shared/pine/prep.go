package pine

import (
	"crypto/subtle"
	"errors"
	"fmt"
)

// PrepState is one aggregator's state for one report between PrepInit and
// PrepNext.
type PrepState struct {
	out    []fp
	wrSeed [seedSize]byte
	vfSeed [seedSize]byte
}

// Verifier runs PrepInit for one aggregator, one report at a time, reusing
// its scratch memory between reports (about 600 KB at d = 7850). It is not
// safe for concurrent use: create one per goroutine.
type Verifier struct {
	p  *Pine
	ar arena
	wb []byte
}

// NewVerifier returns a Verifier for p.
func (p *Pine) NewVerifier() *Verifier { return &Verifier{p: p} }

// PrepInit is the reference's prep_init for aggregator aggID (0 leader,
// 1 helper): it expands the helper's seeds, recomputes its joint
// randomness part and the corrected joint randomness seeds, runs the
// wraparound checks on its share of the gradient and queries every proof.
// It returns the state for PrepNext and the prep share to send to the
// other aggregator (the leader combines both with PrepSharesToPrep).
func (vf *Verifier) PrepInit(verifyKey []byte, aggID int, nonce, publicShare, inputShare []byte) (*PrepState, []byte, error) {
	p := vf.p
	ar := &vf.ar
	ar.reset()
	if len(verifyKey) != verifyKeySize {
		return nil, nil, fmt.Errorf("pine: verify key must be %d bytes", verifyKeySize)
	}
	if aggID != 0 && aggID != 1 {
		return nil, nil, errors.New("pine: aggregator id must be 0 or 1")
	}
	if len(nonce) != nonceSize {
		return nil, nil, reject(RejectMalformed, fmt.Errorf("pine: nonce must be %d bytes", nonceSize))
	}
	if len(publicShare) != publicSize {
		return nil, nil, reject(RejectMalformed, fmt.Errorf("pine: public share of %d bytes, want %d", len(publicShare), publicSize))
	}
	meas := ar.get(p.flpMeasLen)
	var proofs []fp
	var wrBlind, vfBlind []byte
	if aggID == 0 {
		if len(inputShare) != p.LeaderShareSize() {
			return nil, nil, reject(RejectMalformed, fmt.Errorf("pine: leader share of %d bytes, want %d", len(inputShare), p.LeaderShareSize()))
		}
		nm := elemSize * p.measLen
		np := elemSize * p.proofsLen()
		if err := decodeVec(meas[:p.measLen], inputShare[:nm]); err != nil {
			return nil, nil, reject(RejectMalformed, err)
		}
		proofs = ar.get(p.proofsLen())
		if err := decodeVec(proofs, inputShare[nm:nm+np]); err != nil {
			return nil, nil, reject(RejectMalformed, err)
		}
		wrBlind = inputShare[nm+np : nm+np+seedSize]
		vfBlind = inputShare[nm+np+seedSize:]
	} else {
		if len(inputShare) != helperSize {
			return nil, nil, reject(RejectMalformed, fmt.Errorf("pine: helper share of %d bytes, want %d", len(inputShare), helperSize))
		}
		if err := expandVec(meas[:p.measLen], inputShare[:seedSize], p.dst(usageMeasShare), []byte{1}); err != nil {
			return nil, nil, err
		}
		proofs = ar.get(p.proofsLen())
		if err := p.helperProofs(proofs, inputShare[seedSize:2*seedSize]); err != nil {
			return nil, nil, err
		}
		wrBlind = inputShare[2*seedSize : 3*seedSize]
		vfBlind = inputShare[3*seedSize:]
	}
	agg := byte(aggID)
	st := &PrepState{}

	// Wraparound joint randomness: own part replaces the public one.
	wrOwn, err := p.jointRandPart(wrBlind, usageWrJointPart, agg, nonce, meas[:p.gradNormLen])
	if err != nil {
		return nil, nil, err
	}
	wrParts := [2][]byte{publicShare[:seedSize], publicShare[seedSize : 2*seedSize]}
	wrParts[aggID] = wrOwn[:]
	if st.wrSeed, err = p.jointRandSeed(usageWrJointSeed, wrParts[0], wrParts[1]); err != nil {
		return nil, nil, err
	}
	wx, err := p.wrXof(st.wrSeed[:])
	if err != nil {
		return nil, nil, err
	}
	vf.wb = p.runWrChecks(meas[p.measLen:], meas[:p.cfg.Dimension], wx, ar, vf.wb)

	vfOwn, err := p.jointRandPart(vfBlind, usageJointRandPart, agg, nonce, meas[:p.measLen])
	if err != nil {
		return nil, nil, err
	}
	vfParts := [2][]byte{publicShare[2*seedSize : 3*seedSize], publicShare[3*seedSize:]}
	vfParts[aggID] = vfOwn[:]
	if st.vfSeed, err = p.jointRandSeed(usageJointRandSeed, vfParts[0], vfParts[1]); err != nil {
		return nil, nil, err
	}
	jr, err := p.vfJointRands(st.vfSeed[:])
	if err != nil {
		return nil, nil, err
	}
	pne, pm := p.cfg.ProofsNormEquality, p.cfg.Proofs
	qr := ar.get(p.flpNE.queryRand*pne + p.flp.queryRand*pm)
	if err := expandVec(qr, verifyKey, p.dst(usageQueryRand), []byte{byte(pne), byte(pm)}, nonce); err != nil {
		return nil, nil, err
	}
	prep := make([]byte, 0, p.PrepShareSize())
	for range pne {
		v, err := p.flpNE.query(meas, proofs[:p.flpNE.proofLen], qr[:p.flpNE.queryRand], nil, 2, ar)
		if err != nil {
			return nil, nil, queryErr(err)
		}
		proofs, qr = proofs[p.flpNE.proofLen:], qr[p.flpNE.queryRand:]
		prep = appendVec(prep, v)
	}
	for k := range pm {
		v, err := p.flp.query(meas, proofs[:p.flp.proofLen], qr[:p.flp.queryRand], jr[3*k:3*k+3], 2, ar)
		if err != nil {
			return nil, nil, queryErr(err)
		}
		proofs, qr = proofs[p.flp.proofLen:], qr[p.flp.queryRand:]
		prep = appendVec(prep, v)
	}
	prep = append(append(prep, wrOwn[:]...), vfOwn[:]...)
	st.out = append([]fp(nil), meas[:p.cfg.Dimension]...)
	return st, prep, nil
}

func queryErr(err error) error {
	if errors.Is(err, errEvalPoint) {
		return reject(RejectEvalPoint, err)
	}
	return err
}

// PrepSharesToPrep combines the leader's and the helper's prep shares:
// it adds the verifier shares, runs the decision of every proof (the
// norm-equality proofs first) and derives the two joint randomness seeds,
// which form the prep message for PrepNext of both aggregators.
func (p *Pine) PrepSharesToPrep(leaderPrep, helperPrep []byte) ([]byte, error) {
	n := p.PrepShareSize()
	if len(leaderPrep) != n || len(helperPrep) != n {
		return nil, reject(RejectMalformed, fmt.Errorf("pine: prep shares of %d and %d bytes, want %d", len(leaderPrep), len(helperPrep), n))
	}
	nv := p.verifiersLen()
	v0, v1 := make([]fp, nv), make([]fp, nv)
	if err := decodeVec(v0, leaderPrep[:elemSize*nv]); err != nil {
		return nil, reject(RejectMalformed, err)
	}
	if err := decodeVec(v1, helperPrep[:elemSize*nv]); err != nil {
		return nil, reject(RejectMalformed, err)
	}
	for i := range v0 {
		v0[i].AddAssign(&v1[i])
	}
	for k := range p.cfg.ProofsNormEquality {
		if !p.flpNE.decide(v0[:p.flpNE.verifierLen]) {
			return nil, reject(RejectNormEquality, fmt.Errorf("pine: norm-equality proof %d rejected", k))
		}
		v0 = v0[p.flpNE.verifierLen:]
	}
	for k := range p.cfg.Proofs {
		if !p.flp.decide(v0[:p.flp.verifierLen]) {
			return nil, reject(RejectInvalidProof, fmt.Errorf("pine: proof %d rejected", k))
		}
		v0 = v0[p.flp.verifierLen:]
	}
	o := elemSize * nv
	wr, err := p.jointRandSeed(usageWrJointSeed, leaderPrep[o:o+seedSize], helperPrep[o:o+seedSize])
	if err != nil {
		return nil, err
	}
	vf, err := p.jointRandSeed(usageJointRandSeed, leaderPrep[o+seedSize:], helperPrep[o+seedSize:])
	if err != nil {
		return nil, err
	}
	return append(wr[:], vf[:]...), nil
}

// PrepNext checks the prep message against the seeds this aggregator
// derived and returns its output share (its share of the gradient).
func (p *Pine) PrepNext(st *PrepState, prepMsg []byte) (OutShare, error) {
	if st == nil || st.out == nil {
		return OutShare{}, errors.New("pine: prep state already used or empty")
	}
	if len(prepMsg) != prepMsgSize {
		return OutShare{}, reject(RejectMalformed, fmt.Errorf("pine: prep message of %d bytes, want %d", len(prepMsg), prepMsgSize))
	}
	if subtle.ConstantTimeCompare(prepMsg[:seedSize], st.wrSeed[:]) != 1 ||
		subtle.ConstantTimeCompare(prepMsg[seedSize:], st.vfSeed[:]) != 1 {
		return OutShare{}, reject(RejectJointRand, errors.New("pine: joint randomness seeds differ from the prep message"))
	}
	out := OutShare{v: st.out}
	st.out = nil
	return out, nil
}

// OutShare is one aggregator's share of one accepted gradient.
type OutShare struct{ v []fp }

// AggShare accumulates output shares in place.
type AggShare struct {
	sum []fp
	n   int
}

// NewAggShare returns an empty aggregate share.
func (p *Pine) NewAggShare() *AggShare { return &AggShare{sum: make([]fp, p.cfg.Dimension)} }

// Add folds one output share into the aggregate share.
func (a *AggShare) Add(o OutShare) error {
	if len(o.v) != len(a.sum) {
		return fmt.Errorf("pine: output share of length %d, want %d", len(o.v), len(a.sum))
	}
	for i := range a.sum {
		a.sum[i].AddAssign(&o.v[i])
	}
	a.n++
	return nil
}

// Count is the number of output shares added.
func (a *AggShare) Count() int { return a.n }

// Len is the aggregate share's length (the dimension).
func (a *AggShare) Len() int { return len(a.sum) }

// Merge adds another aggregate share of the same length into a (the sum
// of two disjoint sets of output shares: a partial aggregate prepared
// elsewhere); b is unchanged. On error a is unchanged.
func (a *AggShare) Merge(b *AggShare) error {
	if b == nil || len(b.sum) != len(a.sum) {
		return errors.New("pine: merging an aggregate share of another length")
	}
	for i := range a.sum {
		a.sum[i].AddAssign(&b.sum[i])
	}
	a.n += b.n
	return nil
}

// MarshalBinary encodes the aggregate share (encode_vec).
func (a *AggShare) MarshalBinary() ([]byte, error) { return appendVec(nil, a.sum), nil }

// Unshard adds the two encoded aggregate shares and decodes the sum: each
// entry is the signed representative in (-q/2, q/2] divided by
// 2^NumFracBits (the reference's decode_float_from_field).
func (p *Pine) Unshard(leaderAgg, helperAgg []byte) ([]float64, error) {
	d := p.cfg.Dimension
	a, b := make([]fp, d), make([]fp, d)
	if err := decodeVec(a, leaderAgg); err != nil {
		return nil, fmt.Errorf("pine: leader aggregate share: %w", err)
	}
	if err := decodeVec(b, helperAgg); err != nil {
		return nil, fmt.Errorf("pine: helper aggregate share: %w", err)
	}
	out := make([]float64, d)
	scale := 1 / float64(uint64(1)<<p.cfg.NumFracBits)
	for i := range a {
		a[i].AddAssign(&b[i])
		out[i] = float64(signed(&a[i])) * scale
	}
	return out, nil
}

// ParseAggShare strictly decodes an aggregate share (AggShare.MarshalBinary)
// of count reports: Dimension canonical Field64 elements.
func (p *Pine) ParseAggShare(b []byte, count int) (*AggShare, error) {
	if count < 0 {
		return nil, errors.New("pine: negative report count")
	}
	a := p.NewAggShare()
	if len(b) != elemSize*len(a.sum) {
		return nil, fmt.Errorf("pine: aggregate share of %d bytes, want %d", len(b), elemSize*len(a.sum))
	}
	if err := decodeVec(a.sum, b); err != nil {
		return nil, fmt.Errorf("pine: aggregate share: %w", err)
	}
	a.n = count
	return a, nil
}

// AddSigned adds the integer k[i] (as the field element k[i] mod q) to
// entry i of the aggregate share: a server's noise in fixed-point units.
// It does not change Count.
func (a *AggShare) AddSigned(k []int64) error {
	if len(k) != len(a.sum) {
		return fmt.Errorf("pine: %d values for an aggregate share of length %d", len(k), len(a.sum))
	}
	for i := range a.sum {
		v := fpI(k[i])
		a.sum[i].AddAssign(&v)
	}
	return nil
}

// UnshardInts adds the two encoded aggregate shares and returns each
// entry's signed representative in (-q/2, q/2]: the sum in fixed-point
// units (Unshard divides it by 2^NumFracBits).
func (p *Pine) UnshardInts(leaderAgg, helperAgg []byte) ([]int64, error) {
	d := p.cfg.Dimension
	a, b := make([]fp, d), make([]fp, d)
	if err := decodeVec(a, leaderAgg); err != nil {
		return nil, fmt.Errorf("pine: leader aggregate share: %w", err)
	}
	if err := decodeVec(b, helperAgg); err != nil {
		return nil, fmt.Errorf("pine: helper aggregate share: %w", err)
	}
	out := make([]int64, d)
	for i := range a {
		a[i].AddAssign(&b[i])
		out[i] = signed(&a[i])
	}
	return out, nil
}
