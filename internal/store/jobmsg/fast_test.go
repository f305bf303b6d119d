package jobmsg

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// fastSeeds are values the fast decoder must take (the producer's output
// and harmless variations of it) and values it must leave to
// encoding/json; FuzzFastMatchesReference starts from both.
func fastSeeds(t testing.TB) (taken, left [][]byte) {
	valid, err := Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	v := string(valid)
	// rep is v with old replaced by new; old must occur in v.
	rep := func(old, new string) []byte {
		if !strings.Contains(v, old) {
			t.Fatalf("seed: %s not in %s", old, v)
		}
		return []byte(strings.Replace(v, old, new, 1))
	}
	taken = [][]byte{
		valid,
		[]byte(" \n\t" + v + "\r\n "),
		[]byte(strings.Replace(v, `"v":1,`, `"v":1,"extra":{"a":[1,-2.5e+3,true,false,null,"x\"\u00e9"]},`, 1)),
		[]byte(strings.Replace(v, `"payload":{"url":"http://127.0.0.1:1/hook"}`, `"payload": { "n" : [ 1 , {"é":"ü"} ] , "s":"a\\b" }`, 1)),
		[]byte(strings.Replace(v, `"job":"report"`, `"job" : "report" `, 1)),
		[]byte(strings.Replace(v, `"v":1`, `"v":2`, 1)),                           // fast, then explained as unsupported
		[]byte(strings.Replace(v, `"trigger":"schedule"`, `"trigger":"cron"`, 1)), // fast, then invalid
		[]byte(strings.Replace(v, `"payload":{"url":"http://127.0.0.1:1/hook"}`, `"payload":[1]`, 1)),
		rep(`,"overlap":"queue"`, ``),                         // written before overlap policies
		rep(`"overlap":"queue"`, `"overlap":"replace"`),       // another policy
		rep(`"overlap":"queue"`, `"overlap":"never"`),         // fast, then invalid
		rep(`"overlap":"queue"`, `"overlap":"queue","x":"y"`), // unknown policy field
		rep(`"namespace":"prod",`, ``),                        // written before records carried their namespace
		rep(`"namespace":"prod"`, `"namespace":"a b"`),        // fast, then invalid
		rep(`"namespace":"prod"`, `"namespace":"prod","n":1`), // unknown field next to it
		rep(`"max_attempts":3`, `"max_attempts":1000000000`),  // fast, then beyond the bound
		rep(`"timeout":"30s"`, `"timeout":"100000h"`),         // fast, then beyond the bound

		rep(`"overlap":"queue"`, `"overlap":"allow","max_concurrent":4`),  // a job's limit
		rep(`"overlap":"queue"`, `"overlap":"allow","max_concurrent":0`),  // the worker's default
		rep(`"overlap":"queue"`, `"overlap":"allow","max_concurrent":-1`), // fast, then invalid
	}
	left = [][]byte{
		[]byte(strings.Replace(v, `"job"`, `"JOB"`, 1)),
		[]byte(strings.Replace(v, `"job"`, `"jo\u0062"`, 1)),
		[]byte(strings.Replace(v, `"report"`, `"rep\u006frt"`, 1)),
		[]byte(strings.Replace(v, `"v":1,`, `"v":1,"v":1,`, 1)),
		[]byte(strings.Replace(v, `"v":1`, `"v":1.0`, 1)),
		[]byte(strings.Replace(v, `"v":1`, `"v":"1"`, 1)),
		[]byte(strings.Replace(v, `"handler":"http"`, `"handler":null`, 1)),
		[]byte(strings.Replace(v, `"payload":{"url":"http://127.0.0.1:1/hook"}`, `"payload":null`, 1)),
		[]byte(strings.Replace(v, `"30s"`, `"soon"`, 1)),
		[]byte(strings.Replace(v, `"max_attempts":3`, `"max_attempts":1e1`, 1)),
		[]byte(strings.Replace(v, `"start"`, `"Start"`, 1)),
		[]byte(strings.Replace(v, `"report"`, "\"rep\xffrt\"", 1)),
		[]byte(strings.Replace(v, `"timeout"`, `"ti\u006deout"`, 1)),
		rep(`"namespace":"prod"`, `"namespace":null`),
		rep(`"namespace":"prod"`, `"Namespace":"prod"`),
		rep(`"namespace":"prod"`, `"namespace":"pr\u006fd"`),
		rep(`"namespace":"prod"`, `"namespace":"prod","namespace":"b"`),
		rep(`"namespace":"prod"`, `"namespace":7`),
		rep(`"overlap":"queue"`, `"overlap":null`),
		rep(`"overlap":"queue"`, `"overlap":"qu\u0065ue"`),
		rep(`"overlap":"queue"`, `"Overlap":"skip"`),
		rep(`"overlap":"queue"`, `"overlap":"skip","overlap":"allow"`),
		rep(`"overlap":"queue"`, `"overlap":7`),
		rep(`"overlap":"queue"`, `"max_concurrent":1e1`),
		rep(`"overlap":"queue"`, `"max_concurrent":2.5`),
		rep(`"overlap":"queue"`, `"max_concurrent":"2"`),
		rep(`"overlap":"queue"`, `"max_concurrent":1,"max_concurrent":2`),
		rep(`"overlap":"queue"`, `"Max_Concurrent":2`),
		[]byte(v + "x"),
		[]byte(v[:len(v)-1]),
		[]byte(`{"v":1,"job":"a","k\u212a":1}`),
		[]byte(`{"v":1,"jo\u212a":1}`),
		[]byte(`null`),
		[]byte(``),
		[]byte(`{"v":1,"x":[` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `]}`),
	}
	return taken, left
}

