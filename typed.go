package kjob

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Typed returns a Handler that decodes each job's payload (a JSON object)
// into a new value of type T and calls f with it, River-style:
//
//	type ReportArgs struct {
//		Team    string `json:"team"`
//		Retries int    `json:"retries"`
//	}
//
//	mux.Handle("report", kjob.Typed(func(ctx context.Context, j *kjob.Job, args ReportArgs) error {
//		return sendReport(ctx, args.Team, j.Window())
//	}))
//
// A payload that does not decode into T fails the attempt with a
// *PayloadError, which wraps ErrPermanent: the worker dead-letters the
// window at once, since no retry can change the payload, and the dead
// letter's reason names the field, its value and the type wanted, e.g.
// `payload.retries: "three": want int`. See DecodeArgs for the rules
// (unknown fields, validation).
//
// Why a function and not a generic Job[T] (River's river.Job[T] embeds the
// job row and adds Args): kjob's *Job stays the one description of an
// attempt that middleware, logs and the worker share, so Typed hands f the
// same *Job every other handler gets plus the decoded args, and a typed
// handler is an ordinary Handler that Mux, middleware and tests take as
// they are. It is a function rather than a Mux method because Go methods
// cannot have type parameters; Mux.Handle registers its result.
func Typed[T any](f func(ctx context.Context, job *Job, args T) error, opts ...DecodeOption) Handler {
	if f == nil {
		panic("kjob: Typed with nil function")
	}
	cfg := decodeConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	return HandlerFunc(func(ctx context.Context, job *Job) error {
		args, err := decodeArgs[T](job.in.RawPayload(), cfg)
		if err != nil {
			return err
		}
		return f(ctx, job, args)
	})
}

// DecodeArgs decodes job's payload into a new T as Typed does, for a
// handler that decodes by itself. The error, if any, is a *PayloadError
// (which wraps ErrPermanent).
//
// The rules:
//   - The payload must be a JSON object (the worker never delivers
//     anything else; an empty payload decodes as {}). It is decoded with
//     encoding/json, so T's json tags, case-insensitive key matching and
//     json.Unmarshaler implementations apply.
//   - A value of the wrong type is reported with the JSON path of its key
//     in the payload, the value (shortened) and the Go type wanted:
//     `payload.limits.max: "ten": want int`.
//   - Keys that match no field of T are ignored, as encoding/json does,
//     unless DisallowUnknownFields is given. Ignoring them is the default
//     because the payload comes from the schedules file, which the
//     producer deployment reads: a field added there reaches workers
//     still running the previous version during a rolling upgrade, and
//     refusing it would dead-letter their windows. Turn it on to catch
//     misspelt keys where schedules and workers change together.
//   - If T or *T has a method Validate() error, it is called after a
//     successful decode; an error from it is a *PayloadError too (the
//     window is dead-lettered: the payload will not become valid by
//     retrying), whose text says it came from validation and wraps the
//     returned error.
func DecodeArgs[T any](job *Job, opts ...DecodeOption) (T, error) {
	cfg := decodeConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	return decodeArgs[T](job.in.RawPayload(), cfg)
}

// DecodeOption changes how Typed and DecodeArgs decode a payload.
type DecodeOption func(*decodeConfig)

type decodeConfig struct {
	disallowUnknown bool
}

// DisallowUnknownFields makes a payload key that matches no field of T
// (at any depth) a decode error, as json.Decoder.DisallowUnknownFields
// does: `payload.teem: "billing": unknown field (main.Args has no field
// "teem")`. Off by default; see DecodeArgs for why.
func DisallowUnknownFields() DecodeOption {
	return func(c *decodeConfig) { c.disallowUnknown = true }
}

// Validator is implemented by payload types that check themselves: Typed
// and DecodeArgs call Validate after decoding (on T, or on *T if the
// method has a pointer receiver).
type Validator interface {
	// Validate reports what is wrong with the decoded payload, or nil.
	Validate() error
}

