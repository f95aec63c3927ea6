package volunteer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// digitsIDX writes the embedded digits as the relay serves them
// (/digits.idx.gz and /labels.idx.gz: gzipped IDX).
func digitsIDX(t testing.TB) (images, labels []byte) {
	t.Helper()
	s, err := sample.Digits()
	if err != nil {
		t.Fatal(err)
	}
	var im, lb bytes.Buffer
	gi, gl := gzip.NewWriter(&im), gzip.NewWriter(&lb)
	if err := dataset.WriteIDX(gi, gl, s, 28, 28); err != nil {
		t.Fatal(err)
	}
	if err := gi.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gl.Close(); err != nil {
		t.Fatal(err)
	}
	return im.Bytes(), lb.Bytes()
}

var (
	digitsOnce sync.Once
	digitsVal  *Digits
	digitsErr  error
)

func testDigits(t testing.TB) *Digits {
	t.Helper()
	digitsOnce.Do(func() {
		im, lb := digitsIDX(t)
		digitsVal, digitsErr = PrepareDigits(bytes.NewReader(im), bytes.NewReader(lb), task.DigitsRecipe())
	})
	if digitsErr != nil {
		t.Fatal(digitsErr)
	}
	return digitsVal
}

// TestShardMatchesAggregator: the browser's shard rows are bit-identical
// to the rows the aggregator and the native volunteers derive (the
// built-in digits task's preprocessing, task.Digits().FitPrep on
// sample.TrainTest's training part: scatter1 then the public
// standardization of the mapped training part) at the chosen indices, and
// the browser read the standardization from the embedded statistics
// instead of mapping 8,000 digits.
func TestShardMatchesAggregator(t *testing.T) {
	d := testDigits(t)
	train, _, err := sample.TrainTest()
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	agg, err := tk.FitPrep(train)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Prep.Z.Mean, agg.Z.Mean) || !slices.Equal(d.Prep.Z.Std, agg.Z.Std) || !d.Prep.FromEmbedded() {
		t.Fatal("the browser's standardization differs from the aggregator's, or was refitted")
	}
	if d.Prep.Features() != 833 || !slices.Equal(d.Train.X, train.X) {
		t.Fatalf("browser: %d model features (want 833), or a different training part", d.Prep.Features())
	}
	for _, seed := range []uint64{1, 2, 12345, MaxSeed} {
		s, idx, err := d.Shard(seed)
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != ShardSize || len(idx) != ShardSize || s.Features != 833 {
			t.Fatalf("seed %d: shard of %d examples of %d features, want %d of 833", seed, s.Len(), s.Features, ShardSize)
		}
		raw, err := train.Subset(idx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := agg.Apply(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.X, want.X) || !slices.Equal(s.Y, want.Y) {
			t.Fatalf("seed %d: shard differs from the aggregator's preprocessing of the same digits", seed)
		}
	}
}

func TestShardReproducibleAndDistinct(t *testing.T) {
	d := testDigits(t)
	_, a, err := d.Shard(7)
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := d.Shard(7)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Fatal("the same seed chose different shards")
	}
	_, c, err := d.Shard(8)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 chose the same shard")
	}
	if _, _, err := d.Shard(0); !errors.Is(err, ErrOption) {
		t.Fatalf("seed 0: err %v, want ErrOption", err)
	}
}

// TestShardIndicesUniform: every index of [0, 10) is chosen with
// probability 3/10 by ShardIndices(10, 3). With 30,000 draws each count is
// Binomial(30000, 0.3), sd 79.4; the bound 500 is 6.3 sd, so a correct
// sampler fails with probability < 1e-8 (fixed seed: the test is
// deterministic anyway). Each result must also hold distinct indices.
func TestShardIndicesUniform(t *testing.T) {
	const n, size, draws = 10, 3, 30000
	src := noise.NewSeeded(42)
	var counts [n]int
	for range draws {
		idx, err := ShardIndices(n, size, src)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, i := range idx {
			if i < 0 || i >= n || seen[i] {
				t.Fatalf("bad shard %v", idx)
			}
			seen[i] = true
			counts[i]++
		}
	}
	for i, c := range counts {
		if math.Abs(float64(c)-draws*size/n) > 500 {
			t.Errorf("index %d chosen %d times, want about %d", i, c, draws*size/n)
		}
	}
	for _, bad := range [][2]int{{10, 0}, {10, 11}, {0, 1}, {5, -1}} {
		if _, err := ShardIndices(bad[0], bad[1], src); err == nil {
			t.Errorf("ShardIndices(%d, %d) accepted", bad[0], bad[1])
		}
	}
	if _, err := ShardIndices(10, 3, nil); err == nil {
		t.Error("nil source accepted")
	}
}

