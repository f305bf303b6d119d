package kjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/obs/metrics"
	"github.com/kjob/kjob/internal/obs/service"
	"github.com/kjob/kjob/internal/store/access"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/schedule"
)

// ProducerConfig configures a Producer. The zero value of every field but
// Brokers and Redis is the default cmd/producer runs with;
// cmd/producer's flags only fill this struct.
type ProducerConfig struct {
	// Brokers are the Kafka seed brokers (host:port). Required.
	Brokers []string
	// KafkaOpts are extra franz-go options for every Kafka client of the
	// producer: TLS, SASL (see deploy/SECURITY.md).
	KafkaOpts []kgo.Opt
	// Redis holds the leader lease (unless Elector is set) and operators'
	// pauses. Required. Run does not close it.
	Redis redis.UniversalClient

	// Namespace names the deployment: it prefixes the
	// Redis keys, derives the default Topic, the lease key and the
	// transactional id, and labels every record the producer writes.
	// Default "kjob".
	Namespace string
	// Topic is the windows topic. Default "kjob.windows" for the default
	// namespace, "kjob.<ns>.windows" for any other.
	Topic string
	// StateTopic is the compacted topic with the last published window of
	// each job. Default Topic + ".state".
	StateTopic string
	// Partitions of the windows topic when Run creates it; an existing
	// topic with another count stops Run (an error naming this field).
	// Default 1.
	Partitions int32
	// ReplicationFactor of the topics Run creates. Default 1.
	ReplicationFactor int16
	// ID identifies this replica: the lease holder's name. Default
	// hostname-pid (DefaultID).
	ID string
	// TransactionalID is the Kafka transactional id, the same for every
	// producer replica of the deployment. Default "kjob-producer-" +
	// Namespace.
	TransactionalID string
	// TransactionTimeout bounds how long an open transaction of a crashed
	// leader holds back read-committed consumers; at least 1s. Default
	// 10s.
	TransactionTimeout time.Duration
	// MisfireGrace: a window due at most this long before a new leader
	// took over is published whatever its job's catchup. Keep it above
	// LeaseTTL + LeaseRenew, the crash failover time (NewProducer warns
	// otherwise). Default 10s; negative
	// turns it off.
	MisfireGrace time.Duration
	// PublishLead: each window is published this long before its start,
	// so that the workers hold it, claimed, when it comes and start its
	// handler at its start (never before). A schedule change, pause or
	// delete takes effect this long after it is committed. Default
	// 500ms (producer.DefaultPublishLead); at most 10s; negative
	// publishes at the start.
	PublishLead time.Duration

	// Jobs are the jobs of a schedules file, as schedule.Load parses it;
	// names are unique. Optional: the leader imports them into the
	// schedules topic under the file's ownership rule
	// (docs/schedules.md), where jobs created through kjob.Schedules,
	// kjobctl or the dashboard live too. Without Jobs the producer
	// publishes the topic's jobs only.
	Jobs []*schedule.Job

	// Elector, if set, elects the publishing replica in place of the
	// default lease in Redis (at the deployment's lease key), e.g. a
	// Kubernetes Lease (kubelease.New). The producer's lease metrics
	// follow its leadership changes. Run runs it once.
	Elector Elector
	// LeaseTTL is the leader lease's TTL: a crashed leader is replaced
	// within about this long. The default Redis lease uses it and
	// LeaseRenew; an Elector of your own should use the same values, as
	// the misfire-grace warning assumes them. Default 2s: safety rests on
	// the transactional id's fencing, not on the lease, so a short TTL
	// costs only renewals (docs/performance.md, producer failover).
	LeaseTTL time.Duration
	// LeaseRenew is how often the leader renews its lease; less than
	// LeaseTTL/2. Default 300ms, or LeaseTTL/5
	// if that is shorter.
	LeaseRenew time.Duration

	// Signer, if set, signs every window record (NewSigner), for
	// workers that require signatures.
	Signer *Signer
	// SkipKafkaAccessCheck and SkipRedisAccessCheck turn off the checks
	// Run makes before it starts: that the Kafka principal holds the
	// producer's ACLs, and that the Redis user may run every script and
	// command the producer uses (deploy/SECURITY.md).
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
	// Logger receives the producer's logs. Default slog.Default().
	Logger *slog.Logger
	// TracerProvider, if set, traces the producer with OpenTelemetry: a
	// "publish" span per window record, whose W3C traceparent header the
	// worker's spans continue. Default nil: no tracing. The producer does
	// not shut it down: flush it after Run returns. kjobotel.FromEnv
	// builds one from the OTEL_* environment, as cmd/producer does.
	TracerProvider trace.TracerProvider
}

