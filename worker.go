package kjob

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/handler/builtin"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/obs/metrics"
	"github.com/kjob/kjob/internal/obs/service"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/access"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/storeepoch"
	"github.com/kjob/kjob/internal/store/topic"
)

// WorkerConfig configures a Worker. The zero value of every field but
// Brokers and Redis is the default cmd/worker runs with; cmd/worker's
// flags only fill this struct.
type WorkerConfig struct {
	// Brokers are the Kafka seed brokers (host:port). Required.
	Brokers []string
	// KafkaOpts are extra franz-go options for every Kafka client of the
	// worker: TLS, SASL (see deploy/SECURITY.md).
	KafkaOpts []kgo.Opt
	// Redis is the idempotency store's server. Required. Run does not
	// close it.
	Redis redis.UniversalClient

	// Namespace names the deployment: it prefixes the
	// Redis keys and derives the default Topic and Group, and the worker
	// runs only windows of this namespace (another's are dead-lettered).
	// Default "kjob".
	Namespace string
	// Topic is the windows topic. Default "kjob.windows" for the default
	// namespace, "kjob.<ns>.windows" for any other.
	Topic string
	// Group is the workers' consumer group. Default "kjob-workers" for
	// the default namespace, "kjob-workers-<ns>" for any other.
	Group string
	// DeadLetterTopic receives windows that cannot run. Default Topic +
	// ".dlq".
	DeadLetterTopic string
	// ControlTopic carries operators' replays (kjobctl replay). Default
	// Topic + ".control".
	ControlTopic string

	// ReplicationFactor of the dead-letter and control topics when Run
	// creates them. Default 1.
	ReplicationFactor int16
	// ID identifies this process: claim owner and group member. Default
	// hostname-pid.
	ID string

	// ClaimTTL is how long a claim outlives a worker that stopped
	// extending it: a crashed worker's window runs again after at most
	// this long. A handler whose claim cannot be extended is cancelled
	// before its claim can expire. Default 6s.
	ClaimTTL time.Duration
	// ClaimExtendInterval is how often a running handler's claim is
	// extended; less than ClaimTTL/2. Default ClaimTTL/3.
	ClaimExtendInterval time.Duration
	// Retention is how long done markers are kept: the replay horizon.
	// Default 7 days.
	Retention time.Duration
	// Grace is how long in-flight handlers may finish on shutdown or
	// revoke. Default 10s.
	Grace time.Duration
	// Concurrency is how many windows run at once across the partitions
	// this worker owns. Default 100.
	Concurrency int
	// MaxUncommitted bounds, per partition, the records fetched and not
	// yet committed. Default 10,000.
	MaxUncommitted int
	// StallAfter is how long settling a partition's oldest record may
	// keep failing before the partition is reported stalled. Default 30s.
	StallAfter time.Duration
	// SessionTimeout is the consumer group session timeout (real Kafka
	// refuses less than 6s by default). Default 6s.
	SessionTimeout time.Duration
	// HeartbeatInterval is the consumer group heartbeat interval; below
	// SessionTimeout. Default 1s.
	HeartbeatInterval time.Duration

	// Verifier checks records' signatures (NewVerifier). Nil, or one that
	// does not require signatures, accepts unsigned records: NewWorker
	// warns then, as anyone who can write to the windows topic can run
	// any handler with any payload (deploy/SECURITY.md).
	Verifier *Verifier
	// HTTPAllowHosts are the hosts the built-in http handler may POST to
	// (names such as hooks.example.com, wildcards such as *.example.com,
	// IP addresses or CIDR blocks such as 10.0.0.0/8); empty allows any host, with a
	// warning at start-up.
	HTTPAllowHosts []string
	// SkipKafkaAccessCheck and SkipRedisAccessCheck turn off the checks
	// Run makes before it starts: that the Kafka principal holds the
	// worker's ACLs, and that the Redis user may run every script and
	// command the worker uses (deploy/SECURITY.md).
	SkipKafkaAccessCheck, SkipRedisAccessCheck bool

	// HTTPAddr is where Run serves /healthz, /readyz and /metrics; empty
	// serves nothing (mount HTTPHandler on a server of your own instead).
	HTTPAddr string
	// NoJobLabel drops the kjob_job label from per-job metrics, for
	// deployments with many thousands of jobs.
	NoJobLabel bool
	// MaxJobLabels bounds the distinct kjob_job values; further jobs are
	// counted as "other". Default 1,000 (metrics.DefaultMaxJobLabels).
	MaxJobLabels int
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// TracerProvider, if set, traces the worker with OpenTelemetry: each
	// window record's receive, and each handler attempt in a "process"
	// span that continues the producer's trace (the record's W3C
	// traceparent header); the handler's context carries the span.
	// Default nil: no tracing. The worker does not shut it down: flush it
	// after Run returns. kjobotel.FromEnv builds one from the OTEL_*
	// environment, as cmd/worker does.
	TracerProvider trace.TracerProvider
}