// TestFastDecoderTakesProducerOutput checks that the fast path is the one
// taken for what producers write (else the benchmark gain would be a lie)
// and declines what it must leave to encoding/json.
func TestFastDecoderTakesProducerOutput(t *testing.T) {
	taken, left := fastSeeds(t)
	for _, b := range taken {
		var w wire
		if !w.decodeFast(b, false) {
			t.Errorf("fast decoder declined %s", b)
		}
	}
	for _, b := range left {
		var w wire
		if w.decodeFast(b, false) {
			t.Errorf("fast decoder took %s", b)
		}
	}
}

// FuzzFastMatchesReference is the differential test of the fast decoder:
// whenever it takes a value, encoding/json must decode the same value
// without error into the same wire; and Unmarshal must give exactly what
// the encoding/json-only reference gives, message or error text.
func FuzzFastMatchesReference(f *testing.F) {
	taken, left := fastSeeds(f)
	for _, b := range append(taken, left...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, ref wire
		if fast.decodeFast(b, false) {
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatalf("fast decoder took a value encoding/json rejects (%v): %q", err, b)
			}
			if !reflect.DeepEqual(fast, ref) {
				t.Fatalf("fast decoder disagrees on %q:\nfast %+v\n ref %+v", b, fast, ref)
			}
		}
		m1, err1 := Unmarshal(b)
		m2, err2 := unmarshalReference(b)
		if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
			t.Fatalf("errors differ on %q:\n got %v\nwant %v", b, err1, err2)
		}
		if !reflect.DeepEqual(m1, m2) {
			t.Fatalf("messages differ on %q:\n got %+v\nwant %+v", b, m1, m2)
		}
		// Aliasing the value decodes exactly the same; the message keeps
		// what it read if the value changes afterwards only when copied.
		v := append([]byte(nil), b...)
		m3, err3 := unmarshal(v, true)
		if (err1 == nil) != (err3 == nil) || err1 != nil && err1.Error() != err3.Error() || !reflect.DeepEqual(m1, m3) {
			t.Fatalf("aliased decoding differs on %q:\n got %+v, %v\nwant %+v, %v", b, m3, err3, m1, err1)
		}
	})
}

// FromRecordAliased decodes what FromRecord decodes, sharing the value's
// memory: a copy is independent of the value, an alias is not.
func TestFromRecordAliased(t *testing.T) {
	r, err := Record("jobs", sample())
	if err != nil {
		t.Fatal(err)
	}
	copied, err := FromRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	aliased, err := FromRecordAliased(r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(copied, aliased) {
		t.Fatalf("aliased %+v, copied %+v", aliased, copied)
	}
	job := copied.Job
	field := []byte(`"job":"` + job)
	i := bytes.Index(r.Value, field)
	if i < 0 {
		t.Fatalf("%s not in the value %s", field, r.Value)
	}
	r.Value[i+len(field)-len(job)] ^= 0x20 // what FromRecordAliased's contract forbids
	if copied.Job != job || aliased.Job == job {
		t.Errorf("after changing the value: copied job %q, aliased job %q; want the copy unchanged and the alias changed", copied.Job, aliased.Job)
	}
}

// BenchmarkUnmarshalReference is the encoding/json-only decoding, for
// comparison with BenchmarkFromRecord.
func BenchmarkUnmarshalReference(b *testing.B) {
	r, err := Record("jobs", sample())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(r.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unmarshalReference(r.Value); err != nil {
			b.Fatal(err)
		}
	}
}

// Decoding a window as the worker does (FromRecordAliased of a record as
// the producer writes it) allocates the Message and its payload's copy:
// the decoder's state stays on the stack (the no-op burst row, test/perf
// BenchmarkBurst; it was 6 objects).
func TestFromRecordAliasedAllocatesTheMessage(t *testing.T) {
	r, err := Record("jobs", sample())
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := FromRecordAliased(r); err != nil {
			t.Fatal(err)
		}
	}); n != 2 {
		t.Errorf("FromRecordAliased allocates %.0f objects, want 2 (the Message and its payload)", n)
	}
}
