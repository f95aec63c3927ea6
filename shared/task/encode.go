package task

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blanket-fl/blanket/shared/dataset"
)

// Limits of ParseCSV.
const (
	// MaxCSVBytes is the largest file ParseCSV reads.
	MaxCSVBytes = 32 << 20
	// MaxRows is the most data rows ParseCSV encodes.
	MaxRows = 1 << 20
	// MaxRowErrors is the most row errors ParseCSV lists; Parsed.Skipped
	// counts them all.
	MaxRowErrors = 50
)

// RowError is a problem with one row of a volunteer's data, in words a
// volunteer can act on. Row is the row's number as a spreadsheet shows it
// (the header is row 1, the first data row row 2; for a form, 1).
type RowError struct {
	Row    int
	Column string // "" when the problem is the row as a whole
	Msg    string
}

func (e RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("row %d: %s", e.Row, e.Msg)
	}
	return fmt.Sprintf("row %d, column '%s': %s", e.Row, e.Column, e.Msg)
}

// ErrData is wrapped by errors about a whole file of data (not a row): no
// header, a missing column, too large.
var ErrData = errors.New("unusable data")

// Parsed is a volunteer's file, encoded.
type Parsed struct {
	// Set holds the encoded rows (Features = Task.Inputs, Classes = the
	// label's classes); nil if no row was usable.
	Set *dataset.Set
	// Errors lists the first MaxRowErrors rows that were skipped and
	// why; Skipped counts every skipped row.
	Errors  []RowError
	Skipped int
	// Ignored names the file's columns the task does not use: they are
	// never read further, and never leave the device.
	Ignored []string
	// Separator is the character between the file's columns: ',' unless
	// the header row has none and has ';' (a spreadsheet saved in a
	// locale whose decimal mark is a comma: its numbers are then read
	// with a decimal comma, "3,5" as 3.5) or a tab.
	Separator rune
}

// separator guesses the column separator from the header row (the file's
// first line): ',' if it has one, else ';' or a tab if it has one, else
// ','.
func separator(b []byte) rune {
	first, _, _ := bytes.Cut(b, []byte("\n"))
	switch {
	case bytes.ContainsRune(first, ','):
		return ','
	case bytes.ContainsRune(first, ';'):
		return ';'
	case bytes.ContainsRune(first, '\t'):
		return '\t'
	}
	return ','
}

// ParseCSV reads a CSV file (a header row naming the columns, in any
// order, then one example per row) and encodes every row by the task's
// declared ranges and categories (see the package doc: no statistic of the
// data is computed). Rows with a problem are skipped and listed in
// Parsed.Errors; an error is returned only when the file as a whole is
// unusable (not CSV, no header, a column of the task missing, more than
// MaxCSVBytes or MaxRows), wrapping ErrData. This is the function the
// browser client calls with the bytes of the file a volunteer picked.
func (t *Task) ParseCSV(b []byte) (*Parsed, error) {
	if len(b) > MaxCSVBytes {
		return nil, fmt.Errorf("task: the file has %d bytes, more than the %d accepted: %w", len(b), MaxCSVBytes, ErrData)
	}
	b = bytes.TrimPrefix(b, []byte("\ufeff")) // a spreadsheet's byte order mark
	sep := separator(b)
	r := csv.NewReader(bytes.NewReader(b))
	r.Comma = sep
	r.FieldsPerRecord = -1 // row-level errors, not a file-level one
	r.ReuseRecord = true
	head, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("task: the file is empty (it needs a header row naming the columns): %w", ErrData)
	}
	if err != nil {
		return nil, fmt.Errorf("task: the header row: %v: %w", err, ErrData)
	}
	idx, ignored, err := t.header(head)
	if err != nil {
		return nil, err
	}
	p := &Parsed{Ignored: ignored, Separator: sep}
	set := &dataset.Set{Features: t.Inputs(), Classes: len(t.Label.Classes)}
	row := make([]float32, set.Features)
	values := make([]string, len(idx))
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("task: reading the file: %v: %w", err, ErrData)
			}
			p.skip(RowError{Row: pe.StartLine, Msg: "not valid CSV: " + pe.Err.Error()})
			continue
		}
		line, _ := r.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a blank line
		}
		if set.Len() >= MaxRows {
			return nil, fmt.Errorf("task: the file has more than %d rows: %w", MaxRows, ErrData)
		}
		if len(rec) != len(head) {
			p.skip(RowError{Row: line, Msg: fmt.Sprintf("has %d values, the header %d", len(rec), len(head))})
			continue
		}
		for k, j := range idx {
			values[k] = rec[j]
		}
		if sep == ';' {
			t.decimalCommas(values)
		}
		y, rerr := t.encode(row, values)
		if rerr != nil {
			rerr.Row = line
			p.skip(*rerr)
			continue
		}
		set.X = append(set.X, row...)
		set.Y = append(set.Y, y)
	}
	if set.Len() > 0 {
		p.Set = set
	}
	return p, nil
}

func (p *Parsed) skip(e RowError) {
	p.Skipped++
	if len(p.Errors) < MaxRowErrors {
		p.Errors = append(p.Errors, e)
	}
}