// PayloadError says why a job's payload could not be decoded into a
// typed handler's arguments, or why they failed validation. It wraps
// ErrPermanent (and Err), so the worker dead-letters the window with
// Error() as the reason.
type PayloadError struct {
	// Field is the JSON path of the offending value in the payload,
	// "payload" for the payload as a whole: "payload.retries",
	// "payload.limits.max", "payload.hosts[2]".
	Field string
	// Value is the offending value as JSON text, shortened to about 80
	// bytes; empty when there is no single value to show (validation,
	// invalid JSON).
	Value string
	// Reason says what was wanted: "want int", "unknown field (...)",
	// "failed validation (...): ...".
	Reason string
	// Err is the underlying error: the *json.UnmarshalTypeError,
	// *json.SyntaxError, the error of a json.Unmarshaler, or the error
	// Validate returned.
	Err error
}

// Error is "<field>: <value>: <reason>", or "<field>: <reason>" without a
// value.
func (e *PayloadError) Error() string {
	if e.Value == "" {
		return e.Field + ": " + e.Reason
	}
	return e.Field + ": " + e.Value + ": " + e.Reason
}

// Unwrap returns ErrPermanent and Err (if set), so errors.Is(err,
// ErrPermanent) holds and errors.As reaches the cause.
func (e *PayloadError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrPermanent}
	}
	return []error{ErrPermanent, e.Err}
}

// maxValueText bounds PayloadError.Value.
const maxValueText = 80

func decodeArgs[T any](payload []byte, cfg decodeConfig) (T, error) {
	var args T
	data := bytes.TrimSpace(payload)
	if len(data) == 0 {
		data = []byte("{}")
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return args, &PayloadError{Field: "payload", Reason: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se), Err: err}
		}
		return args, &PayloadError{Field: "payload", Reason: "invalid JSON", Err: err}
	}
	typ := typeName[T]()
	if data[0] != '{' {
		return args, &PayloadError{Field: "payload", Value: shorten(data), Reason: "want a JSON object for " + typ}
	}
	if err := unmarshal(data, &args, cfg); err != nil {
		return args, explainDecode[T](data, err, cfg, typ)
	}
	if err := validate(&args); err != nil {
		return args, &PayloadError{Field: "payload", Reason: fmt.Sprintf("failed validation (%s.Validate): %v", typ, err), Err: err}
	}
	return args, nil
}

// unmarshal decodes data, a valid JSON value, into v.
func unmarshal(data []byte, v any, cfg decodeConfig) error {
	if !cfg.disallowUnknown {
		return json.Unmarshal(data, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// validate calls Validate on *args or args if either has it.
func validate[T any](args *T) error {
	if v, ok := any(*args).(Validator); ok {
		if rv := reflect.ValueOf(*args); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil
		}
		return v.Validate()
	}
	if v, ok := any(args).(Validator); ok {
		return v.Validate()
	}
	return nil
}

func typeName[T any]() string {
	if t := reflect.TypeFor[T](); t != nil {
		return t.String()
	}
	return "interface {}"
}

// explainDecode turns err, from decoding data into a T, into a
// *PayloadError naming the field.
func explainDecode[T any](data []byte, err error, cfg decodeConfig, typ string) *PayloadError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return typeError(data, te)
	}
	reason := strings.TrimPrefix(err.Error(), "json: ")
	unknown, isUnknown := unknownField(err)
	// A json.Unmarshaler's error and an unknown field carry no position:
	// find the top-level key whose value alone fails the same way.
	n, ok := failingKey[T](data, cfg)
	if !ok {
		return &PayloadError{Field: "payload", Reason: reason, Err: err}
	}
	if isUnknown {
		if n.key == unknown && n.depth == 1 {
			return &PayloadError{Field: n.path, Value: shorten(data[n.start:n.end]), Err: err,
				Reason: fmt.Sprintf("unknown field (%s has no field %q; DisallowUnknownFields is on)", typ, unknown)}
		}
		// Nested: the first key of that name inside the failing value.
		for _, m := range walk(data) {
			if m.start >= n.start && m.end <= n.end && m.depth > 1 && m.key == unknown {
				return &PayloadError{Field: m.path, Value: shorten(data[m.start:m.end]), Err: err,
					Reason: "unknown field (DisallowUnknownFields is on)"}
			}
		}
	}
	return &PayloadError{Field: n.path, Value: shorten(data[n.start:n.end]), Reason: reason, Err: err}
}

