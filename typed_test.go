package kjob

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

type limits struct {
	Max int `json:"max"`
}

type base struct {
	Level int `json:"level"`
}

type reportArgs struct {
	base
	Team    string         `json:"team"`
	Retries int            `json:"retries"`
	Limits  limits         `json:"limits"`
	Hosts   []string       `json:"hosts"`
	At      time.Time      `json:"at"`
	Labels  map[string]int `json:"labels"`
}

var errNoTeam = errors.New("team is required")

// validated checks itself with a value receiver.
type validated struct {
	Team string `json:"team"`
}

func (v validated) Validate() error {
	if v.Team == "" {
		return errNoTeam
	}
	return nil
}

// ptrValidated checks itself with a pointer receiver.
type ptrValidated struct {
	Team string `json:"team"`
}

func (v *ptrValidated) Validate() error {
	if v.Team == "" {
		return errNoTeam
	}
	return nil
}

// custom decodes itself and refuses everything.
type custom struct{}

func (*custom) UnmarshalJSON([]byte) error { return errors.New("custom: not today") }

// jobWith builds a job of handler "h" whose payload is exactly payload
// (nil for none).
func jobWith(payload []byte) *Job {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return jobOf(handler.NewJob(&jobmsg.Message{
		V: 1, ID: jobmsg.WindowID("j", start), Job: "j", Handler: "h",
		Window:  jobmsg.Window{Start: start, End: start.Add(time.Minute)},
		Payload: payload, Trigger: jobmsg.TriggerSchedule,
		Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Second), MaxAttempts: 3},
	}, 1, 7, "w1", 0, 0))
}

func decodeErr[T any](payload string, opts ...DecodeOption) error {
	var p []byte
	if payload != "" {
		p = []byte(payload)
	}
	_, err := DecodeArgs[T](jobWith(p), opts...)
	return err
}

