package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dlq"
)

// A letter that holds only a prefix of an oversized record says so, with
// the original's size, hash and coordinates, and is never redriven, not
// even with --force: republishing part of a record is not redriving it.
func TestDLQIncompleteLetter(t *testing.T) {
	orig := &kgo.Record{Topic: "kjob.windows", Partition: 2, Offset: 57, Key: []byte("sync"), Value: bytes.Repeat([]byte("x"), 1_000_117)}
	rec := dlq.New("kjob.windows.dlq", orig, dlq.Meta{Reason: "undecodable record: too large", At: t0})
	rec.Offset = 9
	d := parseDeadLetter(rec)
	if d.ValueSize != 1_000_117 || d.Incomplete == "" || d.Origin.String() != "kjob.windows[2]@57" {
		t.Fatalf("parsed: size %d, incomplete %q, origin %s", d.ValueSize, d.Incomplete, d.Origin)
	}
	var b bytes.Buffer
	if err := renderDLQShow(&b, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Incomplete:     value cut to 65536 of 1000117 bytes; the original (1000117 bytes, sha256 " + d.ValueSHA256 + ") is at kjob.windows[2]@57",
		"(first 4096 bytes shown)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dlq show lacks %q:\n%s", want, b.String())
		}
	}
	for _, force := range []bool{false, true} {
		items := planRedrive([]deadLetter{d}, force)
		if !strings.Contains(items[0].Skip, "holds only part of the original record") {
			t.Errorf("force=%v: redrive plan %+v, want the letter left out", force, items[0].Skip)
		}
	}
}
