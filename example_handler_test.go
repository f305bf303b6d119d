package kjob_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/kjobtest"
)

func ExampleMux() {
	mux := kjob.NewMux()
	mux.Use(kjob.Recover(), kjob.Logging(slog.New(slog.DiscardHandler)))
	mux.HandleFunc("report", func(ctx context.Context, j *kjob.Job) error {
		var p struct{ Team string }
		if err := j.DecodePayload(&p); err != nil {
			return fmt.Errorf("%v: %w", err, kjob.ErrPermanent)
		}
		w := j.Window()
		fmt.Printf("report for %s from %s to %s (attempt %d, token %d)\n",
			p.Team, w.Start.Format(time.Kitchen), w.End.Format(time.Kitchen), j.Attempt(), j.FencingToken())
		return nil
	})

	// The worker builds Jobs from records; here we build one by hand.
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	j := kjobtest.NewJob(kjobtest.JobOptions{
		Window:       kjobtest.Window{Job: "daily-report", Handler: "report", Start: start, End: start.Add(24 * time.Hour), Payload: `{"team":"billing"}`},
		FencingToken: 7, Worker: "worker-1",
	})
	if err := mux.HandleJob(context.Background(), j); err != nil {
		fmt.Println(err)
	}
	// Output:
	// report for billing from 10:00AM to 10:00AM (attempt 1, token 7)
}
