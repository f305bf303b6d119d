package partition

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFrontierSettlesAcrossOffsetGaps: records settle in any order, with
// offsets that skip transaction markers, and the commit point is the
// first record not settled.
func TestFrontierSettlesAcrossOffsetGaps(t *testing.T) {
	var f frontier
	offsets := []int64{10, 11, 13, 14, 15, 18, 19} // 12, 16 and 17: markers
	for _, o := range offsets {
		f.push(&kgo.Record{Offset: o}, false)
	}
	for _, o := range []int64{12, 9, 20, 16} {
		if f.settle(o) {
			t.Errorf("settle(%d) = true for an offset not held", o)
		}
	}
	for _, o := range []int64{19, 13, 11, 15} {
		if !f.settle(o) {
			t.Fatalf("settle(%d) = false for a held record", o)
		}
	}
	if f.settle(13) {
		t.Error("settle(13) twice = true")
	}
	if last := f.advance(); last != nil {
		t.Fatalf("advance() = offset %d with record 10 not settled", last.Offset)
	}
	f.settle(10)
	// 10, 11 and 13 are settled, and nothing lies between 11 and 13.
	if last := f.advance(); last == nil || last.Offset != 13 {
		t.Fatalf("advance() = %v, want offset 13", last)
	}
	if got := f.len(); got != 4 {
		t.Fatalf("len() = %d after the prefix up to 13 went, want 4", got)
	}
	f.settle(14)
	f.settle(18)
	if last := f.advance(); last == nil || last.Offset != 19 || f.len() != 0 {
		t.Fatalf("advance() = %v with %d left, want offset 19 and none left", last, f.len())
	}
	f.push(&kgo.Record{Offset: 30}, false)
	if !f.settle(30) || f.advance().Offset != 30 {
		t.Error("a record pushed after the frontier emptied does not settle")
	}
}