func TestResolveSeed(t *testing.T) {
	if got := ResolveSeed(99, noise.NewSeeded(1)); got != 99 {
		t.Fatalf("ResolveSeed(99) = %d", got)
	}
	src := noise.NewSeeded(3)
	a, b := ResolveSeed(0, src), ResolveSeed(0, src)
	if a == 0 || b == 0 || a > MaxSeed || b > MaxSeed || a == b {
		t.Fatalf("random seeds %d, %d: want distinct values in [1, 2^53]", a, b)
	}
	for _, ok := range []float64{0, 1, 12345, MaxSeed} {
		if _, err := SeedFromNumber(ok); err != nil {
			t.Errorf("SeedFromNumber(%v): %v", ok, err)
		}
	}
	for _, bad := range []float64{-1, 1.5, math.NaN(), math.Inf(1), MaxSeed * 2} {
		if _, err := SeedFromNumber(bad); !errors.Is(err, ErrOption) {
			t.Errorf("SeedFromNumber(%v) accepted", bad)
		}
	}
}

func drawing(v float32) []float32 {
	p := make([]float32, Pixels)
	for i := range p {
		p[i] = v * float32(i%29) / 28
	}
	return p
}

func TestDrawingsValidation(t *testing.T) {
	var d Drawings
	if n, err := d.Add(drawing(1), 3); err != nil || n != 1 {
		t.Fatalf("Add = %d, %v; want 1, nil", n, err)
	}
	nan := drawing(1)
	nan[5] = float32(math.NaN())
	big := drawing(1)
	big[700] = 1.01
	neg := drawing(1)
	neg[0] = -0.001
	for name, c := range map[string]struct {
		px    []float32
		label int
	}{
		"short": {make([]float32, Pixels-1), 1}, "long": {make([]float32, Pixels+1), 1},
		"nan": {nan, 1}, "above 1": {big, 1}, "negative": {neg, 1},
		"label 10": {drawing(1), 10}, "label -1": {drawing(1), -1},
	} {
		if n, err := d.Add(c.px, c.label); !errors.Is(err, ErrOption) || n != 1 {
			t.Errorf("%s: Add = %d, %v; want 1, ErrOption", name, n, err)
		}
	}
	if d.Len() != 1 {
		t.Fatalf("%d drawings after rejected ones, want 1", d.Len())
	}
	var full Drawings
	for i := range MaxDrawings {
		if _, err := full.Add(drawing(0.5), i%Classes); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := full.Add(drawing(0.5), 0); !errors.Is(err, ErrOption) {
		t.Fatalf("drawing %d accepted", MaxDrawings+1)
	}
}

// TestDrawingsStandardized: drawings go through the same standardizer as
// the digits: a drawing equal to a training digit gives that digit's
// standardized row, bit for bit, and the stored drawing is not modified.
func TestDrawingsStandardized(t *testing.T) {
	d := testDigits(t)
	shard, idx, err := d.Shard(5)
	if err != nil {
		t.Fatal(err)
	}
	var draw Drawings
	if _, err := draw.Set(d.Prep); !errors.Is(err, ErrOption) {
		t.Fatalf("empty drawings: err %v, want ErrOption", err)
	}
	raw := slices.Clone(d.Train.Row(idx[0]))
	if _, err := draw.Add(raw, int(d.Train.Y[idx[0]])); err != nil {
		t.Fatal(err)
	}
	s, err := draw.Set(d.Prep)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Row(0), shard.Row(0)) || s.Y[0] != shard.Y[0] {
		t.Fatal("a drawing is not standardized like the digits")
	}
	if !slices.Equal(draw.x, raw) {
		t.Fatal("Set modified the stored drawing")
	}
	ds, err := LocalData(d, &draw, SourceDrawings, 0)
	if err != nil || ds.Len() != 1 {
		t.Fatalf("LocalData(drawings) = %d examples, %v", ds.Len(), err)
	}
	ds, err = LocalData(d, &draw, SourceShard, 5)
	if err != nil || ds.Len() != ShardSize {
		t.Fatalf("LocalData(shard) = %d examples, %v", ds.Len(), err)
	}
}

