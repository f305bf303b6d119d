package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/store/topic"
	windowrec "github.com/kjob/kjob/internal/store/window" // the package; window is this file's type
	"github.com/kjob/kjob/schedule"
)

// ErrFenced is returned (wrapped) when a newer holder of the transactional
// id has fenced this producer: another replica took over publishing.
var ErrFenced = errors.New("producer: fenced by a newer producer with the same transactional id")

// ErrForeignState is returned (wrapped) by Run when the state topic's
// latest record of a job was written by a deployment of another namespace:
// two deployments share the topic (an explicit Topic or StateTopic
// pointing at another deployment's, or deployments that shared the
// defaults before topics derived from the namespace). The producer
// refuses to lead from it: it would resume the other deployment's jobs
// and publish windows into its topic. It publishes nothing and Run stops;
// give the deployment a topic of its own.
var ErrForeignState = errors.New("producer: the state topic holds another deployment's jobs")

// Elector runs lead while this replica holds leadership; lead's context is
// cancelled when leadership is lost. *lease.Elector implements it.
type Elector interface {
	Run(ctx context.Context, lead func(ctx context.Context) error) error
}

// Config configures a Producer. Zero values take the documented defaults.
type Config struct {
	// Brokers are the seed brokers (required).
	Brokers []string
	// ClientOpts are appended to every Kafka client's options (TLS, SASL,
	// logging, hooks). The clients have distinct client ids (kjob-producer
	// for the transactional one, kjob-producer-state, kjob-producer-admin, and kjob-producer-schedules, -schedules-follow, -schedule-log, -requests and -requests-admin for the schedules readers),
	// so per-client hooks such as kprom with WithClientLabel can tell the
	// ones alive at the same time apart.
	ClientOpts []kgo.Opt
	// ReaderOpts, if not nil, replace ClientOpts for the schedules'
	// readers (the schedules topic, followed while standing by and read
	// at a takeover, the change log, the requests on the control topic),
	// which start and stop while the term's client produces: pass the connection options (TLS, SASL) without metrics
	// hooks. kprom's Metrics is not safe for a client created while
	// another client sharing it runs (OnNewClient replaces the vectors the
	// running client's hooks use), so a kprom hook must not be in
	// ReaderOpts.
	ReaderOpts []kgo.Opt
	// Namespace names the deployment (see names.Deployment): it derives
	// the default Topic and TransactionalID, and labels every window and
	// state record. Default "kjob" (names.DefaultNamespace).
	Namespace string
	// Topic receives the window records. Default the namespace's windows
	// topic: "kjob.windows" for the default namespace, "kjob.<ns>.windows"
	// for any other (names.DefaultTopicOf).
	Topic string
	// StateTopic is the compacted topic holding the last published window of
	// each job. Default Topic + ".state" (names.Deployment.StateTopic).
	StateTopic string
	// Partitions is the windows topic's partition count when it is created
	// (default DefaultPartitions, 1). An existing topic with another count
	// stops Run.
	Partitions int32
	// ReplicationFactor for created topics (default 1).
	ReplicationFactor int16
	// TransactionalID is the one transactional id of this kjob deployment:
	// every producer replica of the deployment must use the same value, and
	// no other deployment may. Default "kjob-producer-" + Namespace
	// (names.Deployment.TransactionalID), as cmd/producer has always used.
	//
	// Earlier versions of the library defaulted to "kjob-producer-" +
	// Topic instead. A program that embeds the producer and relied on that
	// default must set TransactionalID to that value (or stop every
	// replica before upgrading): replicas with two different ids do not
	// fence each other, and both would publish.
	TransactionalID string
	// TransactionTimeout bounds how long an open transaction of a crashed
	// leader can hold back read-committed consumers. Default
	// DefaultTransactionTimeout (10s).
	TransactionTimeout time.Duration
	// Jobs are the jobs of a schedules file (schedule.Load), imported into
	// the schedules topic by each leader under the ownership rule of
	// docs/schedules.md: an entry is written when the topic lacks the job
	// or the entry changed since it was last imported. Optional: without
	// a file the producer publishes the jobs of the schedules topic.
	Jobs []*schedule.Job
	// FileSource names the schedules file Jobs came from (Kind
	// specs.SourceFile, the path and the SHA-256 of its content), for the
	// change log.
	FileSource specs.Source
	// SchedulesTopic holds each job's current spec (compacted); default
	// names.Deployment.SchedulesTopic. ScheduleLogTopic is the
	// append-only change log; default names.Deployment.ScheduleLogTopic.
	// ControlTopic carries schedule change requests and their results;
	// default names.Deployment.ControlTopic.
	SchedulesTopic   string
	ScheduleLogTopic string
	ControlTopic     string
	// Replica names this replica in the results it writes (default
	// "producer").
	Replica string
	// OnMalformed, if set, is called for each record of the schedules
	// topic, the change log or the control topic that is skipped as
	// malformed (or whose spec does not validate), with the topic.
	OnMalformed func(topic string)
	// Elector decides leadership (required).
	Elector Elector
	// MisfireGrace is how late a window may be published because
	// leadership changed hands, whatever its job's Catchup (Quartz calls
	// this the misfire threshold). A replica that starts leading at L
	// publishes every window after the job's last published one that fell
	// due at or after L - MisfireGrace: those due before L with trigger
	// "catchup", those due after L (during its own tenure, e.g. while a
	// failed transaction was retried) with trigger "schedule". A job's
	// Catchup governs only windows older than that. A leader whose
	// transactions keep failing (a Kafka outage) publishes, once Kafka is
	// back, the windows of the last max(Catchup, MisfireGrace, 1m) and
	// skips and counts older ones, as it does windows past the catch-up
	// limit. A lease store outage (Redis down, restarted or failing over)
	// is treated the same way: no replica can prove leadership while it
	// lasts, so none publishes, and the replica that wins the lease after
	// it publishes the windows due since the store became unreachable
	// (lease.UnreachableBefore), within the same max(Catchup,
	// MisfireGrace, 1m), instead of only those of the last MisfireGrace
	// (a Kubernetes Lease elector does not report such an outage). L is when the Elector
	// calls lead (the lease is won), before fencing and reading the state,
	// so keep MisfireGrace above the longest leaderless gap to be absorbed:
	// for a crashed or paused leader, the lease TTL plus the standby's
	// retry interval, plus a margin for a publish that was under way.
	// Default DefaultMisfireGrace (10s: five times the lease's default 2s TTL);
	// negative: no grace, only Catchup applies.
	MisfireGrace time.Duration
	// PublishLead is how long before its start a window is published: the
	// leader's timer fires PublishLead before each start and publishes the
	// windows due by then, so that 1,000 windows due at one instant are
	// committed, fetched, decoded and claimed by the workers before it,
	// and their handlers start at it (the worker never starts a handler
	// before its window's start; docs/performance.md, the herd). A
	// schedule change, pause or delete committed at T takes effect at
	// T + PublishLead: the windows published ahead by then stand (the
	// change's EffectiveFrom is T + PublishLead). Default
	// DefaultPublishLead (500ms); negative: publish at the start (0).
	PublishLead time.Duration
	// MaxBatch bounds the windows published in one transaction. Default
	// 5000: a burst of windows due at the same instant (thousands of jobs
	// at the top of the minute) goes out in few transactions.
	MaxBatch int
	// Clock is the time source. Default the system clock.
	Clock clock.Clock
	// Logger receives logs. Default slog.Default().
	Logger *slog.Logger
	// OnPublished, if set, is called after each committed transaction that
	// published windows, with those windows.
	OnPublished func([]Published)
	// OnSkipped, if set, is called when windows older than a job's catch-up
	// limit are skipped.
	OnSkipped func(job string, count int)
	// LegacyPauses, if set, is the Redis pause list of kjob before pauses
	// moved into the spec (*pause.Store implements it). At the start of
	// each term, before it publishes, the leader commits each entry as a
	// spec pause (source specs.SourceMigration, with the entry's by and
	// since; a job the file import creates is created paused), then
	// deletes the entry; an entry for a job that neither the schedules
	// topic nor the file has is logged and deleted. If the list cannot be
	// read the term fails and is retried: a pause from before the upgrade
	// is never silently lifted. See docs/schedules.md, "Upgrading".
	LegacyPauses LegacyPauses
	// Sign, if set, signs each window record before it is produced, e.g.
	// (*signing.Signer).Sign. A window it fails on is logged and skipped.
	Sign func(*kgo.Record) error
}