// withDefaults fills every zero field that has a default, so the packages
// below get a complete config: their own zero-value defaults are never
// reached from here. Each default is the constant of the package that
// uses it (dedupe, worker, partition, metrics).
func (c WorkerConfig) withDefaults() WorkerConfig {
	d := names.Deployment{Namespace: c.Namespace, Topic: c.Topic}.WithDefaults()
	c.Namespace, c.Topic = d.Namespace, d.Topic
	if c.Group == "" {
		c.Group = d.Group()
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = d.DeadLetterTopic()
	}
	if c.ControlTopic == "" {
		c.ControlTopic = d.ControlTopic()
	}

	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = topic.DefaultReplicationFactor
	}
	if c.ID == "" {
		c.ID = DefaultID()
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = dedupe.DefaultClaimTTL
	}
	if c.ClaimExtendInterval == 0 {
		c.ClaimExtendInterval = worker.DefaultClaimExtendFor(c.ClaimTTL)
	}
	if c.Retention == 0 {
		c.Retention = dedupe.DefaultRetention
	}
	if c.Grace == 0 {
		c.Grace = partition.DefaultGrace
	}
	if c.Concurrency == 0 {
		c.Concurrency = worker.DefaultConcurrency
	}
	if c.MaxUncommitted == 0 {
		c.MaxUncommitted = partition.DefaultMaxUncommitted
	}
	if c.StallAfter == 0 {
		c.StallAfter = worker.DefaultStallAfter
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = partition.DefaultSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = partition.DefaultHeartbeatInterval
	}
	if c.MaxJobLabels == 0 {
		c.MaxJobLabels = metrics.DefaultMaxJobLabels
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks the config withDefaults filled: the one place a
// worker's settings are checked, but for HTTPAllowHosts, which NewWorker
// parses once for the value it needs. An error is a *configerr.Error naming the
// WorkerConfig field, its value and the fix; the packages below get only
// configs it accepted.
func (c WorkerConfig) validate() error {
	bad := func(field string, value any, reason string, related ...string) error {
		return &configerr.Error{Op: "kjob", Field: "WorkerConfig." + field, Value: value, Reason: reason, Related: related}
	}
	if r, ok := names.ValidNamespace(c.Namespace); !ok {
		return bad("Namespace", c.Namespace, fmt.Sprintf("contains %q; use only letters, digits, '_', '.', '-'", r))
	}
	d := names.Deployment{Topic: c.Topic}
	if c.DeadLetterTopic == c.Topic {
		return bad("DeadLetterTopic", c.DeadLetterTopic, fmt.Sprintf("is the windows topic; set another topic, or leave it empty for %q", d.DeadLetterTopic()))
	}
	if c.ControlTopic == c.Topic {
		return bad("ControlTopic", c.ControlTopic, fmt.Sprintf("is the windows topic; set another topic, or leave it empty for %q", d.ControlTopic()))
	}
	if c.ClaimTTL < dedupe.MinClaimTTL {
		return bad("ClaimTTL", c.ClaimTTL, fmt.Sprintf("is below the minimum %v; set at least %v (a few seconds in production), or 0 for the default %v", dedupe.MinClaimTTL, dedupe.MinClaimTTL, dedupe.DefaultClaimTTL))
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"ClaimExtendInterval", c.ClaimExtendInterval}, {"Grace", c.Grace}, {"StallAfter", c.StallAfter}, {"SessionTimeout", c.SessionTimeout}, {"HeartbeatInterval", c.HeartbeatInterval}} {
		if d.v < 0 {
			return bad(d.field, d.v, "is negative; set a positive duration, or 0 for the default")
		}
	}
	switch {
	case c.ReplicationFactor < 0:
		return bad("ReplicationFactor", c.ReplicationFactor, "is negative; set the replica count of the topics Run creates, or 0 for 1")
	case c.Concurrency < 0:
		return bad("Concurrency", c.Concurrency, fmt.Sprintf("is negative; set how many windows may run at once (1 for one at a time), or 0 for %d", worker.DefaultConcurrency))
	case c.MaxUncommitted < 0:
		return bad("MaxUncommitted", c.MaxUncommitted, fmt.Sprintf("is negative; set a positive bound, or 0 for %d", partition.DefaultMaxUncommitted))
	case c.MaxJobLabels < 0:
		return bad("MaxJobLabels", c.MaxJobLabels, fmt.Sprintf("is negative; set a positive bound, or 0 for %d", metrics.DefaultMaxJobLabels))
	case c.ClaimExtendInterval >= c.ClaimTTL/2:
		return bad("ClaimExtendInterval", c.ClaimExtendInterval, fmt.Sprintf("must be less than WorkerConfig.ClaimTTL/2 (%v; ClaimTTL %v), or claims expire while their handlers run and another worker may run the same window: lower it (0 picks ClaimTTL/3) or raise WorkerConfig.ClaimTTL",
			c.ClaimTTL/2, c.ClaimTTL), "WorkerConfig.ClaimTTL")
	case c.Retention < c.ClaimTTL:
		return bad("Retention", c.Retention, fmt.Sprintf("is shorter than WorkerConfig.ClaimTTL (%v): done markers must outlive claims; set at least the claim TTL (7 days, the default, is customary: it is the replay horizon)",
			c.ClaimTTL), "WorkerConfig.ClaimTTL")
	case c.HeartbeatInterval >= c.SessionTimeout:
		return bad("HeartbeatInterval", c.HeartbeatInterval, fmt.Sprintf("must be below WorkerConfig.SessionTimeout (%v): set about a third of the session timeout (%v)", c.SessionTimeout, c.SessionTimeout/3), "WorkerConfig.SessionTimeout")
	}
	return nil
}