// typeError describes a value of the wrong JSON type. encoding/json
// reports the Go field path (which names embedded structs and not array
// indexes) and the end offset of a scalar value or the offset just past
// the opening brace or bracket of an object or array; the payload's own
// path and text are found from that offset.
func typeError(data []byte, te *json.UnmarshalTypeError) *PayloadError {
	want := "want " + te.Type.String()
	composite := te.Value == "object" || te.Value == "array"
	off := int(te.Offset)
	for _, n := range walk(data) {
		if composite && n.composite && n.start == off-1 || !composite && !n.composite && n.end == off {
			return &PayloadError{Field: n.path, Value: shorten(data[n.start:n.end]), Reason: want, Err: te}
		}
	}
	field := "payload"
	if te.Field != "" {
		field += "." + te.Field
	}
	return &PayloadError{Field: field, Value: te.Value, Reason: want, Err: te}
}

// unknownField returns the key of a DisallowUnknownFields error.
func unknownField(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	key, uerr := strconv.Unquote(rest)
	return key, uerr == nil
}

// failingKey returns the first top-level member of data, an object, whose
// value alone does not decode into a T, if T is a struct (or pointer to
// one) that decodes field by field (no UnmarshalJSON or UnmarshalText of
// its own).
func failingKey[T any](data []byte, cfg decodeConfig) (node, bool) {
	t := reflect.TypeFor[T]()
	if t == nil {
		return node{}, false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return node{}, false
	}
	pt := reflect.PointerTo(t)
	for _, u := range []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()} {
		if t.Implements(u) || pt.Implements(u) {
			return node{}, false
		}
	}
	for _, n := range walk(data) {
		if n.depth != 1 {
			continue
		}
		key, _ := json.Marshal(n.key)
		one := make([]byte, 0, len(key)+n.end-n.start+3)
		one = append(append(append(append(one, '{'), key...), ':'), data[n.start:n.end]...)
		one = append(one, '}')
		if unmarshal(one, reflect.New(t).Interface(), cfg) != nil {
			return n, true
		}
	}
	return node{}, false
}

// shorten returns b, JSON text, cut to about maxValueText bytes.
func shorten(b []byte) string {
	if len(b) <= maxValueText {
		return string(b)
	}
	cut := maxValueText
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "..."
}

// node is one value in a JSON document: its path from the payload
// ("payload.a.b[2]"), its key in its object (if any), its depth (1 for a
// member of the payload) and its byte span.
type node struct {
	path       string
	key        string
	depth      int
	start, end int
	composite  bool
}

// walk is not a fast path (issue 24): it runs only when a payload fails
// to decode, and makes that error precise. With json.UnmarshalTypeError
// alone, 18 cases of TestDecodeArgsErrors give a less precise message
// (`payload.hosts: number: want string` for `payload.hosts[1]: 2: want
// string`, the Go name of an embedded struct, no map key, no value, no
// position for an unknown field or a json.Unmarshaler's error). It costs
// 10-20 µs and 101 allocations per failed decode against 2.2-3.5 µs and
// 16 (BenchmarkDecodeArgsError, load average 5-6, 2026-11-28), on a
// window that is dead-lettered; no benchmark row runs it.
//
// walk lists the values of data, a valid JSON document, in document
// order (an object or array before its members).
func walk(data []byte) []node {
	type frame struct {
		object    bool
		path      string
		key       string
		index     int
		expectKey bool
		node      int // index of the container's own node
	}
	var (
		nodes []node
		stack []*frame
	)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil { // io.EOF: data is valid JSON, so it ended
			return nodes
		}
		after := int(dec.InputOffset())
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			nodes[top.node].end = after
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expectKey = true
			}
			continue
		}
		if top != nil && top.object && top.expectKey {
			top.key, _ = tok.(string)
			top.expectKey = false
			continue
		}
		n := node{path: "payload", depth: len(stack)}
		switch {
		case top == nil:
		case top.object:
			n.path, n.key = top.path+"."+top.key, top.key
			top.expectKey = true
		default:
			n.path = top.path + "[" + strconv.Itoa(top.index) + "]"
			top.index++
		}
		if d, ok := tok.(json.Delim); ok { // '{' or '['
			n.start, n.end, n.composite = after-1, -1, true
			stack = append(stack, &frame{object: d == '{', path: n.path, expectKey: d == '{', node: len(nodes)})
			nodes = append(nodes, n)
			continue
		}
		n.start, n.end = before, after
		for n.start < after && strings.IndexByte(" \t\r\n,:", data[n.start]) >= 0 {
			n.start++
		}
		nodes = append(nodes, n)
	}
}
