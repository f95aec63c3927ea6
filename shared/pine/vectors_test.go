package pine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The official vectors of the PINE reference (draft-chen-cfrg-vdaf-pine,
// poc/test_vec) for the parameterization Blanket ships,
// Pine64HmacSha256Aes128, are copied into testdata/vectors (with the
// reference's LICENSE.md), so that a clone anywhere runs them; the full
// set lives outside the repository in ../shared/vectors/pine, and
// PINE_VECTORS points the test at another folder (e.g. that one). A
// missing folder fails the test.
func vectorsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PINE_VECTORS")
	if dir == "" {
		dir = filepath.Join("testdata", "vectors")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("PINE vectors not found at %s: %v", dir, err)
	}
	return dir
}

type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(s)
	*h = v
	return err
}

type vectorFile struct {
	Alpha                   float64    `json:"alpha"`
	ChunkLength             int        `json:"chunk_length"`
	ChunkLengthNormEquality int        `json:"chunk_length_norm_equality"`
	Dimension               int        `json:"dimension"`
	Field                   string     `json:"field"`
	L2NormBound             uint64     `json:"l2_norm_bound"`
	NumFracBits             int        `json:"num_frac_bits"`
	NumWrChecks             int        `json:"num_wr_checks"`
	NumWrSuccesses          int        `json:"num_wr_successes"`
	Proofs                  int        `json:"proofs"`
	ProofsNormEquality      int        `json:"proofs_norm_equality"`
	Shares                  int        `json:"shares"`
	VerifyKey               hexBytes   `json:"verify_key"`
	AggShares               []hexBytes `json:"agg_shares"`
	AggResult               []float64  `json:"agg_result"`
	Prep                    []struct {
		Measurement  []float64    `json:"measurement"`
		Nonce        hexBytes     `json:"nonce"`
		Rand         hexBytes     `json:"rand"`
		PublicShare  hexBytes     `json:"public_share"`
		InputShares  []hexBytes   `json:"input_shares"`
		PrepShares   [][]hexBytes `json:"prep_shares"`
		PrepMessages []hexBytes   `json:"prep_messages"`
		OutShares    [][]hexBytes `json:"out_shares"`
	} `json:"prep"`
}

func loadVector(t *testing.T, path string) (*vectorFile, *Pine) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if v.Field != "Field64" || v.Shares != 2 {
		t.Fatalf("unsupported vector: field %s, %d shares", v.Field, v.Shares)
	}
	p, err := New(Config{
		Dimension: v.Dimension, NumFracBits: v.NumFracBits, L2NormBound: v.L2NormBound,
		ChunkLength: v.ChunkLength, ChunkLengthNormEquality: v.ChunkLengthNormEquality,
		Proofs: v.Proofs, ProofsNormEquality: v.ProofsNormEquality,
		NumWrChecks: v.NumWrChecks, NumWrSuccesses: v.NumWrSuccesses,
		Alpha: v.Alpha, ID: Pine64HmacSha256Aes128ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &v, p
}

func eq(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		n := 0
		for n < len(got) && n < len(want) && got[n] == want[n] {
			n++
		}
		t.Fatalf("%s differs (len %d vs %d, first difference at byte %d)", what, len(got), len(want), n)
	}
}

// TestVectors reproduces every Pine64HmacSha256Aes128 vector byte for
// byte: sharding (public share, leader share, helper seeds) from the
// vector's rand, both aggregators' prep shares, the prep message, the
// output shares, the aggregate shares and the decoded result.
func TestVectors(t *testing.T) {
	dir := vectorsDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "Pine64HmacSha256Aes128_*.json"))
	if len(files) != 8 {
		t.Fatalf("found %d Pine64HmacSha256Aes128 vectors, want 8", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			v, p := loadVector(t, f)
			aggs := [2]*AggShare{p.NewAggShare(), p.NewAggShare()}
			vers := [2]*Verifier{p.NewVerifier(), p.NewVerifier()} // reused across reports
			for i, pr := range v.Prep {
				// The public Shard, fed the vector's rand through its
				// Source (little-endian words), must give the same bytes.
				var nonce [16]byte
				copy(nonce[:], pr.Nonce)
				pub, lead, help, err := p.Shard(pr.Measurement, nonce, &bytesSource{b: pr.Rand})
				if err != nil {
					t.Fatalf("report %d: shard: %v", i, err)
				}
				eq(t, "public share", pub, pr.PublicShare)
				eq(t, "leader share", lead, pr.InputShares[0])
				eq(t, "helper share", help, pr.InputShares[1])
				var st [2]*PrepState
				var ps [2][]byte
				for a := range 2 {
					st[a], ps[a], err = vers[a].PrepInit(v.VerifyKey, a, pr.Nonce, pr.PublicShare, pr.InputShares[a])
					if err != nil {
						t.Fatalf("report %d agg %d: prep init: %v", i, a, err)
					}
					eq(t, fmt.Sprintf("prep share %d", a), ps[a], pr.PrepShares[0][a])
				}
				msg, err := p.PrepSharesToPrep(ps[0], ps[1])
				if err != nil {
					t.Fatalf("report %d: %v", i, err)
				}
				eq(t, "prep message", msg, pr.PrepMessages[0])
				for a := range 2 {
					out, err := p.PrepNext(st[a], msg)
					if err != nil {
						t.Fatal(err)
					}
					var want []byte
					for _, e := range pr.OutShares[a] {
						want = append(want, e...)
					}
					eq(t, fmt.Sprintf("out share %d", a), appendVec(nil, out.v), want)
					if err := aggs[a].Add(out); err != nil {
						t.Fatal(err)
					}
				}
			}
			var enc [2][]byte
			for a := range 2 {
				enc[a], _ = aggs[a].MarshalBinary()
				eq(t, fmt.Sprintf("agg share %d", a), enc[a], v.AggShares[a])
			}
			res, err := p.Unshard(enc[0], enc[1])
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(v.AggResult) {
				t.Fatalf("result length %d, want %d", len(res), len(v.AggResult))
			}
			for i := range res {
				if res[i] != v.AggResult[i] {
					t.Fatalf("result[%d] = %v, want %v", i, res[i], v.AggResult[i])
				}
			}
		})
	}
}

// bytesSource replays b as little-endian 64-bit words.
type bytesSource struct{ b []byte }

func (s *bytesSource) Uint64() uint64 {
	if len(s.b) < 8 {
		return 0
	}
	v := binary.LittleEndian.Uint64(s.b)
	s.b = s.b[8:]
	return v
}
