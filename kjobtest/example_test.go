package kjobtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/kjobtest"
)

// ReportArgs is the payload of the report handler in the examples.
type ReportArgs struct {
	Team    string `json:"team"`
	Retries int    `json:"retries"`
}

// A unit test of a handler: build the Job a worker would pass it, and call
// the handler (here through the Mux it is registered on).
func ExampleNewJob() {
	mux := kjob.NewMux()
	mux.Handle("report", kjob.Typed(func(ctx context.Context, j *kjob.Job, args ReportArgs) error {
		w := j.Window()
		fmt.Printf("%s: report for %s from %s to %s, attempt %d of %d, fencing token %d\n",
			j.ID(), args.Team, w.Start.Format("15:04"), w.End.Format("15:04"), j.Attempt(), j.MaxAttempts(), j.FencingToken())
		return nil
	}))

	j := kjobtest.NewJob(kjobtest.JobOptions{
		Window:       kjobtest.Window{Job: "report", Payload: ReportArgs{Team: "billing"}},
		Attempt:      2,
		FencingToken: 41,
	})
	if err := mux.HandleJob(context.Background(), j); err != nil {
		fmt.Println(err)
	}

	// A payload that does not fit the handler's type fails permanently.
	j = kjobtest.NewJob(kjobtest.JobOptions{
		Window: kjobtest.Window{Job: "report", Payload: `{"team":"billing","retries":"three"}`},
	})
	err := mux.HandleJob(context.Background(), j)
	fmt.Printf("%v (permanent: %t)\n", err, errors.Is(err, kjob.ErrPermanent))
	// Output:
	// report@2026-01-01T00:00:00Z: report for billing from 00:00 to 00:01, attempt 2 of 3, fencing token 41
	// payload.retries: "three": want int (permanent: true)
}

// A pipeline in a test: a worker runs the handler against an embedded
// Kafka and a Redis; windows are published and waited for. The first
// window fails once and is retried with a higher fencing token; the second
// has a payload the handler cannot decode and is dead-lettered at once.
func ExampleStartPipeline() {
	// In a test, pass its *testing.T (t) wherever tb is used here; an
	// Example has none, so it uses a Standalone, closed at the end.
	tb := kjobtest.NewStandalone()
	defer tb.Close()

	var calls atomic.Int32
	mux := kjob.NewMux()
	mux.Handle("report", kjob.Typed(func(ctx context.Context, j *kjob.Job, args ReportArgs) error {
		if calls.Add(1) == 1 {
			return errors.New("mail server busy")
		}
		return nil
	}))
	p := kjobtest.StartPipeline(tb, mux, kjobtest.PipelineOptions{})

	id := p.Publish(tb, kjobtest.Window{Job: "report", Payload: ReportArgs{Team: "billing"}})
	res := p.Wait(tb, id)
	fmt.Printf("%s after %d attempts (store: %s)\n", res.Outcome, len(res.Attempts), res.Stored.Status)
	for _, a := range res.Attempts {
		fmt.Printf("  attempt %d, fencing token %d: %v\n", a.Attempt, a.FencingToken, a.Err)
	}

	id = p.Publish(tb, kjobtest.Window{Job: "report", Payload: `{"team":"billing","retries":"three"}`})
	res = p.Wait(tb, id)
	fmt.Printf("%s after %d attempt (store: %s): %s\n", res.Outcome, len(res.Attempts), res.Stored.Status, res.DeadLetter.Reason)
	// Output:
	// done after 2 attempts (store: done)
	//   attempt 1, fencing token 1: mail server busy
	//   attempt 2, fencing token 2: <nil>
	// dead-lettered after 1 attempt (store: dead): payload.retries: "three": want int
}
