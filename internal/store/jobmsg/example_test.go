package jobmsg_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/store/jobmsg"
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

// A record written before overlap policies existed has none: it decodes as
// queue. A record whose policy is beyond the bounds is refused.
func ExampleOverlap() {
	old := `{"v":1,"id":"report@2026-11-22T10:00:00Z","job":"report","handler":"log",
	  "window":{"start":"2026-11-22T10:00:00Z","end":"2026-11-22T11:00:00Z"},
	  "scheduled_at":"2026-11-22T10:00:00Z","published_at":"2026-11-22T10:00:00Z","trigger":"schedule","payload":{},
	  "policy":{"timeout":"1m","max_attempts":3,"backoff":"1s","max_backoff":"1m"}}`
	m, err := jobmsg.Unmarshal([]byte(old))
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Policy.Overlap, m.Policy.Overlap.Valid())

	_, err = jobmsg.Unmarshal([]byte(strings.Replace(old, `"max_attempts":3`, `"max_attempts":1000000000`, 1)))
	fmt.Println(err)
	// Output:
	// queue true
	// jobmsg: policy.max_attempts: "1000000000": must be at most 100 (jobmsg.MaxAttempts, the most a worker accepts from a record and a schedules file allows); publish the window from a valid schedules file
}
