package flagfile

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flags is a flag set with one flag of each kind the mains use.
type flags struct {
	fs      *flag.FlagSet
	config  *string
	listen  *string
	rounds  *int
	eps     *float64
	timeout *time.Duration
	paused  *bool
}

func newFlags() *flags {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{fs: fs,
		config:  fs.String("config", "", ""),
		listen:  fs.String("listen", "127.0.0.1:8080", ""),
		rounds:  fs.Int("rounds", 0, ""),
		eps:     fs.Float64("epsilon", 1, ""),
		timeout: fs.Duration("round-timeout", time.Minute, ""),
		paused:  fs.Bool("paused", false, ""),
	}
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "party.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFileSetsFlagsCommandLineWins: every key of the file sets the flag
// of that name (comments, blank lines and quoted values as documented),
// a flag given on the command line keeps the command line's value, and a
// flag in neither keeps its default.
func TestFileSetsFlagsCommandLineWins(t *testing.T) {
	p := write(t, `# the aggregator of the example
listen = 0.0.0.0:9000

rounds=12
  epsilon = 4.5
round-timeout = 90s
paused = true
`)
	f := newFlags()
	if err := Parse(f.fs, []string{"-rounds", "3", "-config", p}, "config"); err != nil {
		t.Fatal(err)
	}
	if *f.listen != "0.0.0.0:9000" || *f.eps != 4.5 || *f.timeout != 90*time.Second || !*f.paused {
		t.Errorf("file not applied: listen %q epsilon %v timeout %v paused %v", *f.listen, *f.eps, *f.timeout, *f.paused)
	}
	if *f.rounds != 3 {
		t.Errorf("rounds %d, want the command line's 3", *f.rounds)
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["epsilon"] || !set["rounds"] {
		t.Errorf("flags set by the file must count as set (the mains' fs.Visit): %v", set)
	}

	// Without -config nothing is read and the defaults stay.
	g := newFlags()
	if err := Parse(g.fs, []string{"-rounds", "3"}, "config"); err != nil {
		t.Fatal(err)
	}
	if *g.listen != "127.0.0.1:8080" || *g.rounds != 3 {
		t.Errorf("listen %q rounds %d", *g.listen, *g.rounds)
	}
}

func TestQuotedValue(t *testing.T) {
	p := write(t, "listen = \" a # b \"\n")
	f := newFlags()
	if err := Parse(f.fs, []string{"-config=" + p}, "config"); err != nil {
		t.Fatal(err)
	}
	if *f.listen != " a # b " {
		t.Errorf("listen %q", *f.listen)
	}
}

// TestErrorsNameTheLine: every invalid file is refused with its name and
// the line at fault, and leaves every flag at its default (nothing is
// set unless the whole file is valid).
func TestErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown key", "listen = :1\n\nlisten-addr = :2\n", ":3: unknown key \"listen-addr\""},
		{"no equals", "# c\nrounds 3\n", ":2: want name = value"},
		{"twice", "rounds = 1\nrounds = 2\n", ":2: key \"rounds\" already set on line 1"},
		{"bad int", "listen = :1\nrounds = many\n", ":2: rounds:"},
		{"bad bool", "listen = :1\npaused = perhaps\n", ":2: paused:"},
		{"bad duration", "listen = :1\nround-timeout = 90\n", ":2: round-timeout:"},
		{"bad quote", "listen = \"abc\n", ":1: listen: bad quoted value"},
		{"the file flag itself", "config = other.conf\n", ":1: key \"config\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.text)
			f := newFlags()
			err := Parse(f.fs, []string{"-config", p}, "config")
			if err == nil || !strings.Contains(err.Error(), p+tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, p+tc.want)
			}
			if *f.listen != "127.0.0.1:8080" || *f.rounds != 0 || *f.paused {
				t.Errorf("a refused file set flags: listen %q rounds %d paused %v", *f.listen, *f.rounds, *f.paused)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	f := newFlags()
	err := Parse(f.fs, []string{"-config", filepath.Join(t.TempDir(), "none.conf")}, "config")
	if err == nil || !strings.Contains(err.Error(), "-config") {
		t.Fatalf("error %v", err)
	}
	if err := Parse(newFlags().fs, nil, "no-such-flag"); err == nil {
		t.Fatal("a missing file flag was accepted")
	}
}

// TestFileErrorType: errors of the file are *FileError, the command
// line's are not (a main prints the former; the flag package printed the
// latter).
func TestFileErrorType(t *testing.T) {
	var fe *FileError
	p := write(t, "nope = 1\n")
	if err := Parse(newFlags().fs, []string{"-config", p}, "config"); !errors.As(err, &fe) {
		t.Errorf("file error %v is not a *FileError", err)
	}
	if err := Parse(newFlags().fs, []string{"-nope"}, "config"); err == nil || errors.As(err, &fe) {
		t.Errorf("command-line error %v", err)
	}
}
