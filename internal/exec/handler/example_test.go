package handler_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

func ExampleMux() {
	mux := handler.NewMux()
	mux.Use(handler.Recover(), handler.Logging(slog.New(slog.DiscardHandler)))
	mux.HandleFunc("report", func(ctx context.Context, j *handler.Job) error {
		var p struct{ Team string }
		if err := j.DecodePayload(&p); err != nil {
			return fmt.Errorf("%v: %w", err, handler.ErrPermanent)
		}
		w := j.Window()
		fmt.Printf("report for %s from %s to %s (attempt %d, token %d)\n",
			p.Team, w.Start.Format(time.Kitchen), w.End.Format(time.Kitchen), j.Attempt(), j.FencingToken())
		return nil
	})

	// The worker builds Jobs from records; here we build one by hand.
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	j := handler.NewJob(&jobmsg.Message{
		V: 1, ID: jobmsg.WindowID("daily-report", start), Job: "daily-report", Handler: "report",
		Window:  jobmsg.Window{Start: start, End: start.Add(24 * time.Hour)},
		Payload: []byte(`{"team":"billing"}`), Trigger: jobmsg.TriggerSchedule,
	}, 1, 7, "worker-1", 0, 0)
	if err := mux.HandleJob(context.Background(), j); err != nil {
		fmt.Println(err)
	}
	// Output:
	// report for billing from 10:00AM to 10:00AM (attempt 1, token 7)
}
