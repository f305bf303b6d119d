package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/clock"
)

// ProcessFunc processes one record of a partition the Consumer owns.
//
// It returns nil when the record is settled (done, skipped, or
// dead-lettered): the record is then marked for commit and the next record
// of the partition is processed. It returns a non-nil error only when ctx is
// done (the partition was revoked and Config.Grace ran out, or the partition
// was lost): the record is then not marked, processing of the partition
// stops, and the record is delivered again to the partition's next owner.
//
// ctx is cancelled when the partition is lost, or Config.Grace after it was
// revoked; it carries the values of Run's context. ProcessFunc must return
// promptly once ctx is done: a revoke or loss waits for it.
type ProcessFunc func(ctx context.Context, rec *kgo.Record) error

// BatchFunc processes a run of consecutive records of one partition the
// Consumer owns, in order: the records queued for the partition when it is
// called, at most Config.MaxBatch of them, never a transaction marker.
//
// It returns n, how many leading records of recs are settled (as for
// ProcessFunc); they are marked for commit, and the next call starts at
// recs[n]. It should stop early (n < len(recs), nil error) once Halted(ctx)
// reports true: the partition is being revoked and should start no new
// record. A non-nil error, only when ctx is done, stops processing of the
// partition as for ProcessFunc; records from recs[n] on are delivered again
// to the next owner. The contract on ctx is ProcessFunc's.
type BatchFunc func(ctx context.Context, recs []*kgo.Record) (n int, err error)

type haltKey struct{}