// Published describes one window a committed transaction made visible.
type Published struct {
	// ID is the window id, "<job>@<window start, RFC 3339 UTC>".
	ID string
	// Job is the job name (the record key).
	Job string
	// Trigger is jobmsg.TriggerSchedule, or jobmsg.TriggerCatchup for a
	// window that fell due while no leader was live.
	Trigger jobmsg.Trigger
	// Start is the window's start.
	Start time.Time
	// PublishedAt is when the producer built the record (its
	// published_at), just before the transaction committed.
	PublishedAt time.Time
}

// Producer publishes windows while its replica leads. Create it with New.
type Producer struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	status Status // Next is unused: Status reads q
	q      *queue // the current (or last) term's timer heap; written under mu

	stop    context.CancelFunc // ends Run's campaign: set by Run, called by refuse; under mu
	refused error              // why this producer refused to lead (ErrForeignState); under mu

	stateReadStall time.Duration // StateReadStall; tests shorten it

	// topicsChecked is set once Run has created or checked the
	// deployment's topics: before that, a client of the deployment (a
	// Schedules request, kjobctl) can find its topics missing.
	topicsChecked atomic.Bool

	// termState is the state topic as the current term read it (job ->
	// last window); only the term's goroutine uses it.
	termState map[string]time.Time

	// follower holds the replica's one view of the schedules topic: kept
	// up to date while standing by, taken over by a tenure.
	follower *specFollower
	// fileJobs maps the specs of the schedules file's import requests
	// (fileRequests) to the file's jobs, which were validated when the
	// file was loaded: plan uses them instead of validating each spec
	// again, and the leader's view shares them with Config.Jobs instead
	// of holding a second copy of every job. Only the term's goroutine
	// uses it, during the import.
	fileJobs map[*schedule.Spec]*schedule.Job
}