// decimalCommas rewrites each numeric feature's value (values in Columns
// order) written with one decimal comma ("3,5", "-0,25") with a point,
// for a ';'-separated file; categories and the label are left as they
// are.
func (t *Task) decimalCommas(values []string) {
	for i, c := range t.cols {
		if c.cats != nil {
			continue
		}
		v := strings.TrimSpace(values[i])
		if strings.Count(v, ",") != 1 {
			continue
		}
		d := strings.Replace(v, ",", ".", 1)
		if _, err := strconv.ParseFloat(d, 64); err == nil {
			values[i] = d
		}
	}
}

// header maps the task's columns (Columns order) to their positions in
// the header; it names every missing column.
func (t *Task) header(head []string) (idx []int, ignored []string, err error) {
	pos := make(map[string]int, len(head))
	for j, h := range head {
		h = strings.TrimSpace(h)
		if _, dup := pos[h]; dup {
			return nil, nil, fmt.Errorf("task: the header names column '%s' twice: %w", h, ErrData)
		}
		pos[h] = j
	}
	want := t.Columns()
	var missing []string
	for _, c := range want {
		j, ok := pos[c]
		if !ok {
			missing = append(missing, "'"+c+"'")
			continue
		}
		idx = append(idx, j)
		delete(pos, c)
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("task: the header row has no column %s (the first row must name the columns %s): %w",
			strings.Join(missing, ", "), strings.Join(want, ", "), ErrData)
	}
	for h := range pos {
		ignored = append(ignored, h)
	}
	slices.Sort(ignored)
	return idx, ignored, nil
}

// encode writes the feature vector of one row into dst (Inputs values)
// and returns its label; values are the row's strings in Columns order.
// It computes nothing from any other row.
func (t *Task) encode(dst []float32, values []string) (uint8, *RowError) {
	clear(dst)
	for k, c := range t.cols {
		v := strings.TrimSpace(values[k])
		if v == "" {
			return 0, &RowError{Column: c.name, Msg: "is empty (every column needs a value)"}
		}
		if c.cats != nil {
			j, ok := c.cats[v]
			if !ok {
				return 0, &RowError{Column: c.name, Msg: fmt.Sprintf("%q is not one of the declared categories (%s)", v, quoteList(t.Features[c.feature].Categories))}
			}
			dst[c.offset+j] = 1
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			msg := fmt.Sprintf("%q is not a number", v)
			if strings.Count(v, ",") == 1 {
				if _, err := strconv.ParseFloat(strings.Replace(v, ",", ".", 1), 64); err == nil {
					msg += " (a decimal comma? write it with a point: " + strings.Replace(v, ",", ".", 1) +
						", or save the file with ';' between columns)"
				}
			}
			return 0, &RowError{Column: c.name, Msg: msg}
		}
		f := t.Features[c.feature]
		if x < *f.Min || x > *f.Max {
			return 0, &RowError{Column: c.name, Msg: fmt.Sprintf("%s is outside the declared range %s–%s", v, fmtNum(*f.Min), fmtNum(*f.Max))}
		}
		u := (x - c.lo) / c.span
		if c.sym {
			u = 2*u - 1
		}
		dst[c.offset] = float32(u)
	}
	v := strings.TrimSpace(values[len(t.cols)])
	for j, c := range t.Label.Classes {
		if v == c {
			return uint8(j), nil
		}
	}
	if v == "" {
		return 0, &RowError{Column: t.Label.Name, Msg: "is empty (every row needs its label)"}
	}
	return 0, &RowError{Column: t.Label.Name, Msg: fmt.Sprintf("%q is not one of the declared classes (%s)", v, quoteList(t.Label.Classes))}
}

// EncodeAnswers encodes one volunteer's answers to a form (SourceForm: one
// row per volunteer; keys are the Columns, feature names and the label's
// name) exactly as ParseCSV encodes a row. An unanswered or invalid answer
// is a RowError of row 1.
func (t *Task) EncodeAnswers(answers map[string]string) (x []float32, y uint8, err error) {
	names := t.Columns()
	values := make([]string, len(names))
	for k, n := range names {
		v, ok := answers[n]
		if !ok {
			return nil, 0, RowError{Row: 1, Column: n, Msg: "is not answered"}
		}
		values[k] = v
	}
	for n := range answers {
		if !slices.Contains(names, n) {
			return nil, 0, RowError{Row: 1, Column: n, Msg: "is not a question of this study"}
		}
	}
	x = make([]float32, t.Inputs())
	y, rerr := t.encode(x, values)
	if rerr != nil {
		rerr.Row = 1
		return nil, 0, *rerr
	}
	return x, y, nil
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func quoteList(s []string) string {
	const show = 8
	q := make([]string, 0, min(len(s), show)+1)
	for i, v := range s {
		if i == show {
			q = append(q, fmt.Sprintf("and %d more", len(s)-show))
			break
		}
		q = append(q, strconv.Quote(v))
	}
	return strings.Join(q, ", ")
}
