package jobsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	// Opts are the Kafka client options: seed brokers, TLS, SASL
	// (required).
	Opts []kgo.Opt
	// Deployment names the schedules topic and the namespace.
	Deployment names.Deployment
	// Logger gets a warning when the topic cannot be read (Run retries).
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock of Set.ReadAt. Default time.Now.
	Now func() time.Time
}

// missingTopicRecheck is how often Run looks again for a schedules topic
// that does not exist (a Sync that finds it looks at once).
const missingTopicRecheck = time.Second

// followFetchBytes bounds one fetch of the follower, as kread bounds its
// reads.
const followFetchBytes = 1 << 20

// Follower is the schedules topic's job list for a long-running reader
// (the dashboard): Run tails the topic read committed and applies each
// record to a specs.Snapshot as it is committed, the same rules as a
// fresh read (ReadTopic): a malformed record is listed in Malformed and
// skipped, the job keeping its last good version; a tombstone deletes the
// job and its version is in Deleted; a spec that does not validate leaves
// the job out (Invalid). The one difference is compaction's on a real
// broker: a follower that read a record before the cleaner removed it
// still lists it (a malformed one, a tombstone's version), as the
// producer's standby does.
//
// Set, Jobs, Pauses and Job answer from what Run has read (they wait for
// its first read up to the end offsets, bounded by ctx); Sync and
// Snapshot first wait until it has read up to the offsets committed when
// they are called, so they hold every change committed before the call
// (the caller's own write, for one). It is safe for concurrent use.
type Follower struct {
	cfg   FollowerConfig
	topic string

	mu      sync.Mutex
	snap    *specs.Snapshot // published: never changed once published
	set     *Set
	ready   bool          // a first read up to the end offsets has been published
	changed chan struct{} // closed (and replaced) at each publish
	// reading are the partitions the pass under way reads; stopPass ends
	// it (a Sync saw a partition it does not read: Run lists them again).
	reading  map[int32]bool
	stopPass context.CancelFunc
	rescan   chan struct{}
}