// Halted reports whether the partition whose BatchFunc or ProcessFunc got
// ctx is being revoked: the function should finish the record in hand and
// start no other. ctx itself is cancelled only Config.Grace later.
func Halted(ctx context.Context) bool {
	stop, _ := ctx.Value(haltKey{}).(chan struct{})
	if stop == nil {
		return false
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// Defaults of the zero values of Config fields.
const (
	// DefaultGrace is Config.Grace when it is zero.
	DefaultGrace = 10 * time.Second
	// DefaultSessionTimeout is Config.SessionTimeout when it is zero. Real
	// Kafka brokers refuse shorter sessions unless their
	// group.min.session.timeout.ms (6000 by default) is lowered.
	DefaultSessionTimeout = 6 * time.Second
	// DefaultHeartbeatInterval is Config.HeartbeatInterval when it is zero.
	DefaultHeartbeatInterval = time.Second
	// DefaultCommitInterval is Config.CommitInterval when it is zero.
	DefaultCommitInterval = time.Second
	// DefaultMaxBatch is Config.MaxBatch when it is zero.
	DefaultMaxBatch = 500
)

// commitTimeout bounds the synchronous commit of marked offsets on revoke
// and shutdown, and leaveTimeout the LeaveGroup request at shutdown.
const (
	commitTimeout = 10 * time.Second
	leaveTimeout  = 10 * time.Second
)

// minDrainCommitGap is the least time between two commits requested
// because a partition caught up (see Consumer.commitDrained).
const minDrainCommitGap = 50 * time.Millisecond

// defaultFetchMaxWait is how long a fetch waits for new records (kgo's
// default is 5s; Config.ClientOpts may set another). A partition whose
// fetching resumes (see maxQueued) is fetched only once the fetch in
// flight returns: when the other partitions have no new records, that
// fetch waits this long, and the resumed partition's backlog with it.
const defaultFetchMaxWait = 250 * time.Millisecond

// Per-partition buffering: the poll loop pauses fetching a partition whose
// queue of fetched, unprocessed records reaches maxQueued, and the partition
// goroutine resumes it once the queue is down to resumeQueued.
const (
	maxQueued    = 500
	resumeQueued = 100
)

// Config configures a Consumer. Zero durations pick their defaults; Brokers,
// Group, Topic and Process are required.
type Config struct {
	// Brokers are the seed brokers, e.g. []string{"localhost:9092"}.
	Brokers []string
	// ClientOpts are extra client options (TLS, SASL, logging, fetch
	// sizes). The options the Consumer relies on (listed in the package
	// doc) are applied after them and win.
	ClientOpts []kgo.Opt
	// Group is the consumer group. Required.
	Group string
	// Topic is the topic to consume. Required.
	Topic string
	// Process processes records, one at a time per partition. Exactly one
	// of Process and ProcessBatch is required.
	Process ProcessFunc
	// ProcessBatch processes runs of records per partition, so that the
	// work for many records (store round trips) can be batched. Exactly one
	// of Process and ProcessBatch is required.
	ProcessBatch BatchFunc
	// MaxBatch caps the records passed to one ProcessBatch call. Default
	// 500.
	MaxBatch int
	// Grace is how long, after a partition is revoked (rebalance or
	// shutdown), the in-flight record may keep running before its context
	// is cancelled. Default 10s.
	Grace time.Duration
	// SessionTimeout is the group session timeout: how long the group
	// waits for a silent member before reassigning its partitions.
	// Default 6s; the broker's group.min.session.timeout.ms bounds it.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the member heartbeats. Default 1s;
	// must be below SessionTimeout (a third of it is customary).
	HeartbeatInterval time.Duration
	// CommitInterval is how often marked offsets are committed in the
	// background. Default 1s. Revokes and shutdown also commit
	// synchronously.
	CommitInterval time.Duration
	// InstanceID names this member in logs (key "member") and is sent as
	// the Kafka client id, which group descriptions show. Optional. It is
	// not a static group membership (kgo.InstanceID): members leave the
	// group when they stop.
	InstanceID string
	// Logger receives assign, revoke and loss events. Default
	// slog.Default().
	Logger *slog.Logger
	// OnAssigned, if set, is called with the partitions newly assigned,
	// after their goroutines started.
	OnAssigned func(partitions []int32)
	// OnRevoked, if set, is called with the partitions taken away (revoked
	// or lost), after their goroutines exited.
	OnRevoked func(partitions []int32)
}

func (c *Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New(`partition: Config.Brokers is empty; set at least one seed broker, e.g. "localhost:9092"`)
	case c.Group == "":
		return errors.New(`partition: Config.Group is empty; set the consumer group name, e.g. "kjob-workers"`)
	case c.Topic == "":
		return errors.New(`partition: Config.Topic is empty; set the topic to consume, e.g. "kjob.windows"`)
	case c.Process == nil && c.ProcessBatch == nil:
		return errors.New("partition: Config.Process and Config.ProcessBatch are nil; set one of them to the function that processes records")
	case c.Process != nil && c.ProcessBatch != nil:
		return errors.New("partition: Config.Process and Config.ProcessBatch are both set; set only one of them")
	case c.MaxBatch < 0:
		return fmt.Errorf("partition: Config.MaxBatch = %d is negative; set a positive cap, or 0 for %d", c.MaxBatch, DefaultMaxBatch)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		def  time.Duration
	}{
		{"Grace", c.Grace, DefaultGrace},
		{"SessionTimeout", c.SessionTimeout, DefaultSessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval, DefaultHeartbeatInterval},
		{"CommitInterval", c.CommitInterval, DefaultCommitInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("partition: Config.%s = %v is negative; set a positive duration, or 0 for the default %v", d.name, d.v, d.def)
		}
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(DefaultHeartbeatInterval, c.SessionTimeout/3)
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = DefaultCommitInterval
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Process != nil {
		process := c.Process
		c.ProcessBatch = func(ctx context.Context, recs []*kgo.Record) (int, error) {
			if err := process(ctx, recs[0]); err != nil {
				return 0, err
			}
			return 1, nil
		}
		c.MaxBatch = 1
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return fmt.Errorf("partition: Config.HeartbeatInterval = %v is not below Config.SessionTimeout = %v; set it to about a third of the session timeout (%v)",
			c.HeartbeatInterval, c.SessionTimeout, c.SessionTimeout/3)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Consumer is a consumer-group member that treats each assigned partition as
// a leadership: the partition gets its own goroutine and context, which end
// when the partition is revoked or lost. Create it with New and call Run once.
type Consumer struct {
	cfg Config
	log *slog.Logger
	cl  *kgo.Client
	ran atomic.Bool

	wg sync.WaitGroup // partition goroutines

	seeks seeker // Seek requests, applied by the poll loop

	drained chan struct{} // a partition caught up with marks to commit (buffered: 1)

	mu      sync.Mutex
	parts   map[int32]*part
	base    context.Context // Run's context without its cancellation; nil before Run
	closing bool            // Run is shutting down: start no more partitions
}

// New validates cfg and builds the Kafka client. The client does not join
// the group until Run: call Run exactly once, which closes the client when
// it returns.
func New(cfg Config) (*Consumer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		cfg:     cfg,
		log:     cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group, "member", cfg.InstanceID),
		parts:   map[int32]*part{},
		drained: make(chan struct{}, 1),
	}
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.FetchMaxWait(defaultFetchMaxWait)}
	opts = append(opts, cfg.ClientOpts...)
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		// No ConsumeTopics here: a group client with topics joins at
		// once. Run adds the topic, so the group is joined only while
		// Run owns the partition goroutines.
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Keep transaction markers: each one is marked as it passes in
		// order, so the committed offset moves past it and a drained
		// group shows a lag of 0 in every Kafka tool, not 1 per
		// partition forever.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(cfg.CommitInterval),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.HeartbeatInterval),
		kgo.RebalanceTimeout(max(60*time.Second, 2*cfg.Grace+commitTimeout+10*time.Second)),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.ClientID(cfg.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("partition: kafka client: %w", err)
	}
	c.cl = cl
	return c, nil
}

// Client returns the Consumer's Kafka client, e.g. to produce dead letters
// over the same connections. It is valid from New until Run returns; do not
// close it, poll it or commit with it.
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Joined reports whether the Consumer is a member of its group now (it has
// a member id and generation), whether or not it owns partitions: a
// readiness signal.
func (c *Consumer) Joined() bool {
	id, gen := c.cl.GroupMetadata()
	return id != "" && gen >= 0
}

// Assigned returns the partitions that currently have a goroutine, sorted.
func (c *Consumer) Assigned() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Run joins the group and processes the assigned partitions until ctx is
// done. Then it stops polling, revokes every partition (each in-flight
// record gets Config.Grace to finish), commits the marked offsets, leaves
// the group and closes the client. It returns nil after a shutdown by ctx,
// once every goroutine it started has exited. If ctx is already done, Run
// closes the client without joining.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.ran.CompareAndSwap(false, true) {
		return errors.New("partition: Run called twice; a Consumer runs once, create a new one with New")
	}
	if ctx.Err() != nil {
		c.cl.Close()
		return nil
	}
	c.mu.Lock()
	c.base = context.WithoutCancel(ctx)
	c.mu.Unlock()

	committed := make(chan struct{})
	go func() {
		defer close(committed)
		c.commitDrained(ctx)
	}()
	c.cl.AddConsumeTopics(c.cfg.Topic)
	c.poll(ctx)
	<-committed // ctx is done: it returns at once, or when its commit in flight does
	c.shutdown()
	return nil
}

