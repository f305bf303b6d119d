package kjob

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type fuzzArgs struct {
	A int               `json:"a"`
	B []string          `json:"b"`
	C map[string]bool   `json:"c"`
	D struct{ E *int }  `json:"d"`
	F json.RawMessage   `json:"f"`
	G map[string][]uint `json:"g"`
}

// Whatever the payload, decoding never panics, fails only with a
// *PayloadError wrapping ErrPermanent whose field is a path in the
// payload, and walk's spans are the document's values.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x"}`, `{"b":[1,"2",{}]}`, `{"c":{"k":1}}`, `{"d":{"E":"x"}}`,
		`{"g":{"x":[1,-1]}}`, `{"a":1,"a":[]}`, `[1]`, `{"a":`, ` { "f" : [ {"x": "y\"z"} ] , "zz" : null } `, `"s"`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, payload []byte, strict bool) {
		_, err := decodeArgs[fuzzArgs](payload, decodeConfig{disallowUnknown: strict})
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPermanent) || !strings.HasPrefix(pe.Field, "payload") {
				t.Fatalf("err = %#v", err)
			}
		}
		if !json.Valid(payload) {
			return
		}
		for _, n := range walk(payload) {
			if n.start < 0 || n.end > len(payload) || n.start >= n.end || !json.Valid(payload[n.start:n.end]) {
				t.Fatalf("node %+v of %q: span is not a JSON value", n, payload)
			}
		}
	})
}

// BenchmarkDecodeArgsError: a payload that fails to decode (an array
// element of the wrong type), the path that walks the payload to name the
// value (issue 24: not a fast path, see walk).
func BenchmarkDecodeArgsError(b *testing.B) {
	type lim struct {
		Max int `json:"max"`
	}
	type args struct {
		Team  string   `json:"team"`
		Hosts []string `json:"hosts"`
		L     lim      `json:"limits"`
	}
	p := []byte(`{"team":"billing","hosts":["a","b","c",4],"limits":{"max":5}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeArgs[args](p, decodeConfig{}); err == nil {
			b.Fatal("no error")
		}
	}
}