// NewFollower validates cfg and returns a Follower; nothing is read until
// Run.
func NewFollower(cfg FollowerConfig) (*Follower, error) {
	if len(cfg.Opts) == 0 {
		return nil, &configerr.Error{Op: "jobsource", Field: "FollowerConfig.Opts", Reason: "is empty: pass kgo.SeedBrokers(...) and the TLS/SASL options"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Deployment = cfg.Deployment.WithDefaults()
	return &Follower{cfg: cfg, topic: cfg.Deployment.SchedulesTopic(), changed: make(chan struct{}), rescan: make(chan struct{}, 1)}, nil
}

// Topic is the schedules topic the follower reads.
func (f *Follower) Topic() string { return f.topic }

// Run follows the schedules topic until ctx ends, then returns nil. A
// read that fails (Kafka unreachable) is retried with a backoff from the
// offsets read up to; meanwhile the readers get the last view. A topic
// that does not exist reads as empty (as ReadTopic reads it) and is
// looked for again every second, or at once by a Sync.
func (f *Follower) Run(ctx context.Context) error {
	w := &work{snap: specs.NewSnapshot(), valid: map[string]*schedule.Job{}, invalid: map[string]error{}}
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		missing, err := f.pass(ctx, w)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		switch {
		case err != nil:
			wait = b.Next()
			f.cfg.Logger.Warn("cannot follow the schedules topic; retrying (the job list stays as last read)", "topic", f.topic, "err", err, "retry_in", wait)
		case missing:
			b = backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
			wait = missingTopicRecheck
		default: // a Sync asked for a new pass
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-f.rescan:
		case <-t.C:
		}
		t.Stop()
	}
}

// work is Run's own view: the snapshot it applies records to and the
// validated jobs, updated for the jobs a record touched only.
type work struct {
	snap    *specs.Snapshot
	valid   map[string]*schedule.Job
	invalid map[string]error
}

func (w *work) settle(topic string, touched map[string]bool) {
	for name := range touched {
		delete(touched, name)
		delete(w.valid, name)
		delete(w.invalid, name)
		rec, ok := w.snap.Jobs[name]
		if !ok {
			continue
		}
		j, err := rec.Spec.Job(fmt.Sprintf("%s: %s v%d", topic, name, rec.Version))
		if err != nil {
			w.invalid[name] = err
			continue
		}
		w.valid[name] = j
	}
}

// pass reads the topic from w's offsets and goes on reading what is
// committed after, until ctx ends or a Sync asks for a new pass (nil) or
// a fetch fails. missing: the topic does not exist (w is then empty and
// published).
func (f *Follower) pass(ctx context.Context, w *work) (missing bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl, err := kgo.NewClient(append(slices.Clone(f.cfg.Opts),
		kgo.FetchMaxBytes(followFetchBytes), kgo.FetchMaxPartitionBytes(followFetchBytes), kgo.MaxConcurrentFetches(1),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // a committed offset may be a transaction marker's
	)...)
	if err != nil {
		return false, fmt.Errorf("follow %s: %w", f.topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, f.topic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListCommittedOffsets(ctx, f.topic)
		if err == nil {
			err = ends.Error()
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		*w = work{snap: specs.NewSnapshot(), valid: map[string]*schedule.Job{}, invalid: map[string]error{}}
		f.publish(w, nil)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("follow %s: list offsets: %w", f.topic, err)
	}
	// A topic that no longer has the records read up to (deleted below
	// them, or shorter: recreated) is read again from its start.
	reset := false
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(f.topic, o.Partition)
		if at, ok := w.snap.End[o.Partition]; ok && (at < s.Offset || at > o.Offset) {
			reset = true
		}
	})
	if reset {
		f.cfg.Logger.Warn("the schedules topic no longer has the records read: reading it again from its start", "topic", f.topic)
		*w = work{snap: specs.NewSnapshot(), valid: map[string]*schedule.Job{}, invalid: map[string]error{}}
	}
	from := map[int32]kgo.Offset{}
	reading := map[int32]bool{}
	behind := map[int32]int64{} // partitions not yet read to the offset committed at the start
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(f.topic, o.Partition)
		// Nothing is below the start offset: read up to there already.
		w.snap.End[o.Partition] = max(w.snap.End[o.Partition], s.Offset)
		from[o.Partition] = kgo.NewOffset().At(w.snap.End[o.Partition])
		reading[o.Partition] = true
		if o.Offset > w.snap.End[o.Partition] {
			behind[o.Partition] = o.Offset
		}
	})
	f.mu.Lock()
	f.reading, f.stopPass = reading, cancel
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.reading, f.stopPass = nil, nil
		f.mu.Unlock()
	}()
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: from})
	touched := map[string]bool{}
	if len(behind) == 0 {
		f.publish(w, touched)
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return false, nil
		}
		var ferr error
		fs.EachError(func(t string, part int32, err error) { ferr = fmt.Errorf("follow %s[%d]: %w", t, part, err) })
		if ferr != nil {
			return false, ferr
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.Attrs.IsControl() {
				w.snap.End[r.Partition] = max(w.snap.End[r.Partition], r.Offset+1)
			} else if err := w.snap.Apply(r, f.cfg.Deployment.Namespace); err == nil {
				touched[string(r.Key)] = true
			}
			if end, ok := behind[r.Partition]; ok && r.Offset >= end-1 {
				delete(behind, r.Partition)
			}
		})
		// The first read publishes once it has reached the offsets
		// committed when it began: a reader never sees half a topic.
		if n > 0 && len(behind) == 0 {
			f.publish(w, touched)
		}
	}
}