// commitDrained commits the marked offsets whenever a partition goroutine
// has caught up (its queue is empty) with new marks, at most once per
// minDrainCommitGap, until ctx is done. So the end of a backlog or of a
// tick's windows is committed within milliseconds rather than at the next
// CommitInterval, and a group's lag reads 0 as soon as the work is done.
// Like the periodic commits, it commits only marks, i.e. settled records.
func (c *Consumer) commitDrained(ctx context.Context) {
	gap := min(minDrainCommitGap, c.cfg.CommitInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.drained:
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, commitTimeout)
		err := c.cl.CommitMarkedOffsets(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			// The periodic commit tries again within CommitInterval.
			c.log.Debug("committing marked offsets of a drained partition failed", "err", err)
		}
		if err := clock.Sleep(ctx, gap-time.Since(start)); err != nil {
			return
		}
	}
}

// poll fetches until ctx is done and hands each partition's records to its
// goroutine. With BlockRebalanceOnPoll, no rebalance callback runs between
// a poll and AllowRebalance, so the records are handed to the goroutine of
// the assignment they were fetched for. Handing over never blocks (queues
// are unbounded; fetching a partition with a long queue is paused), so the
// rebalance waits for microseconds, not for processing.
func (c *Consumer) poll(ctx context.Context) {
	for {
		pctx := c.seeks.pollContext(ctx)
		fetches := c.cl.PollFetches(pctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			c.cl.AllowRebalance()
			c.seeks.close()
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) && pctx.Err() != nil {
				return // woken up by Seek
			}
			var gs *kgo.ErrGroupSession
			if errors.As(err, &gs) {
				c.log.Warn("group session ended; rejoining", "reason", gs.Err.Error())
				return
			}
			c.log.Warn("fetch error", "partition", p, "err", err)
		})
		fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if ftp.Topic != c.cfg.Topic || len(ftp.Records) == 0 {
				return
			}
			c.mu.Lock()
			p := c.parts[ftp.Partition]
			c.mu.Unlock()
			if p == nil {
				// Cannot happen while the rebalance is blocked; if
				// it did, the records are not marked, so the next
				// owner (or this member after a rebalance) gets them.
				c.log.Error("dropping fetched records of a partition that has no goroutine",
					"partition", ftp.Partition, "records", len(ftp.Records))
				return
			}
			p.push(ftp.Records)
		})
		c.applySeeks()
		c.cl.AllowRebalance()
	}
}

