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

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/configerr"
)

// ProcessFunc processes one record of a partition the Consumer owns, for
// callers that settle a partition's records strictly one after the other
// (Config.Process).
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

// ServeFunc serves one partition this member owns (Config.Serve), on a
// goroutine of its own, for as long as the ownership lasts: it takes the
// partition's records as they are fetched (Owned.Ready, Owned.Take),
// processes them in any order and with any concurrency it likes, and
// reports each record it has finished with Owned.Settle. The Consumer
// commits only the contiguous prefix of settled records, so a record is
// never committed before every record below it is settled.
//
// Once Owned.Halted is closed (the partition is being revoked, or seeked by
// Consumer.Seek) it starts nothing new, lets the work in flight finish and
// settles it, and returns; ctx is cancelled Config.Grace after the halt, or
// at once when the partition is lost (then nothing more is committed), and
// ServeFunc must return promptly after that: a revoke or loss waits for it.
// ctx carries the values of Run's context.
type ServeFunc func(ctx context.Context, p *Owned)

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
	// DefaultMaxUncommitted is Config.MaxUncommitted when it is zero.
	DefaultMaxUncommitted = 10_000
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
// fetching resumes (see Config.MaxUncommitted) is fetched only once the
// fetch in flight returns: when the other partitions have no new records,
// that fetch waits this long, and the resumed partition's backlog with it.
const defaultFetchMaxWait = 250 * time.Millisecond

// defaultFetchMaxPartitionBytes bounds the compressed bytes one fetch
// brings of a partition (kgo's default is 1 MiB). Windows are small JSON
// records that compress about tenfold in a batch, so 1 MiB brought some
// 27,000 records at once: more than MaxUncommitted lets a partition hold,
// so the fetch kgo had buffered behind it was dropped at each pause and
// fetched and decompressed again at each resume (a backlog of 100,000
// windows decoded 145,000 records), and the heap held 100 MB. At 128 KiB
// a fetch brings a batch or two (the same backlog decoded 102,500; a
// broker always returns at least one whole batch, however large).
// Served row: BenchmarkBurst (test/perf), the no-op burst on 1 partition:
// the worker's CPU per window 30.7 -> 27.3 µs in one pair, kfake, 2 CPUs
// (docs/performance.md).
const defaultFetchMaxPartitionBytes = 128 << 10

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
	// Process processes records, one at a time per partition, in order.
	// Exactly one of Process and Serve is required.
	Process ProcessFunc
	// Serve serves each owned partition: it takes the records as they are
	// fetched and settles them in any order (see ServeFunc). Exactly one of
	// Process and Serve is required.
	Serve ServeFunc
	// MaxUncommitted bounds the records of a partition that were fetched
	// and are not yet below its commit point (the first record not
	// settled): when that many are held, fetching the partition is paused,
	// and it resumes once they are down to half. It bounds the memory a
	// partition holds and the records a crash re-delivers (the next owner
	// starts at the commit point). Default 10,000.
	MaxUncommitted int
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

// configError is a *configerr.Error about field of Config.
func configError(field string, value any, reason string, related ...string) error {
	return &configerr.Error{Op: "partition", Field: field, Value: value, Reason: reason, Related: related}
}

