// Command peerratio prints, from the table make bench-peers collects
// (test/perf's kjob rows and bench/peers' asynq, River and gocron rows of
// the same run: figure, value, unit, settings, tab-separated), each
// workload's kjob figure beside each peer's, and the ratio turned so that
// above 1 means kjob is ahead:
//
//	peerratio bin/bench-peers.tsv
//
// A figure missing from the table (a peer not run) is shown as "-". Only
// rows of one run are compared; docs/performance.md quotes the ratios with
// the run's date and machine.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// comparison is one figure of one workload: kjob's row and a peer's row
// (%s is the peer's name in its rows), and whether higher is better.
type comparison struct {
	workload, figure string
	kjob             string // regexp of kjob's figure
	peer             string // regexp of the peer's figure, %s the peer
	higherBetter     bool
}

var peers = []string{"asynq", "River", "gocron"}

var comparisons = []comparison{
	{"no-op burst, 1 partition, concurrency 100", "throughput to all settled (windows/s)",
		`^burst throughput to the last window done, 1 partition\(s\), log info$`, `^no-op burst, %s, concurrency 100: throughput to all settled in the store$`, true},
	{"I/O burst 2,000 x 50 ms, concurrency 100", "throughput to all settled (windows/s)",
		`^I/O burst throughput to the last window done, 1 partition\(s\)$`, `^I/O burst, %s, concurrency 100: throughput to all settled in the store$`, true},
	{"head-of-line beside a slow handler, concurrency 100", "due -> handler start p50 (ms)",
		`^head-of-line: fast job window start -> handler start, beside a .* handler p50$`, `^head-of-line, %s, concurrency 100: fast task due -> handler start, beside a .* handler p50$`, false},
	{"head-of-line beside a slow handler, concurrency 100", "due -> handler start p99 (ms)",
		`^head-of-line: fast job window start -> handler start, beside a .* handler p99$`, `^head-of-line, %s, concurrency 100: fast task due -> handler start, beside a .* handler p99$`, false},
	{"herd: 1,000 jobs due at once every 10s", "due -> handler start p50 (ms)",
		`^herd 1000 jobs every 10s: window start -> handler start p50$`, `^herd 1000 jobs every 10s, %s: due -> handler start p50$`, false},
	{"herd: 1,000 jobs due at once every 10s", "due -> handler start p99 (ms)",
		`^herd 1000 jobs every 10s: window start -> handler start p99$`, `^herd 1000 jobs every 10s, %s: due -> handler start p99$`, false},
	{"herd: 1,000 jobs due at once every 10s", "due -> handler start max (ms)",
		`^herd 1000 jobs every 10s: window start -> handler start max$`, `^herd 1000 jobs every 10s, %s: due -> handler start max$`, false},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: peerratio TABLE.tsv")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerratio:", err)
		os.Exit(2)
	}
	defer f.Close()
	rows, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerratio:", err)
		os.Exit(2)
	}
	printRatios(os.Stdout, rows)
}

// read returns the table's values by figure (the last row of a figure wins).
func read(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 2 || f[0] == "figure" {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value %q of %q is not a number", n, f[1], f[0])
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

func find(rows map[string]float64, re string) (float64, bool) {
	rx := regexp.MustCompile(re)
	for k, v := range rows {
		if rx.MatchString(k) {
			return v, true
		}
	}
	return 0, false
}

func printRatios(w io.Writer, rows map[string]float64) {
	fmt.Fprintf(w, "%-52s %-38s %10s", "workload", "figure", "kjob")
	for _, p := range peers {
		fmt.Fprintf(w, " %10s %8s", p, "ratio")
	}
	fmt.Fprintln(w)
	num := func(v float64, ok bool) string {
		if !ok {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	for _, c := range comparisons {
		k, kok := find(rows, c.kjob)
		fmt.Fprintf(w, "%-52s %-38s %10s", c.workload, c.figure, num(k, kok))
		for _, p := range peers {
			v, ok := find(rows, fmt.Sprintf(c.peer, regexp.QuoteMeta(p)))
			ratio := "-"
			if ok && kok && v > 0 && k > 0 {
				r := v / k
				if c.higherBetter {
					r = k / v
				}
				ratio = fmt.Sprintf("%.2fx", r)
			}
			fmt.Fprintf(w, " %10s %8s", num(v, ok), ratio)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "ratio: how far kjob is ahead (above 1) or behind (below 1) of the peer, in this run.")
	for _, p := range peers {
		if v, ok := find(rows, fmt.Sprintf(`^herd 1000 jobs every 10s, %s: duplicate runs$`, regexp.QuoteMeta(p))); ok {
			fmt.Fprintf(w, "herd duplicate runs, %s: %v\n", p, v)
		}
	}
}