// shutdown revokes everything while the member still heartbeats, commits,
// leaves the group and closes the client.
func (c *Consumer) shutdown() {
	c.mu.Lock()
	c.closing = true
	parts := make([]*part, 0, len(c.parts))
	for _, p := range c.parts {
		parts = append(parts, p)
	}
	c.mu.Unlock()
	c.revoke(context.Background(), parts, "shutdown")

	lctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	if err := c.cl.LeaveGroupContext(lctx); err != nil {
		c.log.Warn("leaving the group failed; the group reassigns our partitions after the session timeout", "err", err, "session_timeout", c.cfg.SessionTimeout)
	}
	cancel()
	c.cl.Close()
	c.wg.Wait()
	c.log.Info("consumer stopped")
}

// onAssigned starts a goroutine per newly assigned partition.
func (c *Consumer) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	ps := slices.Sorted(slices.Values(assigned[c.cfg.Topic]))
	if len(ps) == 0 {
		return
	}
	c.mu.Lock()
	if c.closing || c.base == nil {
		c.mu.Unlock()
		for _, p := range ps {
			c.log.Info("partition assigned while shutting down; not processing it", "partition", p, "reason", "shutdown")
		}
		return
	}
	var started []int32
	for _, n := range ps {
		if c.parts[n] != nil {
			c.log.Warn("partition assigned again while its goroutine runs; keeping it", "partition", n, "reason", "rebalance")
			continue
		}
		c.startLocked(n)
		started = append(started, n)
	}
	c.mu.Unlock()
	for _, n := range started {
		c.log.Info("partition assigned", "partition", n, "reason", "rebalance")
	}
	if len(started) > 0 && c.cfg.OnAssigned != nil {
		c.cfg.OnAssigned(started)
	}
}

// startLocked starts partition n's goroutine; c.mu must be held.
func (c *Consumer) startLocked(n int32) {
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.WithValue(c.base, haltKey{}, stop))
	p := &part{
		c:      c,
		n:      n,
		ctx:    ctx,
		cancel: cancel,
		stop:   stop,
		done:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
	}
	c.parts[n] = p
	c.wg.Add(1)
	go p.run()
}