// Status is a snapshot of what the producer is doing, for status pages.
type Status struct {
	// Leading reports whether this replica is publishing now.
	Leading bool
	// Epoch is the producer epoch of the current term (transactional fencing
	// epoch), valid while Leading.
	Epoch int16
	// Last maps job name to the start of the last window published.
	Last map[string]time.Time
	// Next maps job name to the start of its next window.
	Next map[string]time.Time
}

const defaultMaxBatch = 5000

// Defaults of Config.
const (
	// DefaultPartitions is Config.Partitions when it is zero.
	DefaultPartitions = 1
	// DefaultTransactionTimeout is Config.TransactionTimeout when it is
	// zero.
	DefaultTransactionTimeout = 10 * time.Second
)

// StateReadStall bounds a new leader's read of the state topic by its
// progress: the read goes on as long as records keep arriving, however
// large the topic, and fails (the term ends and is retried) only after
// this long without a record.
const StateReadStall = 30 * time.Second

// DefaultMisfireGrace is Config.MisfireGrace when it is zero: twice
// lease.DefaultTTL, so that with the default lease settings a window that
// fell due while a crashed leader's lease ran out (at most TTL + one
// retry interval, 6s) is still published.
const DefaultMisfireGrace = 10 * time.Second

// MaxPublishLead bounds Config.PublishLead: a change takes effect this
// long after it is committed, and workers hold claims on the windows
// published ahead that long.
const MaxPublishLead = 10 * time.Second

// DefaultPublishLead is Config.PublishLead when it is zero: long enough
// for the transaction of 10,000 windows due at one instant, its
// read-committed fetch and the workers' claims to finish before the
// instant on kfake here (the herd trace in docs/performance.md: 10,000
// windows fetched within ~150ms, claimed within ~300ms), with room for a
// real cluster's commit and fetch latencies and for clock skew between
// producer and worker hosts. A change takes effect this long after it is
// committed.
const DefaultPublishLead = 500 * time.Millisecond

// configError is a *configerr.Error about field of Config (the producer's
// messages name its fields without "Config.").
func configError(field string, value any, reason string) error {
	return &configerr.Error{Op: "producer", Field: field, Value: value, Reason: reason}
}