// DefaultID is a process's default id: hostname-pid.
func DefaultID() string {
	h, err := os.Hostname()
	if err != nil {
		h = "kjob"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}

// Worker is a whole kjob worker process, as cmd/worker runs it: the
// consumer that runs the windows of the partitions it owns, the built-in
// handlers and yours, the control agent that applies operators' replays,
// the lag and time-lag collectors, stall reporting, and /healthz, /readyz
// and /metrics. Create it with NewWorker, register handlers, then Run.
type Worker struct {
	process
	cfg   WorkerConfig
	mux   *Mux
	allow *builtin.AllowList
	store *dedupe.Store
	inner *worker.Worker
	agent *control.Agent
	epoch *storeepoch.Guard
	// embedded are the test kit's options (worker.Embed); zero otherwise.
	embedded worker.Embedded
}

// The test kit sets its options on the Worker NewWorker built
// (worker.Embed). The hook names no Worker type, only a method, so
// programs that never call NewWorker (cmd/producer) still link none of
// the worker's parts.
func init() {
	worker.Embed = func(w any, e worker.Embedded) { w.(interface{ embed(worker.Embedded) }).embed(e) }
}

// embed sets the test kit's options (worker.Embed); call it before Run.
func (w *Worker) embed(e worker.Embedded) { w.embedded = e }

// NewWorker validates cfg and assembles a worker. It connects to nothing:
// Run does. An invalid field is a *ConfigError naming it
// ("WorkerConfig.Grace"), its value and the fix.
func NewWorker(cfg WorkerConfig) (_ *Worker, err error) {
	defer func() { err = asConfigError(err) }()
	if err := checkBrokers("WorkerConfig.Brokers", cfg.Brokers); err != nil {
		return nil, err
	}
	if err := checkRedis("WorkerConfig.Redis", cfg.Redis); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	allow, err := builtin.ParseAllowList(strings.Join(cfg.HTTPAllowHosts, ","))
	if err != nil {
		return nil, &configerr.Error{Op: "kjob", Field: "WorkerConfig.HTTPAllowHosts", Value: cfg.HTTPAllowHosts, Reason: err.Error(), Err: err}
	}
	if cfg.Verifier != nil && cfg.Verifier.v == nil {
		return nil, &configerr.Error{Op: "kjob", Field: "WorkerConfig.Verifier", Reason: "is an empty Verifier; make it with kjob.NewVerifier"}
	}
	log := cfg.Logger.With("worker", cfg.ID)
	required := cfg.Verifier != nil && cfg.Verifier.Required()
	// The trust model (deploy/SECURITY.md): whoever can write to the
	// windows topic chooses the handler and payload of what runs, unless
	// signatures are required; say so loudly when they are not.
	if !required {
		log.Warn("signatures are not required: any principal that can write to the windows topic can run any registered handler with any payload on this worker; " +
			"sign windows (the producer's ProducerConfig.Signer) and require them (WorkerConfig.Verifier) (deploy/SECURITY.md)")
	}
	if allow == nil {
		log.Warn("the http handler may POST to ANY host: WorkerConfig.HTTPAllowHosts is empty, so a window's payload.url can point at internal services and cloud metadata endpoints (SSRF); "+
			"list the hosts your http jobs call (deploy/SECURITY.md)", "signatures_required", required)
	}
	// The warnings come first: a refused config still shows them.
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	store, err := dedupe.New(cfg.Redis, dedupe.Config{Namespace: cfg.Namespace, ClaimTTL: cfg.ClaimTTL, Retention: cfg.Retention})
	if err != nil {
		return nil, err
	}
	return assembleWorker(cfg, log, store, allow, service.Observe(cfg.Redis, cfg.TracerProvider, !cfg.NoJobLabel, cfg.MaxJobLabels))
}

// assembleWorker builds the worker's parts on its store and observability.
func assembleWorker(cfg WorkerConfig, log *slog.Logger, store *dedupe.Store, allow *builtin.AllowList, obs *service.Observability) (*Worker, error) {
	w := &Worker{process: process{role: "worker", log: log, obs: obs, health: service.NewHealth()}, cfg: cfg, store: store, mux: NewMux(), allow: allow}
	// internal/exec/worker wraps the whole mux in a recover: a second one here
	// would only deepen every handler's stack (see Mux.HandleJob).
	builtin.Register(w.mux.handleInternal, w.log, &http.Client{}, allow)
	m := obs.Metrics
	var verify func(*kgo.Record) error
	if cfg.Verifier != nil {
		verify = cfg.Verifier.v.Verify
	}
	// The test kit's options (worker.Embedded), set after NewWorker and
	// before Run, are read at each window.
	mux := attempts(w.mux)
	h := handler.HandlerFunc(func(ctx context.Context, a *handler.Job) error {
		if eh := w.embedded.Handler; eh != nil {
			return eh.HandleJob(ctx, a)
		}
		return mux.HandleJob(ctx, a)
	})
	executed := func(x worker.Execution) {
		m.Executed(x)
		if f := w.embedded.OnExecuted; f != nil {
			f(x)
		}
	}
	var err error
	w.inner, err = worker.New(worker.Config{
		Brokers:             cfg.Brokers,
		ClientOpts:          append(obs.KafkaOpts(false), cfg.KafkaOpts...),
		Verify:              verify,
		Namespace:           cfg.Namespace,
		Topic:               cfg.Topic,
		Group:               cfg.Group,
		DeadLetterTopic:     cfg.DeadLetterTopic,
		ReplicationFactor:   cfg.ReplicationFactor,
		Store:               m.Store(store),
		Handler:             h,
		WorkerID:            cfg.ID,
		Grace:               cfg.Grace,
		Concurrency:         cfg.Concurrency,
		StallAfter:          cfg.StallAfter,
		MaxUncommitted:      cfg.MaxUncommitted,
		ClaimExtendInterval: cfg.ClaimExtendInterval,
		SessionTimeout:      cfg.SessionTimeout,
		HeartbeatInterval:   cfg.HeartbeatInterval,
		Logger:              cfg.Logger,
		OnExecuted:          executed,
		OnAttempt:           obs.Tracing.Attempt,
	})
	if err != nil {
		return nil, err
	}
	// The control agent applies operators' replays (kjobctl replay) to the
	// partitions this worker owns.
	w.agent, err = control.NewAgent(control.AgentConfig{Brokers: cfg.Brokers, ClientOpts: cfg.KafkaOpts, Group: cfg.Group, Topic: cfg.Topic,
		ControlTopic: cfg.ControlTopic, ReplicationFactor: cfg.ReplicationFactor, Member: cfg.ID, Seeker: w.inner, Logger: cfg.Logger})
	if err != nil {
		releaseConsumer(w.inner)
		return nil, err
	}
	// The store epoch keeps fencing tokens above every earlier one across
	// a Redis that loses its data (internal/store/storeepoch); until its first check
	// the store claims nothing.
	w.epoch, err = storeepoch.New(storeepoch.Config{Brokers: cfg.Brokers, ClientOpts: cfg.KafkaOpts, Topic: names.Deployment{Namespace: cfg.Namespace, Topic: cfg.Topic}.EpochTopic(), Namespace: cfg.Namespace,
		ReplicationFactor: cfg.ReplicationFactor, Store: store, ID: cfg.ID, Logger: log})
	if err != nil {
		releaseConsumer(w.inner)
		return nil, err
	}
	obs.Registry.MustRegister(metrics.Stalls(w.inner.Stalled), metrics.Slots(w.inner), metrics.StoreEpoch(w.epoch.Status))
	return w, nil
}

// Handle registers h for the windows whose handler is name, beside the
// built-in ones (log, noop, sleep, http). Register before Run; a name
// registered twice panics, as http.ServeMux does.
func (w *Worker) Handle(name string, h Handler) { w.mux.Handle(name, h) }

// HandleFunc registers f for the windows whose handler is name.
func (w *Worker) HandleFunc(name string, f func(context.Context, *Job) error) {
	w.mux.HandleFunc(name, f)
}

// Use adds middleware around every handler, outermost first (inside the
// worker's Recover, which turns a panic, in a handler or a middleware, into
// a failed attempt).
func (w *Worker) Use(mw ...Middleware) { w.mux.Use(mw...) }

// Assigned returns the partitions this worker owns now.
func (w *Worker) Assigned() []int32 { return w.inner.Assigned() }

// Run serves /healthz at once, checks that every Kafka broker implements
// the requests it sends (stopping with an error that names a missing one),
// checks the Kafka and Redis permissions,
// then runs the worker until ctx is done: windows, replays, lag metrics.
// It returns nil after a graceful shutdown, when every goroutine it
// started has exited, or the error that stopped it. A Worker runs once.
func (w *Worker) Run(ctx context.Context) (err error) {
	defer func() { err = asConfigError(err) }()
	if err := w.once(); err != nil {
		return err
	}
	// NewWorker made the consumer's Kafka client; a Run that returns
	// before the consumer runs (stopped or refused while starting) must
	// release it.
	consumerRan := false
	defer func() {
		if !consumerRan {
			releaseConsumer(w.inner)
		}
	}()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	c := w.cfg
	// A closed Redis client ends Run with an error instead of retries.
	rw := watchRedis(ctx, stop, "WorkerConfig.Redis", c.Redis)
	defer func() {
		if werr := rw.Stop(); werr != nil {
			err = werr
		}
	}()
	need := checks{apis: preflight.WorkerAPIs}
	if !c.SkipKafkaAccessCheck {
		need.kafka = access.Worker(c.Topic, c.DeadLetterTopic, c.ControlTopic, c.Group)
	}
	if !c.SkipRedisAccessCheck {
		need.redis = func() (preflight.RedisRole, error) {
			return preflight.WorkerRedisRole(c.Redis, redisUser(c.Redis), c.Namespace, c.ID)
		}
	}
	srv, err := w.start(ctx, stop, "WorkerConfig.HTTPAddr", c.HTTPAddr, c.Brokers, c.KafkaOpts, need)
	if srv == nil {
		return err
	}
	defer srv.Stop()
	// Every worker exports the group's lag, read with kadm off the scrape
	// path, and the time lag: the age of the oldest window not settled.
	// Both only read offsets and metadata, so they share one plain client.
	lagCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.KafkaOpts...)...)
	if err != nil {
		return err
	}
	defer lagCl.Close()
	lagAdm := kadm.NewClient(lagCl)
	timeLag, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: c.Brokers, ClientOpts: c.KafkaOpts, Admin: lagAdm, Topic: c.Topic, Group: c.Group, States: w.store})
	if err != nil {
		return err
	}
	defer timeLag.Close()
	lag := metrics.NewLag(w.obs.Registry, lagAdm, c.Group, c.Topic, 5*time.Second, w.log,
		metrics.WithTimeLag(timeLag, !c.NoJobLabel), metrics.WithTimeLagMaxJobs(c.MaxJobLabels))

	w.health.Running(w.ready)
	w.log.Info("worker starting", "brokers", strings.Join(c.Brokers, ","), "topic", c.Topic, "group", c.Group, "handlers", w.mux.Names())
	var wg sync.WaitGroup
	hctx, hcancel := context.WithCancel(ctx)
	wg.Add(3)
	go func() {
		defer wg.Done()
		_ = w.epoch.Run(hctx)
	}()
	go func() {
		defer wg.Done()
		if err := w.agent.Run(hctx); err != nil {
			w.log.Error("control agent stopped; kjobctl replay cannot reach this worker", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		lag.Run(hctx)
	}()
	// Claims wait for the store epoch's first proof; waiting for it here
	// (a few milliseconds when Kafka and Redis answer) keeps the consumer
	// from reporting the store unavailable at every start. Past the wait
	// the consumer starts anyway, and its claims wait.
	select {
	case <-w.epoch.FirstProven():
	case <-ctx.Done():
	case <-time.After(firstEpochWait):
		w.log.Warn("store epoch not proven yet; starting the consumer, whose claims wait for it", "err", w.epoch.Ready())
	}
	// A dead-letter topic with other settings stops the consumer: name
	// the fields its settings came from.
	consumerRan = true
	err = topicFields(w.inner.Run(ctx), map[string]topicSource{
		c.DeadLetterTopic: {Partitions: "WorkerConfig.DeadLetterTopic", ReplicationFactor: "WorkerConfig.ReplicationFactor"},
	})
	hcancel()
	wg.Wait()
	w.log.Info("worker stopped")
	if serr := srv.Stop(); serr != nil {
		return serr
	}
	return err
}

// releaseConsumer releases the Kafka client of a consumer that will not
// run: its Run with a done context returns at once.
func releaseConsumer(inner *worker.Worker) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = inner.Run(done)
}

// firstEpochWait bounds how long Run waits for the store epoch's first
// proof before it starts the consumer.
const firstEpochWait = 10 * time.Second

// ready is /readyz once running: Redis answers, the store epoch is proven
// (Redis has not lost data, or the loss is resolved), the worker is a
// member of its group, and no partition is stalled.
func (w *Worker) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := w.cfg.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := w.epoch.Ready(); err != nil {
		return err
	}
	if !w.inner.Joined() {
		return fmt.Errorf("kafka: not (yet) a member of consumer group %q", w.cfg.Group)
	}
	return w.inner.StallError()
}