// onRevoked stops the revoked partitions' goroutines (in-flight records get
// Grace) and commits what they marked before the group moves them.
func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	reason := "rebalance"
	c.mu.Lock()
	if c.closing {
		reason = "shutdown"
	}
	c.mu.Unlock()
	c.revoke(ctx, c.lookup(revoked[c.cfg.Topic]), reason)
}

// onLost cancels the lost partitions at once and commits nothing: another
// member may own them already.
func (c *Consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := c.lookup(lost[c.cfg.Topic])
	if len(parts) == 0 {
		return
	}
	for _, p := range parts {
		p.mu.Lock()
		p.lost = true // no more marks: they would be committed for a partition that is not ours
		p.mu.Unlock()
		p.halt()
		p.cancel()
	}
	for _, p := range parts {
		p.wait()
	}
	ps := c.remove(parts)
	for _, n := range ps {
		c.log.Warn("partition lost; in-flight record cancelled, nothing committed", "partition", n, "reason", "session lost or fenced")
	}
	if len(ps) > 0 && c.cfg.OnRevoked != nil {
		c.cfg.OnRevoked(ps)
	}
}

// revoke stops parts (Grace for in-flight records), waits for them, commits
// the marked offsets and forgets the parts.
func (c *Consumer) revoke(ctx context.Context, parts []*part, reason string) {
	if len(parts) == 0 {
		return
	}
	for _, p := range parts {
		p.halt()
	}
	grace := time.NewTimer(c.cfg.Grace)
	defer grace.Stop()
	expired := false
	for _, p := range parts {
		if expired {
			break
		}
		select {
		case <-p.done:
		case <-grace.C:
			expired = true
		}
	}
	if expired {
		for _, p := range parts {
			select {
			case <-p.done:
			default:
				c.log.Warn("revoke grace expired; cancelling the in-flight record", "partition", p.n, "reason", reason, "grace", c.cfg.Grace)
				p.cancel()
			}
		}
	}
	for _, p := range parts {
		p.wait()
		p.cancel()
	}

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	err := c.cl.CommitMarkedOffsets(cctx)
	cancel()
	if err != nil {
		c.log.Warn("committing marked offsets on revoke failed; the next owner re-processes from the last committed offset", "reason", reason, "err", err)
	}
	ps := c.remove(parts)
	for _, n := range ps {
		c.log.Info("partition revoked", "partition", n, "reason", reason)
	}
	if len(ps) > 0 && c.cfg.OnRevoked != nil {
		c.cfg.OnRevoked(ps)
	}
}

// lookup returns the running parts among ps.
func (c *Consumer) lookup(ps []int32) []*part {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []*part
	for _, n := range ps {
		if p := c.parts[n]; p != nil {
			parts = append(parts, p)
		}
	}
	return parts
}

// remove forgets stopped parts and un-pauses their fetching: pauses outlive
// assignments in kgo, and a partition assigned to us again must fetch. It
// returns the partitions it removed (a concurrent revoke of the same part,
// e.g. shutdown racing a rebalance, removes it only once).
func (c *Consumer) remove(parts []*part) []int32 {
	var removed []int32
	c.mu.Lock()
	for _, p := range parts {
		if c.parts[p.n] == p {
			delete(c.parts, p.n)
			removed = append(removed, p.n)
		}
	}
	c.mu.Unlock()
	for _, p := range parts {
		p.mu.Lock()
		if p.paused {
			p.paused = false
			c.cl.ResumeFetchPartitions(map[string][]int32{c.cfg.Topic: {p.n}})
		}
		p.queue = nil
		p.mu.Unlock()
	}
	return removed
}

// part is one assigned partition: its goroutine, context and queue.
type part struct {
	c      *Consumer
	n      int32
	ctx    context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	stop     chan struct{} // closed on revoke/loss: take no new record
	done     chan struct{} // closed when the goroutine exited
	wake     chan struct{} // records were queued

	mu     sync.Mutex
	queue  []*kgo.Record
	paused bool // fetching paused because the queue is long
	lost   bool // lost: mark nothing more
	dirty  bool // marked since the queue last ran empty
}