// withDefaults fills every zero field that has a default, so the packages
// below get a complete config: their own zero-value defaults are never
// reached from here. Each default is the constant of the package that
// uses it (producer, lease, metrics).
func (c ProducerConfig) withDefaults() ProducerConfig {
	d := names.Deployment{Namespace: c.Namespace, Topic: c.Topic}.WithDefaults()
	c.Namespace, c.Topic = d.Namespace, d.Topic
	if c.StateTopic == "" {
		c.StateTopic = d.StateTopic()
	}
	if c.TransactionalID == "" {
		c.TransactionalID = d.TransactionalID()
	}
	if c.ID == "" {
		c.ID = DefaultID()
	}
	if c.Partitions == 0 {
		c.Partitions = producer.DefaultPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = topic.DefaultReplicationFactor
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = producer.DefaultTransactionTimeout
	}
	if c.MisfireGrace == 0 {
		c.MisfireGrace = producer.DefaultMisfireGrace
	}
	if c.PublishLead == 0 {
		c.PublishLead = producer.DefaultPublishLead
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = lease.DefaultTTL
	}
	if c.LeaseRenew == 0 {
		c.LeaseRenew = lease.DefaultRenewFor(c.LeaseTTL)
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
// producer's settings are checked. An error is a *configerr.Error naming
// the ProducerConfig field, its value and the fix; the packages below get
// only configs it accepted.
func (c ProducerConfig) validate() error {
	bad := func(field string, value any, reason string, related ...string) error {
		return &configerr.Error{Op: "kjob", Field: "ProducerConfig." + field, Value: value, Reason: reason, Related: related}
	}
	if r, ok := names.ValidNamespace(c.Namespace); !ok {
		return bad("Namespace", c.Namespace, fmt.Sprintf("contains %q; use only letters, digits, '_', '.', '-'", r))
	}
	seen := make(map[string]bool, len(c.Jobs))
	for i, j := range c.Jobs {
		if j == nil {
			return bad(fmt.Sprintf("Jobs[%d]", i), nil, "is nil; drop the entry")
		}
		if seen[j.Name] {
			return bad(fmt.Sprintf("Jobs[%d]", i), nil, fmt.Sprintf(": job name %q appears twice; names must be unique", j.Name))
		}
		seen[j.Name] = true
	}
	switch {
	case c.StateTopic == c.Topic:
		return bad("StateTopic", c.StateTopic, fmt.Sprintf("is the windows topic; use a separate topic, or leave it empty for %q", names.Deployment{Topic: c.Topic}.StateTopic()))
	case c.Partitions < 0:
		return bad("Partitions", c.Partitions, fmt.Sprintf("is negative; set the windows topic's partition count, or 0 for %d", producer.DefaultPartitions))
	case c.ReplicationFactor < 0:
		return bad("ReplicationFactor", c.ReplicationFactor, "is negative; set the replica count of the topics Run creates, or 0 for 1")
	case c.TransactionTimeout < time.Second:
		return bad("TransactionTimeout", c.TransactionTimeout, fmt.Sprintf("is below 1s; set at least 1s, or 0 for the default %v", producer.DefaultTransactionTimeout))
	case c.LeaseTTL < lease.MinTTL:
		return bad("LeaseTTL", c.LeaseTTL, fmt.Sprintf("is too short: set at least %v (seconds in production), or 0 for the default %v", lease.MinTTL, lease.DefaultTTL))
	case c.LeaseRenew < 0:
		return bad("LeaseRenew", c.LeaseRenew, fmt.Sprintf("is negative: set a duration below ProducerConfig.LeaseTTL/2 (%v), or 0 for the default", c.LeaseTTL/2), "ProducerConfig.LeaseTTL")
	case c.LeaseRenew >= c.LeaseTTL/2:
		return bad("LeaseRenew", c.LeaseRenew, fmt.Sprintf("must be less than ProducerConfig.LeaseTTL/2 (%v; LeaseTTL %v), or the leader cannot renew before its lease expires: lower it or raise ProducerConfig.LeaseTTL",
			c.LeaseTTL/2, c.LeaseTTL), "ProducerConfig.LeaseTTL")
	case c.PublishLead > producer.MaxPublishLead:
		return bad("PublishLead", c.PublishLead, fmt.Sprintf("is above %v: a change would take effect that long after it is committed, and workers would hold claims that long; use the default %v, or a negative value to publish at each window's start", producer.MaxPublishLead, producer.DefaultPublishLead))
	case c.MaxJobLabels < 0:
		return bad("MaxJobLabels", c.MaxJobLabels, fmt.Sprintf("is negative; set a positive bound, or 0 for %d", metrics.DefaultMaxJobLabels))
	}
	return nil
}

// Producer is a whole kjob producer process, as cmd/producer runs it: it
// campaigns for the leader lease, and while it holds it publishes each
// job's windows in Kafka transactions, skipping the jobs operators
// paused; it serves /healthz, /readyz and /metrics. Run two or more
// replicas: the others stand by. Create it with NewProducer, then Run.
type Producer struct {
	process
	cfg   ProducerConfig
	inner *producer.Producer
}

// NewProducer validates cfg and assembles a producer. It connects to
// nothing: Run does. An invalid field is a *ConfigError naming it
// ("ProducerConfig.LeaseTTL"), its value and the fix; an error of
// cfg.Elector is returned as it is.
func NewProducer(cfg ProducerConfig) (_ *Producer, err error) {
	defer func() { err = asConfigError(err) }()
	if err := checkBrokers("ProducerConfig.Brokers", cfg.Brokers); err != nil {
		return nil, err
	}
	if err := checkRedis("ProducerConfig.Redis", cfg.Redis); err != nil {
		return nil, err
	}
	if cfg.Signer != nil && cfg.Signer.s == nil {
		return nil, &configerr.Error{Op: "kjob", Field: "ProducerConfig.Signer", Reason: "is an empty Signer; make it with kjob.NewSigner"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if cfg.MisfireGrace > 0 && cfg.MisfireGrace < cfg.LeaseTTL+cfg.LeaseRenew {
		log.Warn("ProducerConfig.MisfireGrace is shorter than a crash failover (ProducerConfig.LeaseTTL + ProducerConfig.LeaseRenew): a window due while a crashed leader's lease runs out is published only if its job's catchup covers it",
			"misfire_grace", cfg.MisfireGrace, "lease_ttl", cfg.LeaseTTL, "lease_renew", cfg.LeaseRenew)
	}
	obs := service.Observe(cfg.Redis, cfg.TracerProvider, !cfg.NoJobLabel, cfg.MaxJobLabels)
	p := &Producer{process: process{role: "producer", log: log, obs: obs, health: service.NewHealth()}, cfg: cfg}
	if p.inner, err = p.assemble(); err != nil {
		return nil, err
	}
	return p, nil
}

// assemble builds the elector, the legacy pause list (migrated into the
// spec by the leader) and the producer below.
func (p *Producer) assemble() (*producer.Producer, error) {
	c, m := p.cfg, p.obs.Metrics
	var elector producer.Elector
	var err error
	if c.Elector != nil {
		elector = reporting{el: c.Elector, holder: c.ID, onChange: m.LeaseChanged}
	} else {
		elector, err = redisElector(c, m.LeaseChanged)
	}
	if err != nil {
		return nil, err
	}
	legacy, err := pause.New(c.Redis, c.Namespace)
	if err != nil {
		return nil, err
	}
	var sign func(*kgo.Record) error
	if c.Signer != nil {
		sign = c.Signer.s.Sign
	}
	return producer.New(producer.Config{
		Brokers:            c.Brokers,
		ClientOpts:         append(p.obs.KafkaOpts(true), c.KafkaOpts...),
		ReaderOpts:         append([]kgo.Opt{}, c.KafkaOpts...), // no metrics hooks: see producer.Config.ReaderOpts
		Sign:               sign,
		Namespace:          c.Namespace,
		Topic:              c.Topic,
		StateTopic:         c.StateTopic,
		Partitions:         c.Partitions,
		ReplicationFactor:  c.ReplicationFactor,
		TransactionalID:    c.TransactionalID,
		TransactionTimeout: c.TransactionTimeout,
		MisfireGrace:       c.MisfireGrace,
		PublishLead:        c.PublishLead,
		Jobs:               c.Jobs,
		FileSource:         fileSource(c.Jobs),
		Replica:            c.ID,
		OnMalformed:        m.Malformed,
		Elector:            elector,
		LegacyPauses:       legacy,
		Logger:             c.Logger,
		OnPublished:        m.Published,
		OnSkipped:          m.Skipped,
	})
}

// fileSource names the schedules file Jobs came from, with the SHA-256 of
// its content, for the schedule change log.
func fileSource(jobs []*schedule.Job) specs.Source {
	src := specs.Source{Kind: specs.SourceFile}
	if len(jobs) == 0 {
		return src
	}
	src.File = jobs[0].File
	if b, err := os.ReadFile(src.File); err == nil {
		sum := sha256.Sum256(b)
		src.Hash = hex.EncodeToString(sum[:])
	}
	return src
}

// redisElector is the default leader election: a lease in Redis at the
// deployment's lease key.
func redisElector(c ProducerConfig, onChange func(lease.Event)) (producer.Elector, error) {
	lock, err := lease.NewRedisLock(c.Redis, names.Deployment{Namespace: c.Namespace}.LeaseKey())
	if err != nil {
		return nil, err
	}
	return lease.NewElector(lease.Config{Lock: lock, Holder: c.ID, TTL: c.LeaseTTL, RenewInterval: c.LeaseRenew, Logger: c.Logger, OnChange: onChange})
}

// Run serves /healthz at once, checks that every Kafka broker implements
// the requests it sends (stopping with an error that names a missing one),
// checks the Kafka and Redis permissions,
// creates the topics if missing, then campaigns for leadership and
// publishes windows while it leads, until ctx is done. It returns nil
// after a graceful shutdown, when every goroutine and client it started
// is gone, or the error that stopped it (one naming the config fields
// when an existing topic has other settings). A Producer runs once.
func (p *Producer) Run(ctx context.Context) (err error) {
	defer func() { err = asConfigError(err) }()
	if err := p.once(); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	c := p.cfg
	// A closed Redis client ends Run with an error instead of retries.
	rw := watchRedis(ctx, stop, "ProducerConfig.Redis", c.Redis)
	defer func() {
		if werr := rw.Stop(); werr != nil {
			err = werr
		}
	}()
	need := checks{apis: preflight.ProducerAPIs}
	if !c.SkipKafkaAccessCheck {
		need.kafka = access.Producer(c.Topic, c.StateTopic, c.TransactionalID)
	}
	if !c.SkipRedisAccessCheck {
		need.redis = func() (preflight.RedisRole, error) {
			leaseKey := "" // an Elector of the caller's keeps no lease in Redis
			if c.Elector == nil {
				leaseKey = names.Deployment{Namespace: c.Namespace}.LeaseKey()
			}
			return preflight.ProducerRedisRole(c.Redis, redisUser(c.Redis), c.Namespace, c.ID, leaseKey)
		}
	}
	srv, err := p.start(ctx, stop, "ProducerConfig.HTTPAddr", c.HTTPAddr, c.Brokers, c.KafkaOpts, need)
	if srv == nil {
		return err
	}
	defer srv.Stop()
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.KafkaOpts...)...)
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	p.health.Running(func() error { return p.ready(adm) })
	p.log.Info("producer starting", "id", c.ID, "brokers", strings.Join(c.Brokers, ","), "topic", c.Topic, "jobs", len(c.Jobs), "transactional_id", c.TransactionalID)
	err = topicFields(p.inner.Run(ctx), map[string]topicSource{
		c.Topic:      {Partitions: "ProducerConfig.Partitions", ReplicationFactor: "ProducerConfig.ReplicationFactor"},
		c.StateTopic: {Partitions: "ProducerConfig.StateTopic", ReplicationFactor: "ProducerConfig.ReplicationFactor", Compacted: "ProducerConfig.StateTopic"},
	})
	p.log.Info("producer stopped")
	if serr := srv.Stop(); serr != nil {
		return serr
	}
	return err
}

// ready is /readyz once running: the deployment's topics exist (Run
// created or checked them), and Redis and a Kafka broker answer.
func (p *Producer) ready(adm *kadm.Client) error {
	if !p.inner.TopicsChecked() {
		return errors.New("kafka: the deployment's topics are not created or checked yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.cfg.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if _, err := adm.BrokerMetadata(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}
