// Package jobsource is the job list the operator tools work on (kjobctl
// trigger, backfill, pause, resume, status and history, and the dashboard):
// the deployment's schedules topic, read committed to its end, so a job
// created through the API (kjob.Schedules, kjobctl schedule apply, the
// dashboard) is known to them as it is to the producer. A schedules file
// stands in for the topic only for a deployment whose producer does not
// write it (one older than schedules as a log).
//
//	set, err := jobsource.ReadTopic(ctx, opts, deployment) // or jobsource.FromFile(file)
//	job, err := set.Job("report") // an *UnknownJobError names the topic and lists the known jobs
//
// A long-running reader (the dashboard) keeps one Follower instead: a
// read-committed consumer that tails the topic and applies each record to
// its job list as it is committed (Run), so a change shows within
// milliseconds, not at the next re-read. A caller that needs a view
// holding its own write waits for it (Sync, Snapshot).
package jobsource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// Errors callers branch on.
var (
	// ErrUnknownJob: the job is not in the set (an *UnknownJobError says
	// where it was looked for).
	ErrUnknownJob = errors.New("unknown job")
	// ErrInvalidSpec: the job's current spec in the topic does not
	// validate (the producer skips it too).
	ErrInvalidSpec = errors.New("spec does not validate")
)

// maxListed bounds the known jobs an *UnknownJobError lists.
const maxListed = 20

// Set is the job list read at one moment, from the schedules topic or
// from a schedules file. Treat it as read-only: a Follower shares it.
type Set struct {
	// Jobs are the jobs, validated as the producer validates them, sorted
	// by name. A topic record whose spec does not validate is left out
	// (it is in Invalid).
	Jobs []*schedule.Job
	// Topic is the schedules topic read; "" for a file.
	Topic string
	// File is the schedules file read; "" for the topic.
	File string
	// Records are the topic's current records by job (version, pause,
	// who set it); nil for a file.
	Records map[string]*specs.Record
	// Deleted maps a job deleted from the topic to its tombstone's
	// version (only while the tombstone is in the topic).
	Deleted map[string]int64
	// Invalid maps a topic job whose current spec does not validate to
	// its error.
	Invalid map[string]error
	// Malformed lists the topic records that were skipped as malformed.
	Malformed []*specs.MalformedError
	// ReadAt is when the read began: the set holds every change committed
	// before it.
	ReadAt time.Time
}

// FromFile is the job list of a schedules file.
func FromFile(f *schedule.File, now time.Time) *Set {
	jobs := slices.Clone(f.Jobs)
	slices.SortFunc(jobs, func(a, b *schedule.Job) int { return strings.Compare(a.Name, b.Name) })
	return &Set{Jobs: jobs, File: f.Path, ReadAt: now}
}

// FromSnapshot is the job list of a snapshot of the schedules topic
// topic: each current record's spec validated as the producer validates
// it (schedule.Spec.Job).
func FromSnapshot(topic string, snap *specs.Snapshot, now time.Time) *Set {
	s := &Set{Topic: topic, Records: snap.Jobs, Deleted: snap.Deleted, Malformed: snap.Malformed, Invalid: map[string]error{}, ReadAt: now}
	for _, name := range snap.Names() {
		rec := snap.Jobs[name]
		j, err := rec.Spec.Job(fmt.Sprintf("%s: %s v%d", topic, name, rec.Version))
		if err != nil {
			s.Invalid[name] = err
			continue
		}
		s.Jobs = append(s.Jobs, j)
	}
	return s
}

// ReadTopic reads the deployment's schedules topic (names.Deployment.
// SchedulesTopic) read committed, from its start to its end offsets as
// they are when the read begins, and returns its jobs. opts are the Kafka
// client options (seed brokers, TLS, SASL); ctx bounds the read. A topic
// that does not exist reads as an empty set (Empty).
func ReadTopic(ctx context.Context, opts []kgo.Opt, d names.Deployment) (*Set, error) {
	_, s, err := readTopic(ctx, opts, d, time.Now)
	return s, err
}

