package schedule

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse parses a schedules file of 100,000 jobs in the shape of
// test/perf's 100k-schedules workload (mixed specs, four zones).
func BenchmarkParse(b *testing.B) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}
	var y strings.Builder
	y.WriteString("jobs:\n")
	for i := range 100_000 {
		var spec string
		switch i % 4 {
		case 0:
			spec = fmt.Sprintf("%d %d/5 * * * *", i%60, (i/4)%5)
		case 1:
			spec = fmt.Sprintf("@every %ds", 60+(i/4)%240)
		case 2:
			spec = fmt.Sprintf("%d * * * *", (i/4)%60)
		case 3:
			spec = fmt.Sprintf("%d %d * * *", (i/4)%60, (i/240)%24)
		}
		fmt.Fprintf(&y, "  - name: job-%06d\n    schedule: %q\n    timezone: %s\n    handler: noop\n    catchup: 0s\n", i, spec, zones[i%4])
	}
	data := []byte(y.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
