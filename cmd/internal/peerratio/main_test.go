package main

import (
	"strings"
	"testing"
)

func TestRatios(t *testing.T) {
	table := "figure\tvalue\tunit\tsettings\n" +
		"burst throughput to the last window done, 1 partition(s), log info\t40000\twindows/s\tx\n" +
		"no-op burst, asynq, concurrency 100: throughput to all settled in the store\t10000\ttasks/s\tx\n" +
		"herd 1000 jobs every 10s: window start -> handler start p99\t20\tms\tx\n" +
		"herd 1000 jobs every 10s, gocron: due -> handler start p99\t100\tms\tx\n" +
		"herd 1000 jobs every 10s, gocron: duplicate runs\t12\truns\tx\n"
	rows, err := read(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printRatios(&out, rows)
	s := out.String()
	for _, want := range []string{
		"4.00x", // burst: 40000 / 10000, higher is better
		"5.00x", // herd p99: 100 / 20, lower is better
		"herd duplicate runs, gocron: 12",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if _, err := read(strings.NewReader("a\tnot-a-number\n")); err == nil || !strings.Contains(err.Error(), `line 1: value "not-a-number" of "a"`) {
		t.Errorf("bad value: err = %v", err)
	}
}