// validate applies the defaults and checks every field; an error is a
// *configerr.Error.
func (c *Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return configError("Config.Brokers", nil, `is empty; set at least one seed broker, e.g. "localhost:9092"`)
	case c.Group == "":
		return configError("Config.Group", nil, `is empty; set the consumer group name, e.g. "kjob-workers"`)
	case c.Topic == "":
		return configError("Config.Topic", nil, `is empty; set the topic to consume, e.g. "kjob.windows"`)
	case c.Process == nil && c.Serve == nil:
		return configError("Config.Process", nil, "and Config.Serve are nil; set one of them to the function that processes records", "Config.Serve")
	case c.Process != nil && c.Serve != nil:
		return configError("Config.Process", nil, "and Config.Serve are both set; set only one of them", "Config.Serve")
	case c.MaxUncommitted < 0:
		return configError("Config.MaxUncommitted", c.MaxUncommitted, fmt.Sprintf("is negative; set a positive bound, or 0 for %d", DefaultMaxUncommitted))
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
			return configError("Config."+d.name, d.v, fmt.Sprintf("is negative; set a positive duration, or 0 for the default %v", d.def))
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
	if c.MaxUncommitted == 0 {
		c.MaxUncommitted = DefaultMaxUncommitted
	}

	if c.HeartbeatInterval >= c.SessionTimeout {
		return configError("Config.HeartbeatInterval", c.HeartbeatInterval, fmt.Sprintf("is not below Config.SessionTimeout = %v; set it to about a third of the session timeout (%v)",
			c.SessionTimeout, c.SessionTimeout/3), "Config.SessionTimeout")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Process != nil {
		c.Serve = serveInOrder(c.Process, c.Logger)
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
	// stopClient cancels the client's context: Close waits for a join or
	// sync request in flight, up to the rebalance timeout, unless it is
	// cancelled (shutdown).
	stopClient context.CancelFunc
	ran        atomic.Bool

	wg sync.WaitGroup // partition goroutines

	seeks seeker // Seek requests, applied by the poll loop

	drained chan struct{} // a partition caught up with marks to commit (buffered: 1)

	mu      sync.Mutex
	parts   map[int32]*part
	base    context.Context // Run's context without its cancellation; nil before Run
	closing bool            // Run is shutting down: start no more partitions
}

// New validates cfg (a setting it refuses is a *configerr.Error) and
// builds the Kafka client. The client does not join
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
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.FetchMaxWait(defaultFetchMaxWait), kgo.FetchMaxPartitionBytes(defaultFetchMaxPartitionBytes), kgo.WithHooks(&connWatch{c: c})}
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
	cctx, stop := context.WithCancel(context.Background())
	opts = append(opts, kgo.WithContext(cctx))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		stop()
		return nil, fmt.Errorf("partition: kafka client: %w", err)
	}
	c.cl, c.stopClient = cl, stop
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
		c.stopClient()
		return nil
	}
	c.mu.Lock()
	c.base = context.WithoutCancel(ctx)
	c.mu.Unlock()

	committed, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(committed)
		c.commitDrained(ctx)
	}()
	go func() {
		defer close(watched)
		c.watchTopic(ctx)
	}()
	c.cl.AddConsumeTopics(c.cfg.Topic)
	c.poll(ctx)
	<-committed // ctx is done: it returns at once, or when its commit in flight does
	<-watched
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
	err := c.cl.LeaveGroupContext(lctx)
	cancel()
	if err != nil {
		c.log.Warn("leaving the group failed; the group reassigns our partitions after the session timeout", "err", err, "session_timeout", c.cfg.SessionTimeout)
		// A join or sync request in flight (the group's coordinator was
		// lost and is not answering it) runs on the client's context,
		// and Close would wait for it until the rebalance timeout: end
		// it now.
		c.stopClient()
	}
	c.cl.Close()
	c.stopClient()
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
	ctx, cancel := context.WithCancel(c.base)
	p := &part{
		c:      c,
		n:      n,
		ctx:    ctx,
		cancel: cancel,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		ready:  make(chan struct{}, 1),
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
		p.front = frontier{}
		p.mu.Unlock()
	}
	return removed
}

// part is one assigned partition: its goroutine, context, queue and
// commit frontier.
type part struct {
	c      *Consumer
	n      int32
	ctx    context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	stop     chan struct{} // closed on revoke/loss/seek: start nothing new
	done     chan struct{} // closed when the goroutine exited
	ready    chan struct{} // records were queued (buffered: 1)

	mu     sync.Mutex
	queue  []*kgo.Record // data records fetched and not yet taken
	front  frontier      // records fetched and not yet below the commit point
	paused bool          // fetching paused: MaxUncommitted records are held
	lost   bool          // lost: mark nothing more
	closed bool          // the ServeFunc returned: settle nothing more
	dirty  bool          // marked since the frontier last caught up
}

// Owned is a partition this member owns, as its ServeFunc sees it. Its
// methods are safe for concurrent use.
type Owned struct{ p *part }

// Partition returns the partition's number.
func (o *Owned) Partition() int32 { return o.p.n }

// Ready returns a channel that receives a value when records were queued
// since it last did: call Take then.
func (o *Owned) Ready() <-chan struct{} { return o.p.ready }

