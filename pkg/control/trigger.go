package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/schedule"
)

// Windows that operators publish (kjobctl trigger, backfill, resume
// --catchup, and the dashboard's trigger): one implementation for all.
// (Moved from cmd/kjobctl/publish.go with its behaviour unchanged; the
// policy is schedule.Job.Policy, the producer's, overlap included.)

// message builds a window of job j starting at start.
func message(j *schedule.Job, id string, start time.Time, trigger jobmsg.Trigger, payload json.RawMessage, now time.Time) *jobmsg.Message {
	end := j.Next(start)
	if end.IsZero() {
		end = start.Add(time.Second)
	}
	if payload == nil {
		payload = j.Payload
	}
	return &jobmsg.Message{
		ID: id, Job: j.Name, Handler: j.Handler,
		Window:      jobmsg.Window{Start: start.UTC(), End: end.UTC()},
		ScheduledAt: start.UTC(), PublishedAt: now.UTC(), Trigger: trigger, Payload: payload,
		Policy: j.Policy(), // as the producer's windows: timeout, retries, overlap
	}
}

// WindowMessage returns the message of job j's window with id starting at
// start, published now with trigger: the window [start, the job's next
// fire time) with the job's handler, payload (unless payload is not nil)
// and policy (schedule.Job.Policy: timeout, retries and overlap), as the
// producer publishes it.
func WindowMessage(j *schedule.Job, id string, start time.Time, trigger jobmsg.Trigger, payload json.RawMessage, now time.Time) *jobmsg.Message {
	return message(j, id, start, trigger, payload, now)
}

// Trigger publishes one manual window of job j, [now, the job's next fire
// time), with id jobmsg.ManualID (a random nonce tells two triggers in one
// instant apart) and payload (nil: the job's own), and waits for Kafka to
// acknowledge it. cl must partition by key as the producer does
// (kgo.StickyKeyPartitioner, murmur2) and sign when the workers require
// signatures. The window runs whether the job is paused or disabled.
func Trigger(ctx context.Context, cl *kgo.Client, topic string, j *schedule.Job, payload json.RawMessage, now time.Time) (*jobmsg.Message, *kgo.Record, error) {
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	m := message(j, jobmsg.ManualID(j.Name, now, hex.EncodeToString(nonce)), now, jobmsg.TriggerManual, payload, now)
	rec, err := jobmsg.Record(topic, m)
	if err != nil {
		return nil, nil, err
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, nil, fmt.Errorf("publish to %s: %w", topic, err)
	}
	return m, rec, nil
}
