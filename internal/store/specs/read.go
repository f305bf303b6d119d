package specs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/kread"
)

// Snapshot is the schedules topic read up to some offsets: every job's
// current Record, the versions of deleted jobs whose tombstones are still
// in the topic, and the records that were skipped as malformed.
type Snapshot struct {
	// Jobs maps job name to its current record.
	Jobs map[string]*Record
	// Deleted maps a deleted job to the version its delete gave it.
	Deleted map[string]int64
	// Malformed lists the records skipped; the job keeps its last good
	// version.
	Malformed []*MalformedError
	// End is, per partition, the offset the snapshot has read up to
	// (exclusive).
	End map[int32]int64
}

// NewSnapshot returns an empty Snapshot.
func NewSnapshot() *Snapshot {
	return &Snapshot{Jobs: map[string]*Record{}, Deleted: map[string]int64{}, End: map[int32]int64{}}
}

// Apply folds one schedules-topic record into s: a later record of a job
// replaces an earlier one; a malformed one is recorded and skipped, the
// job keeping its last good version. It returns the record's error.
func (s *Snapshot) Apply(r *kgo.Record, namespace string) error {
	if r.Offset+1 > s.End[r.Partition] {
		s.End[r.Partition] = r.Offset + 1
	}
	e, err := ParseSpecRecord(r, namespace)
	if err != nil {
		var m *MalformedError
		if errors.As(err, &m) {
			s.Malformed = append(s.Malformed, m)
		}
		return err
	}
	if e.Record == nil {
		delete(s.Jobs, e.Job)
		s.Deleted[e.Job] = e.Version
		return nil
	}
	delete(s.Deleted, e.Job)
	s.Jobs[e.Job] = e.Record
	return nil
}

// Version returns job's current version: its record's, its tombstone's if
// deleted, or 0 if the topic knows nothing of it.
func (s *Snapshot) Version(job string) int64 {
	if r, ok := s.Jobs[job]; ok {
		return r.Version
	}
	return s.Deleted[job]
}

// Names returns the current jobs' names, sorted.
func (s *Snapshot) Names() []string {
	out := make([]string, 0, len(s.Jobs))
	for n := range s.Jobs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// ReadAll reads topic (the schedules topic) from its start to its end
// offsets as they were when the read began, read committed, into a
// Snapshot. namespace, if not empty, must be every record's (a record of
// another is malformed). opts are the client options (seed brokers, TLS,
// SASL). A topic that does not exist reads as empty.
func ReadAll(ctx context.Context, opts []kgo.Opt, topic, namespace string) (*Snapshot, error) {
	s := NewSnapshot()
	err := eachRecord(ctx, opts, topic, func(r *kgo.Record) error {
		_ = s.Apply(r, namespace) // a malformed record is in s.Malformed
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// History returns the change log's records of job, oldest first (job ""
// returns every job's). A malformed record is skipped and returned in the
// second result.
func History(ctx context.Context, opts []kgo.Opt, topic, job string) ([]*Change, []*MalformedError, error) {
	var out []*Change
	var bad []*MalformedError
	err := eachRecord(ctx, opts, topic, func(r *kgo.Record) error {
		if job != "" && string(r.Key) != job {
			return nil
		}
		c, err := ParseChange(r)
		if err != nil {
			var m *MalformedError
			if errors.As(err, &m) {
				bad = append(bad, m)
			}
			return nil
		}
		out = append(out, c)
		return nil
	})
	return out, bad, err
}

// eachRecord calls fn for every record of every partition of topic, from
// the start offsets to the end offsets listed when it begins.
func eachRecord(ctx context.Context, opts []kgo.Opt, topic string, fn func(*kgo.Record) error) error {
	spans, err := kread.ListSpans(ctx, opts, topic)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", topic, err)
	}
	return kread.ReadSpans(ctx, opts, topic, spans, fn)
}