func TestPrepareDigitsRejectsBadInput(t *testing.T) {
	im, lb := digitsIDX(t)
	if _, err := PrepareDigits(bytes.NewReader(im[:len(im)/2]), bytes.NewReader(lb), task.DigitsRecipe()); err == nil {
		t.Error("truncated images accepted")
	}
	if _, err := PrepareDigits(bytes.NewReader(lb), bytes.NewReader(im), task.DigitsRecipe()); err == nil {
		t.Error("swapped files accepted")
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Relay: "ws://localhost:8081/ws", Source: SourceShard, Fingerprint: "ABCD-0123-4567-89ab-cdef-0123-4567-89ab"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if good.Fingerprint != "abcd-0123-4567-89ab-cdef-0123-4567-89ab" {
		t.Fatalf("fingerprint not normalized: %q", good.Fingerprint)
	}
	for name, mod := range map[string]func(*Options){
		"http relay":  func(o *Options) { o.Relay = "http://x/ws" },
		"empty relay": func(o *Options) { o.Relay = "" },
		"bare scheme": func(o *Options) { o.Relay = "wss://" },
		"source":      func(o *Options) { o.Source = "mine" },
		"fingerprint": func(o *Options) { o.Fingerprint = "abcd" },
		"fp chars":    func(o *Options) { o.Fingerprint = "zzzz-0123-4567-89ab-cdef-0123-4567-89ab" },
		"seed":        func(o *Options) { o.ShardSeed = MaxSeed + 1 },
		"eps nan":     func(o *Options) { o.EpsLevel = math.NaN() },
		"eps inf":     func(o *Options) { o.EpsLevel = math.Inf(1) },
		"eps neg":     func(o *Options) { o.EpsLevel = -1 },
		"eps above 1": func(o *Options) { o.EpsLevel = 1.5 },
	} {
		o := good
		mod(&o)
		if err := o.Validate(); !errors.Is(err, ErrOption) {
			t.Errorf("%s: err %v, want ErrOption", name, err)
		}
	}
	o := good
	o.EpsLevel = 0.5
	if err := o.Validate(); err != nil {
		t.Fatalf("privacy level 0.5: %v", err)
	}
}

// keyFields parses /api/key's JSON as the page does (JSON.parse).
func keyFields(t *testing.T, body []byte) KeyFields {
	t.Helper()
	var j struct{ Sign, HPKE, Fingerprint string }
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatal(err)
	}
	return KeyFields{Sign: j.Sign, HPKE: j.HPKE, Fingerprint: j.Fingerprint}
}

