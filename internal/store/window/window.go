// Package window builds the window records of a schedule's jobs: the one
// place a window of a schedule.Job becomes a jobmsg.Message and its Kafka
// record. It lives here, not in the public schedule package, so that
// schedule's API speaks only its own words (the spec and the file format)
// and the wire format stays internal.
package window

import (
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/schedule"
)

// Publication says which window of a job is published and why. Only Start
// is required; every other zero field takes its default.
type Publication struct {
	// Start is the window's start.
	Start time.Time
	// Trigger says why it is published. Default jobmsg.TriggerSchedule.
	Trigger jobmsg.Trigger
	// ID is the window id. Default by Trigger: jobmsg.WindowID for
	// schedule and catchup (a catch-up is the scheduled window, late),
	// jobmsg.BackfillID for backfill, jobmsg.ManualID with Nonce for
	// manual.
	ID string
	// Nonce tells apart two manual windows of one job at one instant (a
	// random string); used only for the default ID of a manual window.
	Nonce string
	// End is the window's end. Default the job's next window start after
	// Start, or Start + 1s if the job has none.
	End time.Time
	// ScheduledAt is when the window was due. Default Start.
	ScheduledAt time.Time
	// PublishedAt is when it is published. Default Start.
	PublishedAt time.Time
	// Payload replaces the job's payload for this window (kjobctl trigger
	// --payload). Default the job's.
	Payload json.RawMessage
	// Namespace is the namespace of the deployment the window is
	// published to (jobmsg.Message.Namespace): its workers run it, any
	// other deployment's refuse it. Empty writes a record without one, as
	// kjob did before records carried their namespace; every publisher in
	// this module sets it.
	Namespace string
	// ScheduleVersion is the version of the job's spec the window comes
	// from (jobmsg.Message.ScheduleVersion); 0 when unknown.
	ScheduleVersion int64
}

// Policy returns the execution policy every window of j carries to the
// workers: timeout, retries, overlap and max_concurrent. The producer and
// kjobctl (for trigger, backfill and catch-up) both build a window's policy
// with it, so a window means the same whoever published it. A Job that did
// not come from schedule.Parse and has no Overlap gets jobmsg.OverlapQueue.
func Policy(j *schedule.Job) jobmsg.Policy {
	o := jobmsg.Overlap(j.Overlap)
	if o == "" {
		o = jobmsg.OverlapQueue
	}
	return jobmsg.Policy{
		Timeout:     jobmsg.Duration(j.Timeout),
		MaxAttempts: j.Retries.MaxAttempts,
		Backoff:     jobmsg.Duration(j.Retries.Backoff),
		MaxBackoff:  jobmsg.Duration(j.Retries.MaxBackoff),
		Overlap:     o,

		MaxConcurrent: j.MaxConcurrent,
	}
}

// Message returns the message of j's window p: the window [p.Start,
// p.End), j's handler and payload, and j's policy (Policy: timeout,
// retries, overlap). It is the one place a window of a job becomes a
// message: the producer, kjobctl (trigger, backfill, resume --catchup),
// the dashboard's trigger and kjobtest all build windows with it, so a
// window means the same whoever published it.
func Message(j *schedule.Job, p Publication) *jobmsg.Message {
	if p.Trigger == "" {
		p.Trigger = jobmsg.TriggerSchedule
	}
	if p.ID == "" {
		switch p.Trigger {
		case jobmsg.TriggerManual:
			p.ID = jobmsg.ManualID(j.Name, p.Start, p.Nonce)
		case jobmsg.TriggerBackfill:
			p.ID = jobmsg.BackfillID(j.Name, p.Start)
		default:
			p.ID = jobmsg.WindowID(j.Name, p.Start)
		}
	}
	if p.End.IsZero() {
		if p.End = j.Next(p.Start); p.End.IsZero() {
			p.End = p.Start.Add(time.Second)
		}
	}
	if p.ScheduledAt.IsZero() {
		p.ScheduledAt = p.Start
	}
	if p.PublishedAt.IsZero() {
		p.PublishedAt = p.Start
	}
	if p.Payload == nil {
		p.Payload = j.Payload
	}
	return &jobmsg.Message{
		ID: p.ID, Job: j.Name, Handler: j.Handler, Namespace: p.Namespace,
		Window:      jobmsg.Window{Start: p.Start.UTC(), End: p.End.UTC()},
		ScheduledAt: p.ScheduledAt.UTC(), PublishedAt: p.PublishedAt.UTC(),
		Trigger: p.Trigger, Payload: p.Payload,
		Policy:          Policy(j),
		ScheduleVersion: p.ScheduleVersion,
	}
}

// Record returns the message of j's window p (Message) and its record for
// topic (jobmsg.Record: key = job, value = JSON, schema headers). It fails
// only for a window jobmsg refuses (an invalid job made by hand, or an
// invalid Publication).
func Record(j *schedule.Job, topic string, p Publication) (*jobmsg.Message, *kgo.Record, error) {
	m := Message(j, p)
	rec, err := jobmsg.Record(topic, m)
	if err != nil {
		return nil, nil, err
	}
	return m, rec, nil
}
