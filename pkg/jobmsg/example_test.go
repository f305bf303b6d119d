package jobmsg_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kjob/kjob/pkg/jobmsg"
)

func Example() {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rec, err := jobmsg.Record("kjob.windows", &jobmsg.Message{
		ID:          jobmsg.WindowID("report", start),
		Job:         "report",
		Handler:     "log",
		Window:      jobmsg.Window{Start: start, End: start.Add(time.Hour)},
		ScheduledAt: start,
		PublishedAt: start,
		Trigger:     jobmsg.TriggerSchedule,
		Payload:     json.RawMessage(`{"team":"billing"}`),
		Policy:      jobmsg.Policy{Timeout: jobmsg.Duration(time.Minute), MaxAttempts: 3, Backoff: jobmsg.Duration(time.Second), MaxBackoff: jobmsg.Duration(time.Minute)},
	})
	if err != nil {
		panic(err)
	}
	m, err := jobmsg.FromRecord(rec)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(rec.Key), m.ID, m.Trigger)

	_, err = jobmsg.Unmarshal([]byte(`{"v":2,"id":"report@x"}`))
	fmt.Println(err)
	// Output:
	// report report@2026-11-22T10:00:00Z schedule
	// jobmsg: v: 2: this kjob reads schema version 1; upgrade the worker to read newer versions
}