// publish validates the touched jobs and makes a copy of w the readers'
// view.
func (f *Follower) publish(w *work, touched map[string]bool) {
	w.settle(f.topic, touched)
	snap := &specs.Snapshot{Jobs: maps.Clone(w.snap.Jobs), Deleted: maps.Clone(w.snap.Deleted),
		Malformed: slices.Clone(w.snap.Malformed), End: maps.Clone(w.snap.End)}
	set := &Set{Topic: f.topic, Records: snap.Jobs, Deleted: snap.Deleted, Malformed: snap.Malformed,
		Invalid: maps.Clone(w.invalid), ReadAt: f.cfg.Now()}
	set.Jobs = slices.Collect(maps.Values(w.valid))
	slices.SortFunc(set.Jobs, func(a, b *schedule.Job) int { return strings.Compare(a.Name, b.Name) })
	f.mu.Lock()
	f.snap, f.set, f.ready = snap, set, true
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Set returns the job list as Run has read it, waiting (bounded by ctx)
// for its first read up to the end of the topic.
func (f *Follower) Set(ctx context.Context) (*Set, error) {
	_, s, err := f.view(ctx, nil)
	return s, err
}

// view returns the published view once it is ready and, for every
// partition in want, has read up to that offset; it waits for it until
// ctx ends.
func (f *Follower) view(ctx context.Context, want map[int32]int64) (*specs.Snapshot, *Set, error) {
	for {
		f.mu.Lock()
		snap, set, ready, changed := f.snap, f.set, f.ready, f.changed
		reached := ready
		var unread bool
		for p, off := range want {
			if ready && snap.End[p] < off {
				reached = false
			}
			if off > 0 && !f.reading[p] {
				unread = true
			}
		}
		if !reached && unread && f.stopPass != nil {
			f.stopPass() // a partition the pass does not read: list them again
		}
		f.mu.Unlock()
		if reached {
			return snap, set, nil
		}
		if unread {
			select {
			case f.rescan <- struct{}{}:
			default:
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("read the schedules topic %s: waiting for the follower to read up to offsets %v: %w", f.topic, want, ctx.Err())
		}
	}
}

// Sync waits until the follower has read every change committed to the
// topic before the call: it lists the topic's committed (last stable)
// offsets, then waits, bounded by ctx, until Run has read up to them. A
// caller calls it after its own write to see it.
func (f *Follower) Sync(ctx context.Context) error {
	_, _, err := f.synced(ctx)
	return err
}

func (f *Follower) synced(ctx context.Context) (*specs.Snapshot, *Set, error) {
	cl, err := kgo.NewClient(f.cfg.Opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("read the schedules topic %s: %w", f.topic, err)
	}
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, f.topic)
	cl.Close()
	if err == nil {
		err = ends.Error()
	}
	want := map[int32]int64{}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		// No topic: what Run has read (empty once it has looked).
	case err != nil:
		return nil, nil, fmt.Errorf("read the schedules topic %s: list offsets: %w", f.topic, err)
	default:
		ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	}
	return f.view(ctx, want)
}

// Snapshot is Sync, then the snapshot read (dashboard.SnapshotReader).
// The snapshot is shared: do not change it.
func (f *Follower) Snapshot(ctx context.Context) (*specs.Snapshot, error) {
	snap, _, err := f.synced(ctx)
	return snap, err
}

// Jobs returns the jobs of Set (inspect.JobSource and
// operator.JobSource).
func (f *Follower) Jobs(ctx context.Context) ([]*schedule.Job, error) {
	s, err := f.Set(ctx)
	if err != nil {
		return nil, err
	}
	return s.Jobs, nil
}

// Pauses returns the pauses of Set (inspect.Pauses).
func (f *Follower) Pauses(ctx context.Context) (map[string]*specs.Pause, error) {
	s, err := f.Set(ctx)
	if err != nil {
		return nil, err
	}
	return s.Pauses(), nil
}

// Job returns the named job of Set (see Set.Job). A job it does not have
// is looked for again after a Sync: one created a moment ago (by the
// caller, say) is found.
func (f *Follower) Job(ctx context.Context, name string) (*schedule.Job, error) {
	s, err := f.Set(ctx)
	if err != nil {
		return nil, err
	}
	j, err := s.Job(name)
	if !errors.Is(err, ErrUnknownJob) {
		return j, err
	}
	if _, s, err = f.synced(ctx); err != nil {
		return nil, err
	}
	return s.Job(name)
}
