package task

import (
	"errors"
	"testing"
)

// FuzzParse: the decoder never panics; it either returns a valid task
// whose layout is consistent (d = (Inputs+1)·Classes, every column named
// once) or an error wrapping ErrInvalid.
func FuzzParse(f *testing.F) {
	f.Add([]byte(survey))
	f.Add(digitsJSON)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"features":[{"name":"a","type":"numeric","min":0,"max":1,"count":3}]}`))
	f.Add(digitsJSON)
	f.Add([]byte(`{"version":1,"training":{"clip":0.5,"server_optimizer":"sgd","local_epochs":2,"feature_map":"pool4"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := tk.Shape().Validate(); err != nil {
			t.Fatal(err)
		}
		if tk.D() != (tk.ModelFeatures()+1)*len(tk.Label.Classes) {
			t.Fatalf("d %d for %d model features and %d classes", tk.D(), tk.ModelFeatures(), len(tk.Label.Classes))
		}
		// Without a feature map the model trains on the encoded columns;
		// with one, only a 28 x 28 image is accepted.
		if name := tk.Training.FeatureMap; name == "" || name == "identity" {
			if tk.ModelFeatures() != tk.Inputs() {
				t.Fatalf("no map: %d model features for %d inputs", tk.ModelFeatures(), tk.Inputs())
			}
		} else if tk.Inputs() != ImagePixels {
			t.Fatalf("map %q accepted for %d inputs", name, tk.Inputs())
		}
		if r := tk.Recipe(); !(r.Clip > 0 && r.ServerLR > 0 && r.LocalEpochs > 0 && r.LocalLR > 0) || (r.ServerOptimizer == OptimizerMomentum) != (r.ServerMomentum > 0 && r.ServerMomentum < 1) {
			t.Fatalf("recipe %+v", r)
		}
		seen := map[string]bool{}
		for _, c := range tk.Columns() {
			if seen[c] {
				t.Fatalf("column %q twice", c)
			}
			seen[c] = true
		}
	})
}

// FuzzParseCSV: any bytes give a Parsed whose set is valid for the task's
// shape, with every encoded value in the declared scale's range, or an
// error wrapping ErrData.
func FuzzParseCSV(f *testing.F) {
	tk, err := Parse([]byte(survey))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("age,distance,weather,transport\n30,25,rain,bus\n"))
	f.Add([]byte("transport,weather,distance,age\ncar,sun,0,120\n\"x\ny\",1,2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := tk.ParseCSV(b)
		if err != nil {
			if !errors.Is(err, ErrData) {
				t.Fatalf("error %v does not wrap ErrData", err)
			}
			return
		}
		if p.Set == nil {
			return
		}
		if err := p.Set.Validate(); err != nil {
			t.Fatal(err)
		}
		for i := range p.Set.Len() {
			r := p.Set.Row(i)
			if r[0] < 0 || r[0] > 1 || r[1] < -1 || r[1] > 1 || r[2]+r[3]+r[4] != 1 {
				t.Fatalf("row %d encodes to %v", i, r)
			}
		}
	})
}