// New validates cfg and returns a Producer. A setting it refuses is a
// *configerr.Error.
func New(cfg Config) (*Producer, error) {
	if len(cfg.Brokers) == 0 {
		return nil, configError("Brokers", nil, "is empty: set at least one seed broker (e.g. 127.0.0.1:9092)")
	}
	if cfg.Elector == nil {
		return nil, configError("Elector", nil, "is nil: use lease.NewElector")
	}
	seen := map[string]bool{}
	for i, j := range cfg.Jobs {
		if j == nil {
			return nil, configError(fmt.Sprintf("Jobs[%d]", i), nil, "is nil")
		}
		if seen[j.Name] {
			return nil, configError(fmt.Sprintf("Jobs[%d]", i), nil, fmt.Sprintf(": job name %q appears twice: names must be unique", j.Name))
		}
		seen[j.Name] = true
	}
	if cfg.Namespace == "" {
		cfg.Namespace = names.DefaultNamespace
	}
	if cfg.Topic == "" {
		cfg.Topic = names.DefaultTopicOf(cfg.Namespace)
	}
	d := names.Deployment{Namespace: cfg.Namespace, Topic: cfg.Topic}
	if cfg.StateTopic == "" {
		cfg.StateTopic = d.StateTopic()
	}
	if cfg.SchedulesTopic == "" {
		cfg.SchedulesTopic = d.SchedulesTopic()
	}
	if cfg.ScheduleLogTopic == "" {
		cfg.ScheduleLogTopic = d.ScheduleLogTopic()
	}
	if cfg.ControlTopic == "" {
		cfg.ControlTopic = d.ControlTopic()
	}
	if cfg.Replica == "" {
		cfg.Replica = "producer"
	}
	if cfg.StateTopic == cfg.Topic {
		return nil, configError("StateTopic", cfg.StateTopic, fmt.Sprintf("is the windows topic: use a separate topic (default %q)", d.StateTopic()))
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.Partitions < 0 {
		return nil, configError("Partitions", cfg.Partitions, ": must be at least 1")
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = topic.DefaultReplicationFactor
	}
	if cfg.ReplicationFactor < 0 {
		return nil, configError("ReplicationFactor", cfg.ReplicationFactor, ": must be at least 1")
	}
	if cfg.TransactionalID == "" {
		cfg.TransactionalID = d.TransactionalID()
	}
	if cfg.TransactionTimeout == 0 {
		cfg.TransactionTimeout = DefaultTransactionTimeout
	}
	if cfg.TransactionTimeout < time.Second {
		return nil, configError("TransactionTimeout", cfg.TransactionTimeout, ": must be at least 1s")
	}
	if cfg.MisfireGrace == 0 {
		cfg.MisfireGrace = DefaultMisfireGrace
	}
	if cfg.MisfireGrace < 0 {
		cfg.MisfireGrace = 0
	}
	if cfg.PublishLead == 0 {
		cfg.PublishLead = DefaultPublishLead
	}
	if cfg.PublishLead < 0 {
		cfg.PublishLead = 0
	}
	if cfg.PublishLead > MaxPublishLead {
		return nil, configError("PublishLead", cfg.PublishLead, fmt.Sprintf(": must be at most %v (a change takes effect this long after it is committed, and workers hold claims on the windows published ahead)", MaxPublishLead))
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	if cfg.MaxBatch < 1 {
		return nil, configError("MaxBatch", cfg.MaxBatch, ": must be at least 1")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Producer{cfg: cfg, log: cfg.Logger, stateReadStall: StateReadStall}
	p.follower = newSpecFollower(p)
	return p, nil
}

// Status returns a snapshot of the producer's state.
func (p *Producer) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.Last = make(map[string]time.Time, len(p.status.Last))
	for k, v := range p.status.Last {
		s.Last[k] = v
	}
	s.Next = map[string]time.Time{}
	if p.q != nil {
		s.Next = p.q.snapshot()
	}
	return s
}

// Run creates the topics if missing (stopping with an error wrapping
// topic.ErrMismatch if they exist with other settings), then campaigns for
// leadership and publishes while leading. It returns when ctx is done and
// every goroutine it started has exited: within StopGrace of ctx ending
// (plus the Elector's release of its lease) even if Kafka does not answer.
// It returns an error wrapping ErrForeignState as soon as a term found
// another deployment's jobs in the state topic (it publishes nothing then).
func (p *Producer) Run(ctx context.Context) error {
	if err := p.ensureTopics(ctx); err != nil {
		return err
	}
	p.topicsChecked.Store(true)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	p.mu.Lock()
	p.stop = stop
	p.mu.Unlock()
	// While this replica stands by, it follows the schedules topic, so
	// that a takeover reads only what was committed since (catchUp).
	fctx, stopFollowing := context.WithCancel(ctx)
	following := make(chan struct{})
	go func() {
		defer close(following)
		p.follower.run(fctx)
	}()
	err := p.cfg.Elector.Run(ctx, p.lead)
	stopFollowing()
	<-following
	p.mu.Lock()
	refused := p.refused
	p.mu.Unlock()
	if refused != nil {
		return refused
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// TopicsChecked reports whether Run has created or checked the
// deployment's topics; readiness (/readyz) waits for it.
func (p *Producer) TopicsChecked() bool { return p.topicsChecked.Load() }

// refuse stops Run with err: this producer must not lead.
func (p *Producer) refuse(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refused == nil {
		p.refused = err
	}
	if p.stop != nil {
		p.stop()
	}
}

func (p *Producer) ensureTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.cfg.Brokers...), kgo.ClientID("kjob-producer-admin")}, p.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("producer: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var advice []topic.Advice
		advice, err = topic.EnsureWithAdvice(tctx, adm,
			topic.Spec{Name: p.cfg.Topic, Partitions: p.cfg.Partitions, ReplicationFactor: p.cfg.ReplicationFactor},
			topic.Spec{Name: p.cfg.StateTopic, Partitions: 1, ReplicationFactor: p.cfg.ReplicationFactor, Compacted: true},
			topic.Spec{Name: p.cfg.SchedulesTopic, Partitions: 1, ReplicationFactor: p.cfg.ReplicationFactor, Compacted: true},
			topic.Spec{Name: p.cfg.ScheduleLogTopic, Partitions: 1, ReplicationFactor: p.cfg.ReplicationFactor, RetainForever: true},
			topic.Spec{Name: p.cfg.ControlTopic, Partitions: 1, ReplicationFactor: p.cfg.ReplicationFactor},
		)
		cancel()
		if err == nil || errors.Is(err, topic.ErrMismatch) {
			topic.LogAdvice(p.log, advice)
			return err
		}
		delay := b.Next()
		p.log.Warn("cannot reach kafka to check topics; retrying", "err", err, "retry_in", delay)
		if err := clock.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// tenure is one leadership of this replica: from the call of lead until
// its context ends. It spans one or more terms.
type tenure struct {
	start    time.Time            // when lead was called, by Config.Clock
	reported map[string]time.Time // per job, the cutoff up to which skipped windows were reported
	// storeDown, if not zero, is when the lease store became unreachable
	// before this tenure (lease.UnreachableBefore): from then on no
	// replica could lead, so windows due since are treated like those of
	// the tenure itself.
	storeDown time.Time
	// specs is the replica's view of the schedules topic, held for the
	// tenure (specFollower.acquire): each term reads the topic's tail into
	// it, then changes it as it commits.
	specs *specView
}

// retryHorizon is how long a leader keeps retrying the publication of
// windows that fell due during its own tenure when its transactions fail,
// whatever the job's catch-up limit: a transient Kafka error never loses a
// window, while an outage longer than this does not end in a burst of
// every window it lasted (older ones are skipped and counted, as windows
// past the catch-up limit are).
const retryHorizon = time.Minute

// cutoff is the start of the oldest window of j that a term of this tenure
// starting at now publishes: MisfireGrace or the job's catch-up limit
// before the tenure began (or before the lease store became unreachable,
// if it did just before the tenure), whichever reaches further back; but
// once the tenure (or the store's outage) has lasted longer than that (a
// Kafka outage under a live leader, a Redis outage), no further back than
// max(catch-up, grace, retryHorizon) before now.
func (t *tenure) cutoff(j *schedule.Job, grace time.Duration, now time.Time) time.Time {
	limit := max(j.Catchup, grace)
	from := t.start
	if !t.storeDown.IsZero() && t.storeDown.Before(from) {
		from = t.storeDown
	}
	c := from.Add(-limit)
	if horizon := now.Add(-max(limit, retryHorizon)); horizon.After(c) {
		c = horizon
	}
	return c
}

// lead runs leadership terms until ctx (leadership) ends. A term ends on a
// Kafka error; the next term fences again and re-reads the state, so no
// window is published twice whatever state the failed transaction left,
// and publishes again every window the failed term did not (each keeps
// its id: ids derive from the window start).
func (p *Producer) lead(ctx context.Context) error {
	defer p.setLeading(false, 0)
	t := &tenure{start: p.cfg.Clock.Now(), reported: map[string]time.Time{}}
	v, err := p.follower.acquire(ctx) // the standby's view: its terms read only the tail
	if err != nil {
		return nil // leadership ended before the follower stopped
	}
	defer p.follower.release()
	t.specs = v
	if d := lease.UnreachableBefore(ctx); d > 0 {
		t.storeDown = t.start.Add(-d)
		p.log.Info("leading after the lease store was unreachable: windows due since then are caught up",
			"unreachable_for", d.Round(time.Millisecond), "retry_horizon", retryHorizon)
	}
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := p.term(ctx, t)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrFenced) {
			return err // another replica publishes; let the elector re-campaign
		}
		if errors.Is(err, ErrForeignState) {
			p.log.Error("refusing to lead: the state topic holds another deployment's jobs; publishing nothing and stopping",
				"state_topic", p.cfg.StateTopic, "namespace", p.cfg.Namespace, "err", err)
			p.refuse(err)
			return err
		}
		delay := b.Next()
		p.log.Warn("publishing term ended; starting a new one", "err", err, "retry_in", delay)
		if clock.Sleep(ctx, delay) != nil {
			return nil
		}
	}
}

func (p *Producer) setLeading(leading bool, epoch int16) {
	p.mu.Lock()
	p.status.Leading, p.status.Epoch = leading, epoch
	p.mu.Unlock()
}

func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

func (p *Producer) term(ctx context.Context, t *tenure) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.ClientID("kjob-producer"),
		kgo.TransactionalID(p.cfg.TransactionalID),
		kgo.TransactionTimeout(p.cfg.TransactionTimeout),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(names.Partitioner()), // murmur2 of the key, as every writer of windows
	}, p.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("producer: kafka client: %w", err)
	}
	defer p.closeAfterStop(ctx, cl)()

	// Fence first: bumping the epoch of the transactional id makes every
	// older holder's writes fail and aborts its open transaction.
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		if isFenced(err) {
			return fmt.Errorf("init producer id: %w: %w", ErrFenced, err)
		}
		return fmt.Errorf("init producer id: %w", err)
	}
	state, err := p.readState(ctx, cl)
	if err != nil {
		return err
	}
	p.termState = state
	// After fencing, so every change committed before this term is read:
	// the tail since the standby's last fetch (or since the previous
	// term's), or the whole topic if the view has read nothing yet.
	readStart := time.Now()
	tail, err := p.catchUp(ctx, t.specs)
	if err != nil {
		return err
	}
	snap, live := t.specs.snap, t.specs.live
	// Pauses of the Redis pause list of older versions become spec pauses
	// before anything is published, so none of their windows goes out.
	legacy, err := p.migratePauses(ctx, cl, snap, live)
	if err != nil {
		return err
	}
	p.setLeading(true, epoch)
	p.log.Info("publishing as leader", "producer_id", id, "epoch", epoch, "jobs", len(live), "file_jobs", len(p.cfg.Jobs), "known_jobs", len(state),
		"schedules_read", tail, "schedules_read_took", time.Since(readStart).Round(time.Microsecond))

	q := newQueue()
	// An entry of a job that changed since it was pushed is dropped when
	// it comes up (lazy invalidation): only the current job's count.
	q.valid = func(j *schedule.Job) bool {
		l := live[j.Name]
		return l.active() && l.job == j
	}
	now := p.cfg.Clock.Now()
	var overdue []window
	for _, name := range slices.Sorted(maps.Keys(live)) {
		l := live[name]
		if !l.active() {
			continue
		}
		j := l.job
		last, known := state[j.Name]
		if eff := l.origin.effectiveFrom; !eff.IsZero() && (!known || eff.After(last)) {
			// The version applies from EffectiveFrom: its windows start
			// after it (docs/schedules.md, catch-up across a handover).
			last, known = eff, true
		}
		if !known {
			// A job seen for the first time starts with its first window
			// in this tenure; kjob does not invent history. Record that in
			// the state (a baseline, no window), so that if leadership
			// changes hands before the job's first window is published, the
			// next leader publishes that window instead of starting after
			// its own takeover.
			last = t.start
			overdue = append(overdue, window{job: j, start: t.start, baseline: true})
		}
		cut := t.cutoff(j, p.cfg.MisfireGrace, now)
		// Report each skipped window once per tenure: a later term skips
		// the windows an earlier one reported again (the state does not
		// advance past skipped windows), so count only those past the
		// cutoff reported last.
		countFrom := last
		if prev, ok := t.reported[j.Name]; ok && prev.After(countFrom) {
			countFrom = prev
		}
		due, _ := missed(j, last, now, cut)
		_, skipped := missed(j, countFrom, countFrom, cut)
		if skipped > 0 {
			t.reported[j.Name] = cut
			p.log.Warn("skipping windows older than the catch-up limit", "job", j.Name, "count", skipped,
				"catchup", j.Catchup, "misfire_grace", p.cfg.MisfireGrace, "last_published", last)
			if p.cfg.OnSkipped != nil {
				p.cfg.OnSkipped(j.Name, skipped)
			}
		}
		for _, w := range due {
			// Due before this tenure: missed while no leader was live.
			// Due during it: late only because a term failed.
			trig := jobmsg.TriggerSchedule
			if w.Before(t.start) {
				trig = jobmsg.TriggerCatchup
			}
			overdue = append(overdue, window{job: j, start: w, trigger: trig, version: l.version})
		}
		from := now
		if last.After(from) { // a previous leader's clock ran ahead of ours
			from = last
		}
		q.push(j, j.Next(from))
	}
	p.mu.Lock()
	p.q = q
	p.mu.Unlock()
	for len(overdue) > 0 {
		n := min(len(overdue), p.cfg.MaxBatch)
		if err := p.publish(ctx, cl, overdue[:n], nil); err != nil {
			return err
		}
		overdue = overdue[n:]
	}

	// due pops the windows due at or before now, at most MaxBatch.
	due := func(now time.Time) []window {
		var batch []window
		p.mu.Lock() // Status reads q
		defer p.mu.Unlock()
		for len(batch) < p.cfg.MaxBatch {
			at, ok := q.peek()
			if !ok || at.After(now) {
				break
			}
			j, w := q.pop()
			if !q.valid(j) {
				continue // changed, deleted or paused since it was pushed
			}
			batch = append(batch, window{job: j, start: w, trigger: jobmsg.TriggerSchedule, version: live[j.Name].version})
			q.push(j, j.Next(w))
		}
		return batch
	}
	// apply commits a schedule request (or refuses it) together with the
	// windows due up to its instant f, so that the old spec's windows up
	// to f and the new spec's after f are published, none twice.
	// own says the request is the leader's own (the file import), not one
	// read from the control topic. It returns the Result it committed (nil
	// for a dropped request).
	apply := func(req *specs.Request, own bool) (*specs.Result, error) {
		// The change takes effect PublishLead from now: the windows up
		// to then may be out already, published ahead under the old spec.
		now := p.cfg.Clock.Now()
		f := now.Add(p.cfg.PublishLead)
		if age := now.Sub(req.IssuedAt); age > specs.RequestTTL {
			p.log.Warn("dropping a schedule request older than its time to live; its writer has given up on it",
				"request", req.ID, "actor", req.Actor, "age", age.Round(time.Millisecond), "ttl", specs.RequestTTL)
			return nil, nil
		}
		recs, changes, res := p.plan(ctx, req, snap, live, now, f, own)
		rr, err := res.Record(p.cfg.ControlTopic)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rr)
		var batch []window
		if res.Refused == nil {
			batch = due(f)
			for len(batch) == p.cfg.MaxBatch { // more than one batch due: publish the older ones first
				if err := p.publish(ctx, cl, batch, nil); err != nil {
					return nil, err
				}
				batch = due(f)
			}
		}
		if err := p.publish(ctx, cl, batch, recs); err != nil {
			return nil, err
		}
		if res.Refused != nil {
			p.log.Info("schedule request refused", "request", req.ID, "actor", req.Actor, "kind", res.Refused.Kind,
				"job", res.Refused.Job, "reason", res.Refused.Reason)
			return res, nil
		}
		p.adopt(req, changes, snap, live, q, f)
		return res, nil
	}
	for req := range p.fileRequests(snap, live, now, legacy) {
		req.IssuedAt = p.cfg.Clock.Now() // a large file's last requests are not older than RequestTTL
		res, err := apply(req, true)
		if err != nil {
			p.fileJobs = nil
			return fmt.Errorf("import the schedules file: %w", err)
		}
		if res != nil && res.Refused == nil {
			if err := p.forgetMigrated(ctx, req); err != nil {
				p.fileJobs = nil
				return err
			}
		}
	}
	if err := p.dropUnknownPauses(ctx, legacy, snap, live); err != nil {
		return err
	}
	p.fileJobs = nil // the import's edits are garbage now

	reqs := make(chan *specs.Request)
	rctx, stopReading := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() { readErr <- p.requests(rctx, reqs) }()
	defer func() { stopReading(); <-readErr }()

	timer := p.cfg.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var fire <-chan time.Time
		if at, ok := q.peek(); ok {
			// PublishLead before the start: the herd's row (1,000 jobs due
			// at once) needs its windows at the workers by then.
			timer.Reset(at.Sub(p.cfg.Clock.Now()) - p.cfg.PublishLead)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			readErr <- err // for the deferred wait
			return fmt.Errorf("read schedule requests: %w", err)
		case req := <-reqs:
			if _, err := apply(req, false); err != nil {
				return err
			}
			continue
		case <-fire:
		}
		batch := due(p.cfg.Clock.Now().Add(p.cfg.PublishLead))
		if len(batch) == 0 {
			continue
		}
		if err := p.publish(ctx, cl, batch, nil); err != nil {
			return err
		}
	}
}

