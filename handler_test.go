package kjob_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/kjobtest"
)

func job(name string) *kjob.Job {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return kjobtest.NewJob(kjobtest.JobOptions{
		Window: kjobtest.Window{Job: "j", Handler: name, Start: start, End: start.Add(time.Minute),
			Payload: `{"n":1}`, Timeout: 50 * time.Millisecond, MaxAttempts: 3},
		Attempt: 2, FencingToken: 41, Worker: "w1", Partition: 3, Offset: 99,
	})
}

func TestMuxRoutesAndMiddlewareOrder(t *testing.T) {
	var trace []string
	mux := kjob.NewMux()
	mw := func(tag string) kjob.Middleware {
		return func(next kjob.Handler) kjob.Handler {
			return kjob.HandlerFunc(func(ctx context.Context, j *kjob.Job) error {
				trace = append(trace, tag)
				return next.HandleJob(ctx, j)
			})
		}
	}
	mux.Use(mw("outer"), mw("inner"))
	mux.HandleFunc("a", func(ctx context.Context, j *kjob.Job) error {
		trace = append(trace, "a:"+j.ID())
		return nil
	})
	if err := mux.HandleJob(context.Background(), job("a")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(trace, ","); got != "outer,inner,a:j@2026-11-22T10:00:00Z" {
		t.Fatalf("trace = %s", got)
	}
	if !mux.Has("a") || mux.Has("b") || len(mux.Names()) != 1 {
		t.Fatalf("Has/Names wrong: %v", mux.Names())
	}
}

func TestMuxUnknownHandler(t *testing.T) {
	mux := kjob.NewMux()
	mux.HandleFunc("log", func(context.Context, *kjob.Job) error { return nil })
	err := mux.HandleJob(context.Background(), job("nope"))
	if !errors.Is(err, kjob.ErrUnknownHandler) || !errors.Is(err, kjob.ErrPermanent) {
		t.Fatalf("err = %v", err)
	}
	want := `handler "nope" (job j): unknown handler: register it with Mux.Handle; known: [log]: permanent failure`
	if err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}

func TestMuxHandlePanicsOnDuplicate(t *testing.T) {
	mux := kjob.NewMux()
	mux.HandleFunc("a", func(context.Context, *kjob.Job) error { return nil })
	defer func() {
		if r := recover(); r == nil || r != "kjob: handler a registered twice" {
			t.Fatalf("recover = %v", r)
		}
	}()
	mux.HandleFunc("a", func(context.Context, *kjob.Job) error { return nil })
}

func TestRecover(t *testing.T) {
	h := kjob.Recover()(kjob.HandlerFunc(func(context.Context, *kjob.Job) error { panic("boom") }))
	err := h.HandleJob(context.Background(), job("a"))
	var pe *kjob.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("err = %v", err)
	}
}

func TestTimeoutUsesJobTimeout(t *testing.T) {
	h := kjob.Timeout(0)(kjob.HandlerFunc(func(ctx context.Context, j *kjob.Job) error {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > j.Timeout() {
			t.Errorf("deadline %v ok=%v, want within %v", dl, ok, j.Timeout())
		}
		<-ctx.Done()
		return ctx.Err()
	}))
	if err := h.HandleJob(context.Background(), job("a")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestJobAccessors(t *testing.T) {
	j := job("a")
	if j.Attempt() != 2 || j.FencingToken() != 41 || j.Worker() != "w1" || j.Partition() != 3 || j.Offset() != 99 ||
		j.Name() != "j" || j.HandlerName() != "a" || j.Trigger() != kjob.TriggerSchedule || j.MaxAttempts() != 3 {
		t.Fatalf("accessors wrong: %s %s %s %s attempt %d of %d, token %d, worker %s, %d/%d",
			j.ID(), j.Name(), j.HandlerName(), j.Trigger(), j.Attempt(), j.MaxAttempts(), j.FencingToken(), j.Worker(), j.Partition(), j.Offset())
	}
	if v := j.ScheduleVersion(); v != 0 {
		t.Fatalf("ScheduleVersion of a window without one = %d, want 0", v)
	}
	if v := kjobtest.NewJob(kjobtest.JobOptions{Window: kjobtest.Window{ScheduleVersion: 12}}).ScheduleVersion(); v != 12 {
		t.Fatalf("ScheduleVersion = %d, want the record's 12", v)
	}
	p := j.Payload()
	p[0] = 'X' // a copy: the job stays read-only
	var v struct{ N int }
	if err := j.DecodePayload(&v); err != nil || v.N != 1 {
		t.Fatalf("DecodePayload = %v, %+v", err, v)
	}
}
