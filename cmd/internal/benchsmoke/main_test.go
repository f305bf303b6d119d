package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func table(t *testing.T, rows string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rows.tsv")
	if err := os.WriteFile(p, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchsmoke(t *testing.T) {
	const base = "burst\t30000\twindows/s\ts\n" + "burst\t32000\twindows/s\ts\n" + "burst\t10\twindows/s\ts\n" +
		"herd p99\t50\tms\ts\n" + "herd p99\t60\tms\ts\n" + "herd p99\t55\tms\ts\n"
	for _, tc := range []struct {
		name, head string
		want       int
		says       string
	}{
		// Medians: base burst 30000, herd 55.
		{"level", "burst\t29000\twindows/s\ts\nburst\t31000\twindows/s\ts\nburst\t30500\twindows/s\ts\nherd p99\t56\tms\ts\n", 0, "0.98"},
		{"faster is never a failure", "burst\t90000\twindows/s\ts\nherd p99\t5\tms\ts\n", 0, "0.33"},
		{"a rate halved fails", "burst\t15000\twindows/s\ts\nherd p99\t55\tms\ts\n", 1, "2.00"},
		{"a time doubled fails", "burst\t30000\twindows/s\ts\nherd p99\t110\tms\ts\n", 1, "FAIL, more than 1.50× worse"},
		{"one bad round does not", "burst\t30000\twindows/s\ts\nburst\t3\twindows/s\ts\nburst\t31000\twindows/s\ts\nherd p99\t55\tms\ts\n", 0, "1.00"},
		{"a row that stops reporting fails", "burst\t30000\twindows/s\ts\n", 1, "no longer reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			got := run([]string{"-base", table(t, base), "-head", table(t, tc.head)}, &out, &errOut)
			if got != tc.want || !strings.Contains(out.String(), tc.says) {
				t.Errorf("exit %d (want %d), output:\n%s%s\nwant it to contain %q", got, tc.want, out.String(), errOut.String(), tc.says)
			}
		})
	}
}

// -keep holds a gain: a figure that is no worse than the baseline still
// fails if it lost the lead the bound keeps.
func TestBenchsmokeKeep(t *testing.T) {
	const base = "herd p99\t50\tms\ts\nherd p50\t30\tms\ts\n"
	for _, tc := range []struct {
		name, head string
		want       int
		says       string
	}{
		{"gain kept", "herd p99\t12\tms\ts\nherd p50\t6\tms\ts\n", 0, "(kept: at most 0.50×)"},
		{"gain lost, yet no worse than the baseline", "herd p99\t40\tms\ts\nherd p50\t6\tms\ts\n", 1, "the gain is lost: must stay at most 0.50×"},
		{"other figures keep -max-ratio", "herd p99\t12\tms\ts\nherd p50\t40\tms\ts\n", 0, "1.33"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			got := run([]string{"-base", table(t, base), "-head", table(t, tc.head), "-keep", "p99$=0.5"}, &out, &errOut)
			if got != tc.want || !strings.Contains(out.String(), tc.says) {
				t.Errorf("exit %d (want %d), output:\n%s%s\nwant it to contain %q", got, tc.want, out.String(), errOut.String(), tc.says)
			}
		})
	}
	var out, errOut strings.Builder
	if got := run([]string{"-base", "x", "-head", "y", "-keep", "p99"}, &out, &errOut); got != 2 || !strings.Contains(errOut.String(), "want REGEXP=RATIO") {
		t.Errorf("-keep without a ratio: exit %d, %s", got, errOut.String())
	}
}

func TestBenchsmokeBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
		says string
	}{
		{"no tables", func(*testing.T) []string { return nil }, "-base and -head are required"},
		{"ratio not above 1", func(t *testing.T) []string {
			p := table(t, "a\t1\tms\n")
			return []string{"-base", p, "-head", p, "-max-ratio", "0.9"}
		}, "-max-ratio 0.9: must be above 1"},
		{"value not a number", func(t *testing.T) []string {
			return []string{"-base", table(t, "a\tfast\tms\n"), "-head", table(t, "a\t1\tms\n")}
		}, `value "fast" of "a" is not a number`},
		{"nothing matched", func(t *testing.T) []string {
			p := table(t, "a\t1\tms\n")
			return []string{"-base", p, "-head", p, "-figure", "^burst"}
		}, "no rows match the figures compared"},
		{"unit changed", func(t *testing.T) []string {
			return []string{"-base", table(t, "a\t1\tms\na\t1\ts\n"), "-head", table(t, "a\t1\tms\n")}
		}, `"a" in "s", earlier rows in "ms"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			if got := run(tc.args(t), &out, &errOut); got != 2 || !strings.Contains(errOut.String(), tc.says) {
				t.Errorf("exit %d (want 2), stderr %q, want it to contain %q", got, errOut.String(), tc.says)
			}
		})
	}
}