// StopGrace bounds how long a term's Kafka calls may run on once the
// producer's context has ended (leadership lost or shutdown): an open
// transaction's commit or abort gets that long to finish, then the term's
// Kafka client is closed, which fails whatever it still waits for. Without
// it a produce request that the broker never answers (a hung broker,
// packets dropped) would hold Run forever: the Kafka client does not give
// up on records it has sent, whatever their context says. Closing the
// client with a transaction open is safe: the next leader's fencing aborts
// it, and the next leader publishes its windows again.
const StopGrace = 5 * time.Second

// closeAfterStop watches ctx for a term whose client is cl: StopGrace
// after ctx ends, it closes cl. It returns the function the term defers:
// it stops the watch and closes cl, once.
func (p *Producer) closeAfterStop(ctx context.Context, cl *kgo.Client) func() {
	var once sync.Once
	closeClient := func() { once.Do(cl.Close) }
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(StopGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			p.log.Warn("kafka calls still running after the stop grace; closing the client", "stop_grace", StopGrace)
			closeClient()
		}
	}()
	return func() {
		close(done)
		<-exited
		closeClient()
	}
}

// missed returns the windows after last and up to now that start at or
// after cutoff, and how many older ones are skipped.
func missed(j *schedule.Job, last, now, cutoff time.Time) (due []time.Time, skipped int) {
	const maxCount = 1_000_000 // stop counting skipped windows here
	w := j.Next(last)
	for ; !w.IsZero() && w.Before(cutoff); w = j.Next(w) {
		if skipped++; skipped == maxCount {
			w = j.Next(cutoff.Add(-time.Nanosecond))
			break
		}
	}
	for ; !w.IsZero() && !w.After(now); w = j.Next(w) {
		due = append(due, w)
	}
	return due, skipped
}

