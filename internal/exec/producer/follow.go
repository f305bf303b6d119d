package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/store/specs"
)

// specView is the replica's one view of the schedules topic: the
// validated jobs with their records' metadata (live, see liveJob), and a
// snapshot (specs.Snapshot) with the offsets it has read up to, the
// deleted jobs' versions, and in Jobs only the records live lacks: those
// whose spec does not validate (a valid job's record is in live, without
// a second copy of its spec). A standby follows the topic
// into it; a leader takes it over, reads only the tail written since
// (catchUp), then changes it as it commits its own changes. One goroutine
// owns it at a time (specFollower hands it over); it is never copied.
//
// It holds exactly what a cold read of the topic up to snap.End gives
// (specs.ReadAll, then each record's spec validated): records are applied
// one at a time, in offset order, with the same rules (a malformed record
// is reported and skipped, the job keeping its last good version; a
// tombstone deletes the job and keeps its version; a record whose spec
// does not validate leaves the job out of live). Two differences that
// only compaction on a real broker can cause, both harmless: a follower
// that read a tombstone before the cleaner removed it still knows the
// deleted version (a job re-created afterwards continues its versions),
// and it reported a malformed record that compaction later removed.
type specView struct {
	snap *specs.Snapshot
	live map[string]*liveJob
	// records counts the records applied (for logs and measurements).
	records int
}

func newSpecView() *specView {
	return &specView{snap: specs.NewSnapshot(), live: map[string]*liveJob{}}
}

// applySpec folds one record of the schedules topic (not a control
// record) into v's snapshot, reporting a malformed one, and adds its job
// to touched; settle then validates the touched jobs' current specs. (A
// read of many records validates each job once, not once per record: a
// topic whose active segment is not compacted yet holds several records
// of a job.)
func (p *Producer) applySpec(v *specView, r *kgo.Record, touched map[string]bool) {
	v.records++
	err := v.snap.Apply(r, p.cfg.Namespace)
	v.snap.Malformed = nil // reported here; a long-lived view keeps none
	if err != nil {
		p.malformed(p.cfg.SchedulesTopic, err)
		return
	}
	touched[string(r.Key)] = true // the job: Apply accepted the record
}

// settle validates the current spec of each touched job into v.live,
// reporting one that does not validate (the job is then left out, as a
// cold read leaves it out), and empties touched.
func (p *Producer) settle(v *specView, touched map[string]bool) {
	var shared origins
	for name := range touched {
		delete(touched, name)
		rec, ok := v.snap.Jobs[name]
		if !ok {
			delete(v.live, name)
			continue
		}
		// The topic as the source: the job keeps it as its File, and the
		// error below names the job and the version.
		j, err := rec.Spec.Job(p.cfg.SchedulesTopic)
		if err != nil {
			delete(v.live, name)
			p.malformed(p.cfg.SchedulesTopic, fmt.Errorf("job %s version %d does not validate: %w", name, rec.Version, err))
			continue
		}
		v.live[name] = newLiveJob(rec, j, &shared)
		delete(v.snap.Jobs, name)
	}
}

// catchUp reads the schedules topic from v's offsets to its end offsets as
// listed now, read committed, into v, and returns how many records it
// read. A leader calls it after fencing, so every change committed before
// it leads is in v when it returns: for a standby that followed the topic
// that is the tail since its last fetch; for a view that read nothing yet
// it is the whole topic (a cold read). A view whose offsets the topic no
// longer has (records deleted below them, or a topic that is shorter than
// they say: recreated, or truncated by an unclean leader election) is
// dropped and the topic read from its start.
func (p *Producer) catchUp(ctx context.Context, v *specView) (int, error) {
	topic := p.cfg.SchedulesTopic
	spans, err := kread.ListSpans(ctx, p.kafkaOpts("kjob-producer-schedules"), topic)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// Run created it, so someone deleted it: a cold read finds no job.
		*v = *newSpecView()
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schedules: %w", err)
	}
	for _, part := range spans.Partitions() {
		sp := spans[part]
		if at, ok := v.snap.End[part]; ok && (at < sp.Start || at > sp.End) {
			p.log.Warn("the schedules topic no longer has the records this replica read: reading it again from its start",
				"topic", topic, "partition", part, "read_up_to", at, "start_offset", sp.Start, "end_offset", sp.End)
			*v = *newSpecView()
			break
		}
	}
	for part, sp := range spans {
		sp.Start = max(v.snap.End[part], sp.Start) // the tail the view has not read
		spans[part] = sp
	}
	before := v.records
	touched := map[string]bool{}
	defer p.settle(v, touched) // also after a failed read: v stays consistent
	err = kread.ReadSpans(ctx, p.kafkaOpts("kjob-producer-schedules"), topic, spans, func(r *kgo.Record) error {
		p.applySpec(v, r, touched)
		return nil
	})
	if err != nil {
		return v.records - before, fmt.Errorf("read schedules: %w", err)
	}
	return v.records - before, nil
}

