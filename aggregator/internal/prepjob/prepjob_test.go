package prepjob

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestExecute: a job encoded by the owner executes, in a replica holding
// the same key, to the result a leader folds to the same 'M' message as
// PrepareChunk; a job for another key, of another format version, or
// truncated fails instead of preparing anything.
func TestExecute(t *testing.T) {
	key, _ := sealkey.DeriveKey([32]byte{1})
	other, _ := sealkey.DeriveKey([32]byte{2})
	p := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian, D: 8, K: 1, L: 1, Width: 1,
		MinBatch: 3, Quota: 8, Clip: 1, CheckInP: 0.5, Sigma: 2}
	const round = 3
	spec, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := spec.SecAggRound(round)
	if err != nil {
		t.Fatal(err)
	}
	vk := bytes.Repeat([]byte{7}, secagg.VerifyKeySize)
	he, _ := secagg.NewEngine(sr, false, vk)
	var sealed [][]byte
	var es []secagg.Entry
	for i := range 4 {
		x := make([]float64, p.D)
		x[i] = 0.2
		l, h, err := sr.Shard(x, noise.NewSeeded(uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := envelope.SealShare(key.Public().HPKE, round, envelope.ShareLeader, [32]byte{}, l)
		if err != nil {
			t.Fatal(err)
		}
		sealed, es = append(sealed, s), append(es, he.PrepInit(h).Entry)
	}
	prep, err := sr.MarshalPrep(es)
	if err != nil {
		t.Fatal(err)
	}
	r := Round{Round: round, Params: p, VerifyKey: vk}
	fp := key.Public().Fingerprint()
	job, err := Encode(fp, r, sealed, prep)
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewPreparer(key).Execute(job, 2)
	if err != nil {
		t.Fatal(err)
	}
	newLeader := func() *analysis.SecAggLeader {
		le, _ := secagg.NewEngine(sr, true, vk)
		l, err := analysis.NewSecAggLeader(key, [32]byte{}, sr, le)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	want, err := newLeader().PrepareChunk(sealed, prep, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := newLeader()
	cp, err := l.ParseChunkPrep(res)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.FoldPrepared(cp, prep)
	if err != nil || !bytes.Equal(got, want) || l.Accepted() != 4 {
		t.Fatalf("the job's result folds to another 'M' message (%v, %d accepted)", err, l.Accepted())
	}
	if _, err := NewPreparer(other).Execute(job, 1); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("a job for another key: %v", err)
	}
	hl := binary.BigEndian.Uint32(job)
	bumped := bytes.Replace(job[:4+hl], []byte(`"v":1`), []byte(`"v":2`), 1)
	if bytes.Equal(bumped, job[:4+hl]) {
		t.Fatal("no version in the header")
	}
	if _, err := NewPreparer(key).Execute(append(bumped, job[4+hl:]...), 1); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("a job of another format: %v", err)
	}
	if _, err := NewPreparer(key).Execute(job[:len(job)/2], 1); err == nil {
		t.Error("a truncated job executed")
	}
}
