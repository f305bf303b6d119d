package kjob_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/kjobtest"
)

// ReportArgs is the payload of the report handler, as the schedules file
// gives it:
//
//	payload: {"team": "billing", "retries": 2}
type ReportArgs struct {
	Team    string `json:"team"`
	Retries int    `json:"retries"`
}

// Validate is called by Typed after decoding.
func (a ReportArgs) Validate() error {
	if a.Team == "" {
		return errors.New("team is required")
	}
	return nil
}

// A typed handler gets its payload decoded into a struct. A payload that
// does not fit is a permanent failure naming the field: the worker
// dead-letters the window with that reason instead of retrying it.
func ExampleTyped() {
	mux := kjob.NewMux()
	mux.Handle("report", kjob.Typed(func(ctx context.Context, j *kjob.Job, args ReportArgs) error {
		fmt.Printf("report for %s from %s (retries %d, token %d)\n",
			args.Team, j.Window().Start.Format(time.RFC3339), args.Retries, j.FencingToken())
		return nil
	}))

	// The worker builds Jobs from records; here we build them by hand
	// (kjobtest.NewJob does it with defaults).
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, payload := range []string{
		`{"team":"billing","retries":2}`,
		`{"team":"billing","retries":"three"}`,
		`{"retries":1}`,
	} {
		j := kjobtest.NewJob(kjobtest.JobOptions{
			Window:       kjobtest.Window{Job: "daily-report", Handler: "report", Start: start, End: start.Add(24 * time.Hour), Payload: payload},
			FencingToken: 7, Worker: "worker-1",
		})
		if err := mux.HandleJob(context.Background(), j); err != nil {
			fmt.Printf("error: %v (permanent: %t)\n", err, errors.Is(err, kjob.ErrPermanent))
		}
	}
	// Output:
	// report for billing from 2026-11-22T10:00:00Z (retries 2, token 7)
	// error: payload.retries: "three": want int (permanent: true)
	// error: payload: failed validation (kjob_test.ReportArgs.Validate): team is required (permanent: true)
}