// push queues records (called by the poll loop only) and pauses fetching
// the partition if its queue is long.
func (p *part) push(recs []*kgo.Record) {
	p.mu.Lock()
	p.queue = append(p.queue, recs...)
	if !p.paused && len(p.queue) >= maxQueued {
		p.paused = true
		p.c.cl.PauseFetchPartitions(map[string][]int32{p.c.cfg.Topic: {p.n}})
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// next takes up to max queued records off the queue; false once the part
// is stopped.
func (p *part) next(max int) ([]*kgo.Record, bool) {
	for {
		select {
		case <-p.stop:
			return nil, false
		case <-p.ctx.Done():
			return nil, false
		default:
		}
		p.mu.Lock()
		if len(p.queue) > 0 {
			n := min(max, len(p.queue))
			recs := slices.Clone(p.queue[:n])
			clear(p.queue[:n])
			p.queue = p.queue[n:]
			if p.paused && len(p.queue) <= resumeQueued {
				p.paused = false
				p.c.cl.ResumeFetchPartitions(map[string][]int32{p.c.cfg.Topic: {p.n}})
			}
			p.mu.Unlock()
			return recs, true
		}
		dirty := p.dirty
		p.dirty = false
		p.mu.Unlock()
		if dirty {
			// Caught up: have what was marked committed now.
			select {
			case p.c.drained <- struct{}{}:
			default: // a commit is requested already
			}
		}
		select {
		case <-p.wake:
		case <-p.stop:
			return nil, false
		case <-p.ctx.Done():
			return nil, false
		}
	}
}

// mark marks rec (and so every earlier record) for commit, unless the
// partition was lost.
func (p *part) mark(rec *kgo.Record) {
	p.mu.Lock()
	if !p.lost {
		p.c.cl.MarkCommitRecords(rec)
		p.dirty = true
	}
	p.mu.Unlock()
}

// run processes the partition's records in order: runs of data records go
// to ProcessBatch, transaction markers are marked as they pass.
func (p *part) run() {
	defer p.c.wg.Done()
	defer close(p.done)
	for {
		recs, ok := p.next(p.c.cfg.MaxBatch)
		if !ok {
			return
		}
		for len(recs) > 0 {
			if recs[0].Attrs.IsControl() {
				p.mark(recs[0])
				recs = recs[1:]
				continue
			}
			end := 1
			for end < len(recs) && !recs[end].Attrs.IsControl() {
				end++
			}
			n, err := p.c.cfg.ProcessBatch(p.ctx, recs[:end])
			if n < 0 || n > end {
				p.c.log.Error("process reported more records settled than it was given; treating none as settled",
					"partition", p.n, "settled", n, "records", end)
				n, err = 0, fmt.Errorf("partition: process settled %d of %d records", n, end)
			}
			if n > 0 {
				p.mark(recs[n-1])
				recs = recs[n:]
			}
			if p.ctx.Err() != nil || Halted(p.ctx) {
				return
			}
			if err == nil && n > 0 {
				continue
			}
			// A ProcessFunc that breaks its contract: never skip the
			// record, never spin; retry it unless we are revoked.
			if err == nil {
				err = errors.New("process settled no record and returned no error")
			}
			p.c.log.Error("process returned an error while its context is live; retrying the record in 1s",
				"partition", p.n, "offset", recs[0].Offset, "err", err)
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-p.stop:
				t.Stop()
				return
			case <-p.ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// halt tells the goroutine to take no new record.
func (p *part) halt() { p.stopOnce.Do(func() { close(p.stop) }) }

// wait waits for the goroutine to exit, complaining every Grace: a
// ProcessFunc that ignores its cancelled context blocks the rebalance.
func (p *part) wait() {
	t := time.NewTicker(p.c.cfg.Grace)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			if p.ctx.Err() != nil {
				p.c.log.Error("partition goroutine has not returned after its context was cancelled; ProcessFunc must return when ctx is done",
					"partition", p.n)
			}
		}
	}
}
