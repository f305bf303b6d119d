package kjobtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/kjobtest"
)

func TestNewJobDefaults(t *testing.T) {
	j := kjobtest.NewJob(kjobtest.JobOptions{})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"ID", j.ID(), "test-job@2026-01-01T00:00:00Z"},
		{"Name", j.Name(), kjobtest.DefaultJob},
		{"HandlerName", j.HandlerName(), kjobtest.DefaultJob},
		{"Window.Start", j.Window().Start, start},
		{"Window.End", j.Window().End, start.Add(kjobtest.DefaultWindowLength)},
		{"ScheduledAt", j.ScheduledAt(), start},
		{"PublishedAt", j.PublishedAt(), start},
		{"Trigger", j.Trigger(), kjob.TriggerSchedule},
		{"Payload", string(j.Payload()), "{}"},
		{"Attempt", j.Attempt(), 1},
		{"MaxAttempts", j.MaxAttempts(), kjobtest.DefaultMaxAttempts},
		{"Timeout", j.Timeout(), kjobtest.DefaultTimeout},
		{"FencingToken", j.FencingToken(), int64(1)},
		{"Worker", j.Worker(), kjobtest.DefaultWorker},
		{"ScheduleVersion", j.ScheduleVersion(), int64(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestNewJobFields(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	j := kjobtest.NewJob(kjobtest.JobOptions{
		Window: kjobtest.Window{
			Job: "report", Handler: "mail", Start: start, End: start.Add(time.Hour),
			Trigger: kjob.TriggerCatchup, Payload: map[string]any{"team": "billing"},
			Timeout: time.Minute, MaxAttempts: 5, Backoff: time.Second, Overlap: "skip", ScheduleVersion: 7,
		},
		Attempt: 4, FencingToken: 99, Worker: "w-7", Partition: 3, Offset: 12,
	})
	if j.ID() != "report@2026-11-22T09:00:00Z" || j.Name() != "report" || j.HandlerName() != "mail" ||
		!j.Window().Start.Equal(start) || j.Window().Start.Location() != time.UTC || j.Window().End.Sub(j.Window().Start) != time.Hour ||
		j.Trigger() != kjob.TriggerCatchup || string(j.Payload()) != `{"team":"billing"}` || j.Timeout() != time.Minute ||
		j.MaxAttempts() != 5 || j.Attempt() != 4 || j.FencingToken() != 99 || j.Worker() != "w-7" ||
		j.Partition() != 3 || j.Offset() != 12 || j.ScheduleVersion() != 7 {
		t.Fatalf("job %s: window %+v, trigger %s, payload %s, timeout %v, max attempts %d (attempt %d, token %d, worker %s, %d/%d), schedule version %d",
			j.ID(), j.Window(), j.Trigger(), j.Payload(), j.Timeout(), j.MaxAttempts(), j.Attempt(), j.FencingToken(), j.Worker(), j.Partition(), j.Offset(), j.ScheduleVersion())
	}
	for _, tc := range []struct {
		trigger kjob.Trigger
		id      string
	}{
		{kjob.TriggerManual, "test-job@2026-01-01T00:00:00Z#manual-kjobtest"},
		{kjob.TriggerBackfill, "test-job@2026-01-01T00:00:00Z#backfill"},
	} {
		if id := kjobtest.NewJob(kjobtest.JobOptions{Window: kjobtest.Window{Trigger: tc.trigger}}).ID(); id != tc.id {
			t.Errorf("%s window id = %q, want %q", tc.trigger, id, tc.id)
		}
	}
	if id := kjobtest.NewJob(kjobtest.JobOptions{Window: kjobtest.Window{Job: "r", ID: "r@custom"}}).ID(); id != "r@custom" {
		t.Errorf("explicit id = %q", id)
	}
}

func TestNewJobPayloads(t *testing.T) {
	type args struct {
		Team string `json:"team"`
	}
	for _, tc := range []struct {
		name    string
		payload any
		want    string
	}{
		{"struct", args{Team: "a"}, `{"team":"a"}`},
		{"pointer", &args{Team: "a"}, `{"team":"a"}`},
		{"map", map[string]int{"n": 1}, `{"n":1}`},
		{"string, compacted as on the wire", `{"team": "a"}`, `{"team":"a"}`},
		{"bytes", []byte(`{"team":"a"}`), `{"team":"a"}`},
		{"raw", json.RawMessage(`{"team":"a"}`), `{"team":"a"}`},
		{"nil", nil, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := kjobtest.NewJob(kjobtest.JobOptions{Window: kjobtest.Window{Payload: tc.payload}})
			if got := string(j.Payload()); got != tc.want {
				t.Fatalf("payload = %s, want %s", got, tc.want)
			}
		})
	}
}

// An invalid job is a mistake in the test: NewJob panics naming the field.
func TestNewJobPanics(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		o    kjobtest.JobOptions
		want string
	}{
		{"payload array", kjobtest.JobOptions{Window: kjobtest.Window{Payload: []int{1}}},
			`kjobtest.NewJob: jobmsg: payload: "[1]": must be a JSON object`},
		{"payload text not JSON", kjobtest.JobOptions{Window: kjobtest.Window{Payload: `{"team":`}},
			`kjobtest.NewJob: jobmsg: payload: "{\"team\":": must be a JSON object`},
		{"payload not encodable", kjobtest.JobOptions{Window: kjobtest.Window{Payload: map[string]any{"c": make(chan int)}}},
			`kjobtest.NewJob: Window.Payload (map[string]interface {}): json: unsupported type: chan int; use a value encoding/json can encode to an object, or JSON text`},
		{"end before start", kjobtest.JobOptions{Window: kjobtest.Window{Start: start, End: start.Add(-time.Second)}},
			`kjobtest.NewJob: jobmsg: window.end: "2025-12-31T23:59:59Z": must be after window.start 2026-01-01T00:00:00Z`},
		{"unknown trigger", kjobtest.JobOptions{Window: kjobtest.Window{Trigger: "cron"}},
			`kjobtest.NewJob: jobmsg: trigger: "cron": want one of schedule, catchup, manual, backfill`},
		{"id of another job", kjobtest.JobOptions{Window: kjobtest.Window{Job: "a", ID: "b@1"}},
			`kjobtest.NewJob: jobmsg: id: "b@1": must start with the job name and '@' ("a@")`},
		{"attempt above max", kjobtest.JobOptions{Attempt: 4},
			`kjobtest.NewJob: JobOptions.Attempt = 4 is above Window.MaxAttempts = 3; a worker never makes that attempt (raise MaxAttempts)`},
		{"negative attempt", kjobtest.JobOptions{Attempt: -1},
			`kjobtest.NewJob: JobOptions.Attempt = -1; attempts count from 1 (0 picks 1)`},
		{"negative token", kjobtest.JobOptions{FencingToken: -2},
			`kjobtest.NewJob: JobOptions.FencingToken = -2; tokens count from 1 (0 picks 1)`},
		{"overlap", kjobtest.JobOptions{Window: kjobtest.Window{Overlap: "never"}},
			`kjobtest.NewJob: jobmsg: policy.overlap: "never": want one of queue (the default), skip, latest, replace, allow`},
		{"negative schedule version", kjobtest.JobOptions{Window: kjobtest.Window{ScheduleVersion: -1}},
			`kjobtest.NewJob: jobmsg: schedule_version: "-1": want the spec's version: 1 or more (0 or absent when unknown)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := catch(func() { kjobtest.NewJob(tc.o) }); msg != tc.want {
				t.Fatalf("panic = %q\nwant    %q", msg, tc.want)
			}
		})
	}
}

// A job from NewJob goes through a Mux and a typed handler as a worker's
// would, including a bad payload's permanent error.
func TestNewJobWithTypedHandler(t *testing.T) {
	var got reportArgs
	mux := kjob.NewMux()
	mux.Handle("report", kjob.Typed(func(_ context.Context, j *kjob.Job, a reportArgs) error {
		got = a
		return nil
	}))
	j := kjobtest.NewJob(kjobtest.JobOptions{Window: kjobtest.Window{Job: "report", Payload: reportArgs{Team: "billing", Retries: 1}}})
	if err := mux.HandleJob(context.Background(), j); err != nil || got != (reportArgs{Team: "billing", Retries: 1}) {
		t.Fatalf("err %v, args %+v", err, got)
	}
	j = kjobtest.NewJob(kjobtest.JobOptions{Window: kjobtest.Window{Job: "report", Payload: `{"retries":"three"}`}})
	err := mux.HandleJob(context.Background(), j)
	if !errors.Is(err, kjob.ErrPermanent) || !strings.Contains(err.Error(), `payload.retries: "three": want int`) {
		t.Fatalf("err = %v", err)
	}
}