// Take returns the data records fetched since the last Take, in offset
// order (transaction markers settle themselves and are never returned).
func (o *Owned) Take() []*kgo.Record {
	p := o.p
	p.mu.Lock()
	defer p.mu.Unlock()
	recs := p.queue
	p.queue = nil
	return recs
}

// Settle reports that rec, a record Take returned, is finished with (done,
// skipped, dead-lettered: it must not be delivered again). Records may be
// settled in any order: the commit point moves past the contiguous prefix
// of settled records only. Settling a record twice, or after the ServeFunc
// returned, does nothing.
func (o *Owned) Settle(rec *kgo.Record) {
	p := o.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.front.settle(rec.Offset) {
		return
	}
	p.advance()
}

// Halted returns a channel closed when the partition is being revoked or
// seeked (Consumer.Seek): start nothing new, finish and settle the work in
// flight, and return. The ServeFunc's context is cancelled Config.Grace
// later.
func (o *Owned) Halted() <-chan struct{} { return o.p.stop }

// Uncommitted returns how many records were fetched and are not yet below
// the commit point: what a crash of this member now would have the next
// owner deliver again (bounded by Config.MaxUncommitted, plus the records
// of one fetch).
func (o *Owned) Uncommitted() int {
	p := o.p
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.front.len()
}

// push queues records (called by the poll loop only) and pauses fetching
// the partition if it holds MaxUncommitted records.
func (p *part) push(recs []*kgo.Record) {
	p.mu.Lock()
	for _, r := range recs {
		control := r.Attrs.IsControl()
		p.front.push(r, control)
		if !control {
			p.queue = append(p.queue, r)
		}
	}
	p.advance() // past leading transaction markers
	if !p.paused && p.front.len() >= p.c.cfg.MaxUncommitted {
		p.paused = true
		p.c.cl.PauseFetchPartitions(map[string][]int32{p.c.cfg.Topic: {p.n}})
	}
	queued := len(p.queue) > 0
	p.mu.Unlock()
	if queued {
		select {
		case p.ready <- struct{}{}:
		default:
		}
	}
}

// advance moves the commit point past the settled records at the front
// and marks the last of them for commit (unless the partition was lost);
// p.mu must be held.
func (p *part) advance() {
	last := p.front.advance()
	if last != nil && !p.lost {
		p.c.cl.MarkCommitRecords(last)
		p.dirty = true
	}
	if p.paused && p.front.len() <= p.c.cfg.MaxUncommitted/2 {
		p.paused = false
		p.c.cl.ResumeFetchPartitions(map[string][]int32{p.c.cfg.Topic: {p.n}})
	}
	if p.front.len() == 0 && p.dirty {
		// Caught up: have what was marked committed now.
		p.dirty = false
		select {
		case p.c.drained <- struct{}{}:
		default: // a commit is requested already
		}
	}
}

// run serves the partition until the ServeFunc returns.
func (p *part) run() {
	defer p.c.wg.Done()
	defer close(p.done)
	p.c.cfg.Serve(p.ctx, &Owned{p: p})
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// serveInOrder is the ServeFunc of Config.Process: it processes the
// partition's records one after the other and settles each as process
// returns nil for it.
func serveInOrder(process ProcessFunc, log *slog.Logger) ServeFunc {
	return func(ctx context.Context, o *Owned) {
		for {
			select {
			case <-o.Halted():
				return
			case <-ctx.Done():
				return
			case <-o.Ready():
			}
			for _, rec := range o.Take() {
				for {
					select {
					case <-o.Halted():
						return
					case <-ctx.Done():
						return
					default:
					}
					err := process(ctx, rec)
					if err == nil {
						o.Settle(rec)
						break
					}
					if ctx.Err() != nil {
						return
					}
					// A ProcessFunc that breaks its contract: never skip the
					// record, never spin; retry it unless we are revoked.
					log.Error("process returned an error while its context is live; retrying the record in 1s",
						"partition", o.Partition(), "offset", rec.Offset, "err", err)
					t := time.NewTimer(time.Second)
					select {
					case <-t.C:
					case <-o.Halted():
						t.Stop()
						return
					case <-ctx.Done():
						t.Stop()
						return
					}
				}
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