func TestCheckKey(t *testing.T) {
	k1, _ := envelopetest.DeriveKey([32]byte{1})
	k2, _ := envelopetest.DeriveKey([32]byte{2})
	body, err := k1.Public().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	f := keyFields(t, body)
	fp := k1.Public().Fingerprint()
	for _, pin := range []string{"", fp, strings.ToUpper(fp), strings.ReplaceAll(fp, "-", "")} {
		k, err := CheckKey(f, pin)
		if err != nil || !k.Equal(k1.Public()) {
			t.Fatalf("pin %q: %v", pin, err)
		}
	}
	if _, err := CheckKey(f, k2.Public().Fingerprint()); !errors.Is(err, ErrFingerprint) {
		t.Fatalf("other key's fingerprint: err %v, want ErrFingerprint", err)
	}
	noFP := f
	noFP.Fingerprint = ""
	if _, err := CheckKey(noFP, fp); err != nil {
		t.Fatalf("key without an embedded fingerprint: %v", err)
	}
	// Every malformed key that envelope.PublicKey.UnmarshalJSON rejects
	// is rejected here too, pinned or not.
	other := keyFields(t, must(k2.Public().MarshalJSON()))
	for name, bad := range map[string]KeyFields{
		"embedded fingerprint of another key": {f.Sign, f.HPKE, other.Fingerprint},
		"mixed keys":                          {f.Sign, other.HPKE, f.Fingerprint},
		"short sign":                          {f.Sign[:20], f.HPKE, ""},
		"not base64":                          {"!!!!", f.HPKE, ""},
		"empty":                               {},
	} {
		if _, err := CheckKey(bad, ""); err == nil {
			t.Errorf("%s: accepted", name)
		}
		b, _ := json.Marshal(map[string]string{"sign": bad.Sign, "hpke": bad.HPKE, "fingerprint": bad.Fingerprint})
		var k envelope.PublicKey
		if err := k.UnmarshalJSON(b); err == nil {
			t.Errorf("%s: envelope accepts what CheckKey rejects", name)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// fakeTransport replays frames to Recv.
type fakeTransport struct{ frames [][]byte }

func (f *fakeTransport) Send(context.Context, []byte) error { return nil }
func (f *fakeTransport) Close() error                       { return nil }
func (f *fakeTransport) Recv(context.Context) ([]byte, error) {
	if len(f.frames) == 0 {
		return nil, errors.New("eof")
	}
	b := f.frames[0]
	f.frames = f.frames[1:]
	return b, nil
}

func announcementHeader(round uint64) []byte {
	b := []byte{wire.Version, byte(wire.TypeAnnouncement), 0, 0, 0, 0, 0, 0, 0, 0, 0xff}
	for i := range 8 {
		b[2+i] = byte(round >> (56 - 8*i))
	}
	return b
}

func TestSkipDecided(t *testing.T) {
	ack := []byte{wire.Version, byte(wire.TypeAck), 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 1}
	ft := &fakeTransport{frames: [][]byte{announcementHeader(2), announcementHeader(3), ack, announcementHeader(4), {1}}}
	tr := SkipDecided(ft, 3)
	var got [][]byte
	for {
		f, err := tr.Recv(context.Background())
		if err != nil {
			break
		}
		got = append(got, f)
	}
	want := [][]byte{ack, announcementHeader(4), {1}}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d = %x, want %x", i, got[i], want[i])
		}
	}
	if SkipDecided(ft, 0) != client.Transport(ft) {
		t.Fatal("floor 0 should not wrap")
	}
}

func TestSessionRecords(t *testing.T) {
	var s Session
	r := s.Record(client.Event{Kind: client.EventSent, Round: 4, Messages: 5, FrameBytes: 100, NoiseStd: 0.25,
		Work: client.Work{Train: 1500 * time.Microsecond, Encode: 2 * time.Millisecond, Seal: 3 * time.Millisecond, Account: 4 * time.Microsecond}})
	if r.Kind != "sent" || r.Round != 4 || r.Messages != 5 || r.Bytes != wire.CheckInSize+500 || r.NoiseStd != 0.25 ||
		r.TrainMs != 1.5 || r.EncodeMs != 2 || r.SealMs != 3 || r.AccountMs != 0.004 {
		t.Fatalf("sent record %+v", r)
	}
	r = s.Record(client.Event{Kind: client.EventPrivacy, Round: 4, Epsilon: 2, Delta: 1e-9, Rounds: 1})
	if r.Epsilon != 2 || r.Rounds != 1 {
		t.Fatalf("privacy record %+v", r)
	}
	r = s.Record(client.Event{Kind: client.EventDisconnected, Err: errors.New("gone")})
	if r.Error != "gone" || r.Epsilon != 2 || r.Rounds != 1 {
		t.Fatalf("disconnected record %+v", r)
	}
	m := r.Map()
	for _, k := range []string{"kind", "round", "progress", "messages", "bytes", "noiseStd", "trainMs", "encodeMs", "sealMs", "accountMs", "epsilon", "rounds", "fingerprint", "error"} {
		if _, ok := m[k]; !ok {
			t.Errorf("record map lacks %q", k)
		}
	}
	if st := s.Stopped(context.Canceled); st.Kind != KindStopped || st.Error != "" {
		t.Fatalf("stop by cancel: %+v", st)
	}
	if st := s.Stopped(errors.New("boom")); st.Error != "boom" {
		t.Fatalf("stop by error: %+v", st)
	}
}
