package schedule

import (
	"fmt"
	"strings"
	"testing"
)

// A payload made too large by aliases is reported at the payload's own
// line, not at the anchor's (which was line 1 or 2 before).
func TestPayloadTooLargeThroughAliasAtPayloadLine(t *testing.T) {
	big := strings.Repeat("x", 20<<10)
	src := fmt.Sprintf(`jobs:
  - name: small
    schedule: "@every 1m"
    handler: log
    payload: &p {blob: %q}
  - name: huge
    schedule: "@every 1m"
    handler: log
    payload: {a: *p, b: *p, c: *p, d: *p, e: *p, f: *p, g: *p, h: *p}
`, big)
	_, err := Parse("f.yaml", []byte(src))
	want := "f.yaml:9: jobs[1].payload: more than 65536 bytes as JSON; pass a reference to the data instead"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	// A large file is parsed in chunks, with aliases resolved into a
	// header: the line is still the payload's.
	var b strings.Builder
	fmt.Fprintf(&b, "jobs:\n  - name: anchor\n    schedule: \"@every 1m\"\n    handler: log\n    payload: &p {blob: %q}\n", big)
	for i := range 3 * chunkJobs {
		fmt.Fprintf(&b, "  - name: j%d\n    schedule: \"@every 1m\"\n    handler: log\n", i)
	}
	line := strings.Count(b.String(), "\n") + 4
	fmt.Fprintf(&b, "  - name: huge\n    schedule: \"@every 1m\"\n    handler: log\n    payload: {a: *p, b: *p, c: *p, d: *p, e: *p, f: *p, g: *p, h: *p}\n")
	_, err = Parse("f.yaml", []byte(b.String()))
	want = fmt.Sprintf("f.yaml:%d: jobs[%d].payload: more than 65536 bytes as JSON", line, 3*chunkJobs+1)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("chunked: err = %v\nwant it to start with %s", err, want)
	}
}

// A tab in the indentation gets a hint at the tab's line.
func TestTabIndentationHint(t *testing.T) {
	for _, tc := range []struct {
		src  string
		line int
	}{
		{"jobs:\n  - name: a\n\tschedule: \"@every 1m\"\n    handler: log\n", 3},
		{"jobs:\n  - name: a\n    schedule: \"@every 1m\"\n\t  handler: log\n", 4},
		{"jobs:\n\t- name: a\n    schedule: \"@every 1m\"\n    handler: log\n", 2},
	} {
		_, err := Parse("f.yaml", []byte(tc.src))
		want := fmt.Sprintf("f.yaml:%d: invalid YAML: ", tc.line)
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "indented with a tab character: YAML indentation must be spaces") {
			t.Errorf("%q: err = %v\nwant line %d and the tab hint", tc.src, err, tc.line)
		}
	}
	// No tab: no hint.
	_, err := Parse("f.yaml", []byte("jobs:\n  - name: a\n    schedule: [\n"))
	if err == nil || strings.Contains(err.Error(), "tab") {
		t.Errorf("err = %v", err)
	}
}