type window struct {
	job      *schedule.Job
	start    time.Time
	trigger  jobmsg.Trigger
	version  int64 // the job's spec version (0: unknown)
	baseline bool  // not a window: the state of a job no leader had seen (start = tenure start)
}

// publish writes the windows, the jobs' new state and extra (schedule
// changes and a request's result) in one transaction.
func (p *Producer) publish(ctx context.Context, cl *kgo.Client, ws []window, extra []*kgo.Record) error {
	now := p.cfg.Clock.Now()
	recs := make([]*kgo.Record, 0, 2*len(ws))
	last := map[string]window{}
	out := make([]Published, 0, len(ws))
	for _, w := range ws {
		if w.baseline {
			if l, ok := last[w.job.Name]; !ok || w.start.After(l.start) {
				last[w.job.Name] = w
			}
			continue
		}
		msg, rec, err := windowrec.Record(w.job, p.cfg.Topic, windowrec.Publication{Start: w.start, Trigger: w.trigger, PublishedAt: now, Namespace: p.cfg.Namespace, ScheduleVersion: w.version})
		if err != nil {
			// A job that cannot be encoded is a configuration error that
			// schedule validation should have caught; do not block the others.
			p.log.Error("cannot encode window; skipping it", "job", w.job.Name, "window", jobmsg.WindowID(w.job.Name, w.start), "err", err)
			continue
		}
		if p.cfg.Sign != nil {
			if err := p.cfg.Sign(rec); err != nil {
				p.log.Error("cannot sign window; skipping it", "job", w.job.Name, "window", msg.ID, "err", err)
				continue
			}
		}
		recs = append(recs, rec)
		out = append(out, Published{ID: msg.ID, Job: msg.Job, Trigger: msg.Trigger, Start: msg.Window.Start, PublishedAt: msg.PublishedAt})
		if l, ok := last[w.job.Name]; !ok || w.start.After(l.start) {
			last[w.job.Name] = w
		}
	}
	for name, w := range last {
		id := jobmsg.WindowID(name, w.start)
		if w.baseline {
			id = "" // no window of the job published yet
		}
		rec, err := jobmsg.StateRecord(p.cfg.StateTopic, jobmsg.State{Namespace: p.cfg.Namespace, Job: name, LastWindow: w.start, LastID: id, PublishedAt: now})
		if err != nil {
			return fmt.Errorf("state of %s: %w", name, err)
		}
		recs = append(recs, rec)
	}
	recs = append(recs, extra...)
	if len(recs) == 0 {
		return nil
	}
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if aerr := cl.EndTransaction(actx, kgo.TryAbort); aerr != nil {
			p.log.Warn("abort transaction failed", "err", aerr)
		}
		if isFenced(err) {
			return fmt.Errorf("produce: %w: %w", ErrFenced, err)
		}
		return fmt.Errorf("produce %d records: %w", len(recs), err)
	}
	// Do not cancel EndTransaction (see kgo docs): once the records are
	// written, finishing the commit is the right thing even if leadership is
	// being lost; fencing protects against a concurrent leader. (After
	// StopGrace of a stop, the term's client is closed all the same.)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := cl.EndTransaction(cctx, kgo.TryCommit); err != nil {
		if isFenced(err) {
			return fmt.Errorf("commit: %w: %w", ErrFenced, err)
		}
		return fmt.Errorf("commit transaction: %w", err)
	}
	p.mu.Lock()
	if p.status.Last == nil {
		p.status.Last = map[string]time.Time{}
	}
	for name, w := range last {
		if !w.baseline {
			p.status.Last[name] = w.start
		}
	}
	p.mu.Unlock()
	for _, o := range out {
		p.log.Info("published", "job", o.Job, "window", o.ID, "trigger", string(o.Trigger), "late", now.Sub(o.Start).Round(time.Microsecond))
	}
	if p.cfg.OnPublished != nil && len(out) > 0 {
		p.cfg.OnPublished(out)
	}
	return nil
}

