// Package flagfile reads a party's configuration file: one `name = value`
// per line, whose names are exactly the names of the command's flags, so
// that every flag a command defines is configurable in the file without
// code of its own (docs/deploy.md). Blank lines and lines starting with
// '#' are ignored; a value may be double-quoted (Go syntax) to keep
// leading or trailing spaces or a '#'. A name that is not a flag, a name
// given twice and a line without '=' are errors naming the file and the
// line. Flags given on the command line win over the file.
package flagfile

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// FileError is the error of Parse for a configuration file that cannot be
// read or is invalid (the command line's errors are the flag package's,
// which fs has already printed).
type FileError struct{ Err error }

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// Parse parses args into fs and then, if the flag named fileFlag (a string
// flag of fs, e.g. "config") names a file, applies that file to every flag
// of fs that args did not set. The file cannot set fileFlag itself.
func Parse(fs *flag.FlagSet, args []string, fileFlag string) error {
	f := fs.Lookup(fileFlag)
	if f == nil {
		return fmt.Errorf("flagfile: no flag -%s", fileFlag)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := f.Value.String()
	if path == "" {
		return nil
	}
	file, err := os.Open(path)
	if err != nil {
		return &FileError{fmt.Errorf("-%s: %w", fileFlag, err)}
	}
	defer file.Close()
	given := map[string]bool{fileFlag: true}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := apply(fs, file, path, func(name string) bool { return given[name] }, fileFlag); err != nil {
		return &FileError{err}
	}
	return nil
}

// Apply reads the file r (named name in errors) and sets each flag it
// names with fs.Set, except those for which skip returns true (the
// command line's). It reads the whole file and sets nothing unless every
// line is valid, so a bad file leaves fs as it was.
func Apply(fs *flag.FlagSet, r io.Reader, name string, skip func(string) bool) error {
	return apply(fs, r, name, skip, "")
}

// apply is Apply refusing the key forbid (the file flag).
func apply(fs *flag.FlagSet, r io.Reader, name string, skip func(string) bool, forbid string) error {
	type setting struct {
		key, value string
		line       int
	}
	var all []setting
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%s:%d: want name = value, got %q", name, n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if fs.Lookup(key) == nil {
			return fmt.Errorf("%s:%d: unknown key %q (the keys are the flag names; see -h)", name, n, key)
		}
		if key == forbid {
			return fmt.Errorf("%s:%d: key %q cannot be set in the file it names", name, n, key)
		}
		if prev, dup := seen[key]; dup {
			return fmt.Errorf("%s:%d: key %q already set on line %d", name, n, key, prev)
		}
		seen[key] = n
		if strings.HasPrefix(value, `"`) {
			v, err := strconv.Unquote(value)
			if err != nil {
				return fmt.Errorf("%s:%d: %s: bad quoted value %s", name, n, key, value)
			}
			value = v
		}
		all = append(all, setting{key, value, n})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Check every value on a scratch copy of each flag first, so that a
	// bad value on a later line leaves fs untouched.
	for _, s := range all {
		if skip != nil && skip(s.key) {
			continue
		}
		if err := check(fs.Lookup(s.key), s.value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", name, s.line, s.key, err)
		}
	}
	for _, s := range all {
		if skip != nil && skip(s.key) {
			continue
		}
		if err := fs.Set(s.key, s.value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", name, s.line, s.key, err)
		}
	}
	return nil
}

// check parses value as a flag of f's type would, without setting f, for
// the standard library's flag types (a custom flag.Value is checked by
// its Set alone).
func check(f *flag.Flag, value string) error {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return nil
	}
	scratch := flag.NewFlagSet("check", flag.ContinueOnError)
	scratch.SetOutput(io.Discard)
	switch g.Get().(type) {
	case bool:
		scratch.Bool("v", false, "")
	case int:
		scratch.Int("v", 0, "")
	case int64:
		scratch.Int64("v", 0, "")
	case uint:
		scratch.Uint("v", 0, "")
	case uint64:
		scratch.Uint64("v", 0, "")
	case float64:
		scratch.Float64("v", 0, "")
	case time.Duration:
		scratch.Duration("v", 0, "")
	default:
		return nil
	}
	return scratch.Set("v", value)
}
