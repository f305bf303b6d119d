// Command benchsmoke compares benchmark rows of two builds measured in the
// same run, as ratios, and fails on a large regression. CI's bench-smoke
// step (.ci/bench-smoke) runs the rows alternately on the baseline commit
// and on the commit under test, appending each round's rows to one table
// per build (the tab-separated rows that KJOB_BENCH_TABLE collects:
// figure, value, unit, settings), then calls
//
//	benchsmoke -base base.tsv -head head.tsv -max-ratio 1.5 -figure REGEXP
//
// For each figure matching REGEXP it takes the median of each build's
// rounds and reports head/base, turned so that above 1 is always worse:
// for a rate (a unit ending in "/s") base/head, for a time or a cost
// head/base. It exits 1 if any ratio is above -max-ratio, or if a figure is
// missing from either build (a row that stops reporting is a regression
// too), and 2 on bad input. Absolute times are never compared with a
// threshold: only the two builds of the same run with each other.
//
// -keep 'REGEXP=RATIO' (repeatable) sets the bound of the figures matching
// REGEXP instead of -max-ratio; a RATIO below 1 keeps a gain: the
// figure must stay that much better than the baseline's, so a change
// that loses it fails even if it is no worse than the baseline.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchsmoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("base", "", "rows of the baseline build (KJOB_BENCH_TABLE file)")
	head := fs.String("head", "", "rows of the build under test")
	maxRatio := fs.Float64("max-ratio", 1.5, "fail when a figure is this many times worse than the baseline's (median of rounds)")
	figure := fs.String("figure", ".", "compare only figures matching this regular expression")
	var keeps []keep
	fs.Func("keep", "REGEXP=RATIO: the bound of the figures matching REGEXP (below 1: a gain to keep); repeatable", func(v string) error {
		k, err := parseKeep(v)
		if err == nil {
			keeps = append(keeps, k)
		}
		return err
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *base == "" || *head == "" {
		fmt.Fprintln(stderr, "benchsmoke: -base and -head are required: the KJOB_BENCH_TABLE files of the two builds")
		return 2
	}
	if *maxRatio <= 1 {
		fmt.Fprintf(stderr, "benchsmoke: -max-ratio %v: must be above 1 (1.5 fails on a 50%% regression)\n", *maxRatio)
		return 2
	}
	re, err := regexp.Compile(*figure)
	if err != nil {
		fmt.Fprintf(stderr, "benchsmoke: -figure %q: %v\n", *figure, err)
		return 2
	}
	b, err := readRows(*base, re)
	if err == nil {
		var h map[string]*series
		h, err = readRows(*head, re)
		if err == nil {
			rep := compare(b, h, bounds{max: *maxRatio, keeps: keeps})
			fmt.Fprint(stdout, rep.text)
			if rep.failed {
				return 1
			}
			return 0
		}
	}
	fmt.Fprintln(stderr, "benchsmoke:", err)
	return 2
}

// series is one figure's values over the rounds of one build.
type series struct {
	unit   string
	values []float64
}

func readRows(path string, re *regexp.Regexp) (map[string]*series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*series{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if sc.Text() == "" {
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 3 {
			return nil, fmt.Errorf("%s:%d: %d tab-separated columns, want figure, value, unit[, settings]", path, line, len(cols))
		}
		if !re.MatchString(cols[0]) {
			continue
		}
		v, err := strconv.ParseFloat(cols[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: value %q of %q is not a number", path, line, cols[1], cols[0])
		}
		s := out[cols[0]]
		if s == nil {
			s = &series{unit: cols[2]}
			out[cols[0]] = s
		}
		if s.unit != cols[2] {
			return nil, fmt.Errorf("%s:%d: %q in %q, earlier rows in %q", path, line, cols[0], cols[2], s.unit)
		}
		s.values = append(s.values, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no rows match the figures compared: did the benchmarks run?", path)
	}
	return out, nil
}

// median of the rounds: the middle value, or the mean of the two middle
// ones.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

type report struct {
	text   string
	failed bool
}

var errZero = errors.New("a median of 0: no ratio")

// worse is how many times worse head is than base: above 1 is worse.
func worse(unit string, base, head float64) (float64, error) {
	higherIsBetter := strings.HasSuffix(unit, "/s")
	if base == 0 || head == 0 {
		return 0, errZero
	}
	if higherIsBetter {
		return base / head, nil
	}
	return head / base, nil
}

// keep is a -keep flag: the bound of the figures matching re.
type keep struct {
	re    *regexp.Regexp
	ratio float64
}

func parseKeep(v string) (keep, error) {
	i := strings.LastIndexByte(v, '=')
	if i < 0 {
		return keep{}, fmt.Errorf("%q: want REGEXP=RATIO, e.g. 'p99$=0.6'", v)
	}
	re, err := regexp.Compile(v[:i])
	if err != nil {
		return keep{}, fmt.Errorf("%q: %v", v, err)
	}
	r, err := strconv.ParseFloat(v[i+1:], 64)
	if err != nil || r <= 0 {
		return keep{}, fmt.Errorf("%q: the ratio %q is not a positive number", v, v[i+1:])
	}
	return keep{re: re, ratio: r}, nil
}

// bounds are the ratios a figure may not exceed: its keep's (the first
// that matches), else max.
type bounds struct {
	max   float64
	keeps []keep
}

func (b bounds) of(figure string) float64 {
	for _, k := range b.keeps {
		if k.re.MatchString(figure) {
			return k.ratio
		}
	}
	return b.max
}

func compare(base, head map[string]*series, lim bounds) report {
	names := make([]string, 0, len(base))
	for n := range base {
		names = append(names, n)
	}
	for n := range head {
		if base[n] == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	failed := false
	fmt.Fprintf(&b, "%-8s %12s %12s  %-14s %s\n", "worse×", "baseline", "this commit", "unit", "figure (median of rounds)")
	for _, n := range names {
		bs, hs := base[n], head[n]
		switch {
		case bs == nil:
			fmt.Fprintf(&b, "%-8s %12s %12s  %-14s %s (new: not in the baseline)\n", "-", "-", num(median(hs.values)), hs.unit, n)
			continue
		case hs == nil:
			failed = true
			fmt.Fprintf(&b, "%-8s %12s %12s  %-14s %s: FAIL, the row no longer reports\n", "-", num(median(bs.values)), "missing", bs.unit, n)
			continue
		}
		mb, mh := median(bs.values), median(hs.values)
		r, err := worse(bs.unit, mb, mh)
		verdict := ""
		switch limit := lim.of(n); {
		case err != nil:
			verdict = ": " + err.Error()
		case r > limit && limit < 1:
			failed = true
			verdict = fmt.Sprintf(": FAIL, the gain is lost: must stay at most %.2f× the baseline's", limit)
		case r > limit:
			failed = true
			verdict = fmt.Sprintf(": FAIL, more than %.2f× worse", limit)
		case limit < 1:
			verdict = fmt.Sprintf(" (kept: at most %.2f×)", limit)
		}
		fmt.Fprintf(&b, "%-8.2f %12s %12s  %-14s %s (%d/%d rounds)%s\n", r, num(mb), num(mh), bs.unit, n, len(bs.values), len(hs.values), verdict)
	}
	return report{text: b.String(), failed: failed}
}

// num prints a figure as the bench table does: whole above 100, else 3
// significant digits.
func num(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