// specFollower hands the replica's specView between its two users: while
// the replica stands by, follow (run) keeps it up to date by reading the
// schedules topic as records are committed; while it leads, the leader
// holds it (acquire) and follow stands still; when leadership ends, the
// leader gives it back (release) and follow resumes from the offsets the
// view has read up to.
//
// Resuming rather than rebuilding: the leader changes the view only by
// the changes it committed, and each of those is a record after the
// view's offsets, so reading on from them applies those changes again (a
// record replaces its job's previous one, so this is idempotent) and then
// whatever a later leader commits: the view converges to what a cold read
// gives, at the cost of the changes of one tenure instead of the whole
// topic.
type specFollower struct {
	p *Producer
	v *specView

	mu       sync.Mutex
	held     bool               // a leader holds v
	stopPass context.CancelFunc // ends the pass under way, if any
	passDone chan struct{}      // closed when the last pass started has returned
	resume   chan struct{}      // signalled by release
}

func newSpecFollower(p *Producer) *specFollower {
	done := make(chan struct{})
	close(done)
	return &specFollower{p: p, v: newSpecView(), passDone: done, resume: make(chan struct{}, 1)}
}

// acquire stops following and returns the view for the caller's exclusive
// use until release. It returns ctx's error if ctx ends first.
func (f *specFollower) acquire(ctx context.Context) (*specView, error) {
	f.mu.Lock()
	f.held = true
	if f.stopPass != nil {
		f.stopPass()
	}
	done := f.passDone
	f.mu.Unlock()
	select {
	case <-done:
		return f.v, nil
	case <-ctx.Done():
		f.release()
		return nil, ctx.Err()
	}
}

// release gives the view back to the follower.
func (f *specFollower) release() {
	f.mu.Lock()
	f.held = false
	f.mu.Unlock()
	select {
	case f.resume <- struct{}{}:
	default:
	}
}

// run follows the schedules topic into the view whenever no leader holds
// it, until ctx ends. A pass that fails (Kafka unreachable) is retried
// with a backoff; a leader that takes over meanwhile reads from wherever
// the view got to.
func (f *specFollower) run(ctx context.Context) {
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		f.mu.Lock()
		if f.held {
			f.mu.Unlock()
			select {
			case <-f.resume:
				continue
			case <-ctx.Done():
				return
			}
		}
		pctx, cancel := context.WithCancel(ctx)
		f.stopPass = cancel
		done := make(chan struct{})
		f.passDone = done
		f.mu.Unlock()

		err := f.p.follow(pctx, f.v)
		if err != nil && pctx.Err() == nil {
			delay := b.Next()
			f.p.log.Warn("cannot follow the schedules topic; retrying (a takeover reads what is missing)",
				"topic", f.p.cfg.SchedulesTopic, "err", err, "retry_in", delay)
			_ = clock.Sleep(pctx, delay)
		} else if err == nil {
			b = backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
		}
		cancel()
		close(done)
		if ctx.Err() != nil {
			return
		}
	}
}

// followFetchBytes bounds one fetch of the follower, as kread bounds its
// reads: the standby buffers at most this much ahead of the view.
const followFetchBytes = 1 << 20

// follow reads the schedules topic into v from v's offsets, read
// committed, and goes on reading what is committed after, until ctx ends
// (it then returns nil) or a fetch fails.
func (p *Producer) follow(ctx context.Context, v *specView) error {
	topic := p.cfg.SchedulesTopic
	cl, err := kgo.NewClient(append(p.kafkaOpts("kjob-producer-schedules-follow"),
		kgo.FetchMaxBytes(followFetchBytes), kgo.FetchMaxPartitionBytes(followFetchBytes), kgo.MaxConcurrentFetches(1),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // the last offset listed may be a transaction marker
		kgo.DisableFetchSessions(),
	)...)
	if err != nil {
		return fmt.Errorf("follow %s: %w", topic, err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("follow %s: list end offsets: %w", topic, err)
	}
	from := map[int32]kgo.Offset{}
	behind := map[int32]int64{} // partitions not yet read to the end listed at the start
	ends.Each(func(o kadm.ListedOffset) {
		from[o.Partition] = kgo.NewOffset().AtStart()
		if at, ok := v.snap.End[o.Partition]; ok {
			from[o.Partition] = kgo.NewOffset().At(at)
		}
		if o.Offset > v.snap.End[o.Partition] {
			behind[o.Partition] = o.Offset
		}
	})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	start, before := time.Now(), v.records
	touched := map[string]bool{}
	caughtUp := func() {
		p.log.Info("following the schedules topic: read up to its end", "topic", topic,
			"records", v.records-before, "jobs", len(v.live), "took", time.Since(start).Round(time.Millisecond))
	}
	if len(behind) == 0 {
		caughtUp()
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, part int32, err error) { ferr = fmt.Errorf("follow %s[%d]: %w", t, part, err) })
		if ferr != nil {
			return ferr
		}
		wasBehind := len(behind) > 0
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := behind[r.Partition]; ok && r.Offset >= end-1 {
				delete(behind, r.Partition)
			}
			if !r.Attrs.IsControl() {
				p.applySpec(v, r, touched)
			}
		})
		p.settle(v, touched)
		if wasBehind && len(behind) == 0 {
			caughtUp()
		}
	}
}
