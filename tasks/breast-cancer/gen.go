//go:build ignore

// gen writes this directory's train.csv, holdout.csv and task.json from
// scikit-learn's copy of the UCI Breast Cancer Wisconsin (Diagnostic) data
// (Debian's python3-sklearn):
//
//	go run gen.go -src /usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv
//
// The values are copied unchanged (as text); the header names the columns;
// a fixed stratified split (dataset.StratifiedSplit, seed
// dataset.DefaultSplitSeed) puts 20% of the rows in holdout.csv. The
// declared range of every feature is [0, M] with M the data set's maximum
// rounded up to two significant digits, scaled to [-1, 1] ("symmetric"):
// every feature is a non-negative measurement, and the data set is public.
// (A real study declares its ranges from domain knowledge before any data
// is seen.)
package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/noise"
)

var names = []string{"radius", "texture", "perimeter", "area", "smoothness", "compactness",
	"concavity", "concave_points", "symmetry", "fractal_dimension"}

func main() {
	src := flag.String("src", "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv", "scikit-learn's breast_cancer.csv")
	flag.Parse()
	f, err := os.Open(*src)
	if err != nil {
		log.Fatal(err)
	}
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		log.Fatal(err)
	}
	// The first line is "569,30,malignant,benign": rows, features, the
	// names of target 0 and 1.
	classes := rows[0][2:]
	rows = rows[1:]
	var header []string
	for _, prefix := range []string{"mean", "error", "worst"} {
		for _, n := range names {
			if prefix == "error" {
				header = append(header, n+"_error")
			} else {
				header = append(header, prefix+"_"+n)
			}
		}
	}
	header = append(header, "diagnosis")
	labels := make([]uint8, len(rows))
	hi := make([]float64, 30)
	for i, row := range rows {
		if len(row) != 31 {
			log.Fatalf("row %d has %d fields", i, len(row))
		}
		for j := range 30 {
			v, err := strconv.ParseFloat(row[j], 64)
			if err != nil || v < 0 {
				log.Fatalf("row %d field %d: %q", i, j, row[j])
			}
			hi[j] = max(hi[j], v)
		}
		c, err := strconv.Atoi(row[30])
		if err != nil || c < 0 || c > 1 {
			log.Fatalf("row %d target %q", i, row[30])
		}
		labels[i] = uint8(c)
		row[30] = classes[c]
	}
	train, test, err := dataset.StratifiedSplit(labels, 2, len(rows)/5, noise.NewSeeded(dataset.DefaultSplitSeed))
	if err != nil {
		log.Fatal(err)
	}
	write := func(path string, idx []int) {
		out, err := os.Create(path)
		if err != nil {
			log.Fatal(err)
		}
		w := csv.NewWriter(out)
		w.Write(header)
		for _, i := range idx {
			w.Write(rows[i])
		}
		w.Flush()
		if err := w.Error(); err != nil {
			log.Fatal(err)
		}
		if err := out.Close(); err != nil {
			log.Fatal(err)
		}
	}
	write("train.csv", train)
	write("holdout.csv", test)

	type feature struct {
		Name  string  `json:"name"`
		Type  string  `json:"type"`
		Scale string  `json:"scale"`
		Min   float64 `json:"min"`
		Max   float64 `json:"max"`
	}
	var fs []feature
	for j := range 30 {
		fs = append(fs, feature{Name: header[j], Type: "numeric", Scale: "symmetric", Min: 0, Max: ceil2(hi[j])})
	}
	type label struct {
		Name    string   `json:"name"`
		Classes []string `json:"classes"`
	}
	type privacy struct {
		Protocol string  `json:"protocol"`
		Epsilon  float64 `json:"epsilon"`
		Delta    float64 `json:"delta"`
		Rounds   int     `json:"rounds"`
	}
	task := struct {
		Version    int               `json:"version"`
		Name       string            `json:"name"`
		Title      string            `json:"title"`
		Consent    string            `json:"consent"`
		Source     string            `json:"source"`
		Features   []feature         `json:"features"`
		Label      label             `json:"label"`
		Model      map[string]string `json:"model"`
		Privacy    privacy           `json:"privacy"`
		Holdout    string            `json:"holdout"`
		Simulation string            `json:"simulation"`
	}{
		Version: 1,
		Name:    "breast-cancer",
		Title:   "Breast cancer diagnosis from cell nuclei (UCI Wisconsin Diagnostic)",
		Consent: "This is a demonstration study on a public data set (Breast Cancer Wisconsin (Diagnostic), UCI Machine Learning Repository, as copied by scikit-learn). " +
			"If you take part, you choose a CSV file on your device with the columns listed below; its rows never leave your device. " +
			"Your device trains a small model on them and sends only a clipped, noised update, through a relay to an aggregator, two servers that do not collude. " +
			"The model is not a medical device and must not be used for diagnosis.",
		Source:     "csv",
		Features:   fs,
		Label:      label{Name: "diagnosis", Classes: classes},
		Model:      map[string]string{"type": "logreg"},
		Privacy:    privacy{Protocol: "secagg", Epsilon: 4, Delta: 1e-5, Rounds: 10},
		Holdout:    "holdout.csv",
		Simulation: "train.csv",
	}
	b, err := json.MarshalIndent(task, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	// One feature per line keeps the file readable.
	s := string(b)
	s = strings.NewReplacer("{\n      \"name\"", "{\"name\"", ",\n      \"type\"", ", \"type\"", ",\n      \"scale\"", ", \"scale\"", ",\n      \"min\"", ", \"min\"", ",\n      \"max\"", ", \"max\"", "\n    }", "}").Replace(s)
	if err := os.WriteFile("task.json", []byte(s+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d train rows, %d holdout rows\n", len(train), len(test))
}

// ceil2 rounds v > 0 up to two significant digits.
func ceil2(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v))-1)
	r := math.Ceil(v/e) * e
	// Undo the binary rounding of the product (0.17 not 0.17000000000000001).
	r, _ = strconv.ParseFloat(strconv.FormatFloat(r, 'g', 2, 64), 64)
	if r < v {
		r = math.Nextafter(r, math.Inf(1))
	}
	return r
}