func TestDecodeArgsErrors(t *testing.T) {
	long := `"` + strings.Repeat("a", 100) + `"`
	strict := DisallowUnknownFields()
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"wrong type", decodeErr[reportArgs](`{"team":"billing","retries":"three"}`),
			`payload.retries: "three": want int`},
		{"key as written, any case", decodeErr[reportArgs](`{"Retries": 1.5}`),
			`payload.Retries: 1.5: want int`},
		{"spaces and newlines", decodeErr[reportArgs]("{ \"retries\" :\n\t\"three\" }"),
			`payload.retries: "three": want int`},
		{"nested", decodeErr[reportArgs](`{"limits":{"max":true}}`),
			`payload.limits.max: true: want int`},
		{"array element", decodeErr[reportArgs](`{"hosts":["a",2,"c"]}`),
			`payload.hosts[1]: 2: want string`},
		{"object for struct wanted as array", decodeErr[reportArgs](`{"limits":[1,2]}`),
			`payload.limits: [1,2]: want kjob.limits`},
		{"object where int wanted", decodeErr[reportArgs](`{"retries":{"n":3}}`),
			`payload.retries: {"n":3}: want int`},
		{"embedded struct field", decodeErr[reportArgs](`{"level":"x"}`),
			`payload.level: "x": want int`},
		{"map value", decodeErr[reportArgs](`{"labels":{"a":1,"b":"x"}}`),
			`payload.labels.b: "x": want int`},
		{"duplicate key, the bad one", decodeErr[reportArgs](`{"retries":1,"retries":"x"}`),
			`payload.retries: "x": want int`},
		{"number out of range", decodeErr[reportArgs](`{"retries":1e400}`),
			`payload.retries: 1e400: want int`},
		{"long value shortened", decodeErr[reportArgs](`{"retries":` + long + `}`),
			`payload.retries: "` + strings.Repeat("a", 79) + `...: want int`},
		{"first of two errors", decodeErr[reportArgs](`{"retries":"x","team":5}`),
			`payload.retries: "x": want int`},
		{"json.Unmarshaler's error", decodeErr[reportArgs](`{"team":"t","at":"soon"}`),
			`payload.at: "soon": parsing time "soon" as "2006-01-02T15:04:05Z07:00": cannot parse "soon" as "2006"`},
		{"type that decodes itself", decodeErr[custom](`{"a":1}`),
			`payload: custom: not today`},
		{"map type", decodeErr[map[string]int](`{"a":1,"b":"x"}`),
			`payload.b: "x": want int`},
		{"pointer type", decodeErr[*reportArgs](`{"retries":"three"}`),
			`payload.retries: "three": want int`},
		{"not an object", decodeErr[reportArgs](`[1]`),
			`payload: [1]: want a JSON object for kjob.reportArgs`},
		{"invalid JSON", decodeErr[reportArgs](`{"team":`),
			`payload: invalid JSON at byte 8: unexpected end of JSON input`},
		{"unknown field ignored by default", decodeErr[reportArgs](`{"teem":"billing"}`), ``},
		{"unknown field", decodeErr[reportArgs](`{"team":"a","teem":"billing"}`, strict),
			`payload.teem: "billing": unknown field (kjob.reportArgs has no field "teem"; DisallowUnknownFields is on)`},
		{"nested unknown field", decodeErr[reportArgs](`{"team":"a","limits":{"max":1,"mx":2}}`, strict),
			`payload.limits.mx: 2: unknown field (DisallowUnknownFields is on)`},
		{"known fields pass strict", decodeErr[reportArgs](`{"team":"a","limits":{"max":1},"level":2}`, strict), ``},
		{"validation", decodeErr[validated](`{"team":""}`),
			`payload: failed validation (kjob.validated.Validate): team is required`},
		{"validation, pointer receiver", decodeErr[ptrValidated](`{}`),
			`payload: failed validation (kjob.ptrValidated.Validate): team is required`},
		{"validation, pointer type", decodeErr[*validated](`{}`),
			`payload: failed validation (*kjob.validated.Validate): team is required`},
		{"validation passes", decodeErr[validated](`{"team":"billing"}`), ``},
		{"no payload is {}", decodeErr[reportArgs](``), ``},
		{"no payload still validated", decodeErr[validated](``),
			`payload: failed validation (kjob.validated.Validate): team is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				if tc.err != nil {
					t.Fatalf("err = %v, want none", tc.err)
				}
				return
			}
			if tc.err == nil {
				t.Fatalf("err = nil, want %q", tc.want)
			}
			if got := tc.err.Error(); got != tc.want {
				t.Fatalf("err = %q\nwant  %q", got, tc.want)
			}
			var pe *PayloadError
			if !errors.As(tc.err, &pe) || !errors.Is(tc.err, ErrPermanent) {
				t.Fatalf("err %v: want a *PayloadError wrapping ErrPermanent", tc.err)
			}
		})
	}
}

// The causes stay reachable: the JSON error for a decode failure, the
// type's own error for a validation failure.
func TestPayloadErrorUnwrap(t *testing.T) {
	err := decodeErr[reportArgs](`{"retries":"three"}`)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field != "retries" {
		t.Fatalf("err %v: want a *json.UnmarshalTypeError for retries", err)
	}
	err = decodeErr[validated](`{}`)
	if !errors.Is(err, errNoTeam) || !errors.Is(err, ErrPermanent) {
		t.Fatalf("err %v: want errNoTeam and ErrPermanent", err)
	}
	err = decodeErr[reportArgs](`{"team":`)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("err %v: want a *json.SyntaxError", err)
	}
	pe := &PayloadError{Field: "payload", Reason: "r"}
	if !errors.Is(pe, ErrPermanent) || pe.Error() != "payload: r" {
		t.Fatalf("PayloadError without Err or Value: %q", pe)
	}
}

func TestTyped(t *testing.T) {
	var got []reportArgs
	var jobs []*Job
	errBusy := errors.New("downstream busy")
	mux := NewMux()
	mux.Handle("h", Typed(func(ctx context.Context, j *Job, args reportArgs) error {
		got = append(got, args)
		jobs = append(jobs, j)
		if args.Team == "busy" {
			return errBusy
		}
		return nil
	}))

	j := jobWith([]byte(`{"team":"billing","retries":2,"limits":{"max":5},"hosts":["a"],"level":1}`))
	if err := mux.HandleJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	want := reportArgs{base: base{Level: 1}, Team: "billing", Retries: 2, Limits: limits{Max: 5}, Hosts: []string{"a"}}
	if len(got) != 1 || got[0].Team != want.Team || got[0].Retries != 2 || got[0].Limits != want.Limits ||
		len(got[0].Hosts) != 1 || got[0].Level != 1 || jobs[0] != j {
		t.Fatalf("f got %+v with job %p, want %+v with %p", got, jobs, want, j)
	}

	// A bad payload never reaches f, and fails permanently.
	err := mux.HandleJob(context.Background(), jobWith([]byte(`{"retries":"three"}`)))
	if len(got) != 1 || !errors.Is(err, ErrPermanent) || err.Error() != `payload.retries: "three": want int` {
		t.Fatalf("bad payload: f ran %d times, err = %v", len(got), err)
	}

	// f's own error is returned as it is: retried, not permanent.
	err = mux.HandleJob(context.Background(), jobWith([]byte(`{"team":"busy"}`)))
	if err != errBusy {
		t.Fatalf("f's error = %v, want %v unchanged", err, errBusy)
	}
}

func TestTypedStrict(t *testing.T) {
	ran := false
	h := Typed(func(context.Context, *Job, limits) error { ran = true; return nil }, DisallowUnknownFields())
	err := h.HandleJob(context.Background(), jobWith([]byte(`{"max":1,"min":0}`)))
	if ran || err == nil || err.Error() != `payload.min: 0: unknown field (kjob.limits has no field "min"; DisallowUnknownFields is on)` {
		t.Fatalf("ran %v, err = %v", ran, err)
	}
}

func TestTypedNilPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Typed(nil) did not panic")
		}
	}()
	Typed[reportArgs](nil)
}