// readState reads the state topic to its end, read-committed. The caller
// has already fenced, so no transaction of an older producer is still open.
// The read lasts as long as records keep arriving (a real broker keeps the
// active segment uncompacted, so the topic holds more than one record per
// job) and fails after stateReadStall without one. A job whose latest
// record another namespace wrote is an error wrapping ErrForeignState (see
// foreignState).
func (p *Producer) readState(ctx context.Context, cl *kgo.Client) (map[string]time.Time, error) {
	ctx, progressed, cancel := kread.StallContext(ctx, p.stateReadStall)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, p.cfg.StateTopic)
	if err != nil {
		return nil, fmt.Errorf("read state: list end offsets of %s: %w", p.cfg.StateTopic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("read state: list end offsets of %s: %w", p.cfg.StateTopic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	state := map[string]time.Time{}
	if len(want) == 0 {
		return state, nil
	}
	owners := map[string]string{} // job -> namespace of its latest record
	parts := map[int32]kgo.Offset{}
	for part := range want {
		parts[part] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.ClientID("kjob-producer-state"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.cfg.StateTopic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // the last offset may be a transaction marker
	}, p.cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	defer cons.Close()
	for len(want) > 0 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); errors.Is(cause, kread.ErrStalled) {
				return nil, fmt.Errorf("read state: %s not read to its end %v: no progress for %v: %w", p.cfg.StateTopic, want, p.stateReadStall, cause)
			}
			return nil, fmt.Errorf("read state: %s not read to its end %v: %w", p.cfg.StateTopic, want, ctx.Err())
		}
		if fs.NumRecords() > 0 {
			progressed()
		}
		var ferr error
		fs.EachError(func(t string, part int32, err error) { ferr = fmt.Errorf("read state: fetch %s[%d]: %w", t, part, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() || r.Value == nil {
				if !r.Attrs.IsControl() {
					delete(owners, string(r.Key)) // a tombstone
				}
				return
			}
			v, err := jobmsg.ParseState(r.Value)
			if err != nil {
				p.log.Warn("ignoring unreadable state record", "offset", r.Offset, "key", string(r.Key), "err", err)
				return
			}
			state[v.Job] = v.LastWindow
			owners[v.Job] = v.Namespace
		})
	}
	if err := p.foreignState(owners); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.status.Last = map[string]time.Time{}
	for k, v := range state {
		p.status.Last[k] = v
	}
	p.mu.Unlock()
	return state, nil
}

// foreignState checks who wrote the state topic's latest record of each
// job: this deployment, or a kjob from before state records carried their
// namespace (accepted, with a warning: nothing says whose it is, and each
// job's next window relabels it). A job another namespace wrote is an
// error wrapping ErrForeignState that names the topic, the other
// namespace, a few of its jobs and the fix.
func (p *Producer) foreignState(owners map[string]string) error {
	var unlabelled []string
	foreign := map[string][]string{}
	for job, ns := range owners {
		switch ns {
		case p.cfg.Namespace:
		case "":
			unlabelled = append(unlabelled, job)
		default:
			foreign[ns] = append(foreign[ns], job)
		}
	}
	if len(unlabelled) > 0 {
		slices.Sort(unlabelled)
		p.log.Warn("state records without a namespace (written by a kjob from before records carried it) taken as this deployment's; if another deployment shares this topic, give each its own",
			"state_topic", p.cfg.StateTopic, "namespace", p.cfg.Namespace, "jobs", len(unlabelled), "first_job", unlabelled[0])
	}
	if len(foreign) == 0 {
		return nil
	}
	others := slices.Sorted(maps.Keys(foreign))
	jobs := foreign[others[0]]
	slices.Sort(jobs)
	n := len(jobs)
	jobs = jobs[:min(n, 3)]
	return fmt.Errorf("%w: state topic %q holds %d job(s) of namespace %q (%s), and this producer's namespace is %q: "+
		"give this deployment a windows topic of its own (leave Topic and StateTopic empty for %q), "+
		"or fix the namespace if this deployment is meant to be %q",
		ErrForeignState, p.cfg.StateTopic, n, others[0], strings.Join(jobs, ", "), p.cfg.Namespace,
		names.DefaultTopicOf(p.cfg.Namespace), others[0])
}