func readTopic(ctx context.Context, opts []kgo.Opt, d names.Deployment, now func() time.Time) (*specs.Snapshot, *Set, error) {
	d = d.WithDefaults()
	topic := d.SchedulesTopic()
	at := now()
	snap, err := specs.ReadAll(ctx, opts, topic, d.Namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("read the schedules topic %s: %w", topic, err)
	}
	return snap, FromSnapshot(topic, snap, at), nil
}

// Where names the set's source: "the schedules topic kjob.windows.schedules"
// or "the schedules file schedules.yaml".
func (s *Set) Where() string {
	if s.Topic != "" {
		return "the schedules topic " + s.Topic
	}
	return "the schedules file " + s.File
}

// Empty reports whether the set has no job at all: none valid, none
// invalid. For the topic, that is a deployment whose producer does not
// write it yet (or one whose every job was deleted: see Deleted).
func (s *Set) Empty() bool { return len(s.Jobs) == 0 && len(s.Invalid) == 0 }

// Pauses returns the paused jobs' pauses (who, since when, the note)
// from their records, by job; none for a file, which has no pauses.
func (s *Set) Pauses() map[string]*specs.Pause {
	out := map[string]*specs.Pause{}
	for name, r := range s.Records {
		if r.Paused != nil {
			out[name] = r.Paused
		}
	}
	return out
}

// Names are the jobs' names, sorted.
func (s *Set) Names() []string {
	out := make([]string, len(s.Jobs))
	for i, j := range s.Jobs {
		out[i] = j.Name
	}
	return out
}

// Job returns the named job. A job the set does not have is an
// *UnknownJobError (errors.Is ErrUnknownJob); a topic job whose spec does
// not validate is an error wrapping ErrInvalidSpec.
func (s *Set) Job(name string) (*schedule.Job, error) {
	if i, ok := slices.BinarySearchFunc(s.Jobs, name, func(j *schedule.Job, n string) int { return strings.Compare(j.Name, n) }); ok {
		return s.Jobs[i], nil
	}
	if err, ok := s.Invalid[name]; ok {
		v := int64(0)
		if r := s.Records[name]; r != nil {
			v = r.Version
		}
		return nil, fmt.Errorf("job %q, version %d in %s: %w: %w; fix it with kjobctl schedule apply -f FILE, or go back with kjobctl schedule revert %s --to-version N",
			name, v, s.Topic, ErrInvalidSpec, err, name)
	}
	return nil, &UnknownJobError{Job: name, Set: s}
}

// UnknownJobError is a job the set does not have. Its message names the
// set's source, lists its jobs (the first 20), and says how to create one.
type UnknownJobError struct {
	Job string
	Set *Set
}

// Unwrap returns ErrUnknownJob.
func (e *UnknownJobError) Unwrap() error { return ErrUnknownJob }

func (e *UnknownJobError) Error() string {
	s := e.Set
	var b strings.Builder
	fmt.Fprintf(&b, "unknown job %q: ", e.Job)
	if v, ok := s.Deleted[e.Job]; ok {
		fmt.Fprintf(&b, "it was deleted from %s (version %d; kjobctl schedule history %s shows who and when)", s.Topic, v, e.Job)
	} else if s.Empty() {
		b.WriteString(s.Where() + " has no jobs")
	} else {
		b.WriteString(s.Where() + " has ")
		names := s.Names()
		for n := range s.Invalid {
			names = append(names, n)
		}
		slices.Sort(names)
		if len(names) > maxListed {
			fmt.Fprintf(&b, "%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
		} else {
			b.WriteString(strings.Join(names, ", "))
		}
	}
	switch {
	case s.Topic == "":
		b.WriteString("; add it to the file, or drop --schedules to read the schedules topic")
	case s.Empty() && len(s.Deleted) == 0:
		b.WriteString(" (it is empty or does not exist): a producer older than schedules as a log does not write it; " +
			"for such a deployment pass the producer's schedules file with --schedules FILE, " +
			"or create the jobs with kjobctl schedule apply -f FILE")
	default:
		b.WriteString("; create it with kjobctl schedule apply -f FILE (kjobctl schedule get JOB shows a job's spec)")
	}
	return b.String()
}
