// Command worker runs kjob job windows: it joins the workers' consumer group,
// and for each partition it owns, runs the partition's windows in order with
// Redis idempotency keys so a window that is done never runs again.
//
// It is also the template for your own worker: copy this package, register
// your handlers next to the built-in ones (see builtin.go) and build it.
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/pkg/access"
	"github.com/kjob/kjob/pkg/control"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/inspect"
	"github.com/kjob/kjob/pkg/metrics"
	"github.com/kjob/kjob/pkg/names"
	"github.com/kjob/kjob/pkg/partition"
	"github.com/kjob/kjob/pkg/topic"
	"github.com/kjob/kjob/pkg/worker"
)

const usage = `worker: run kjob job windows from Kafka, exactly once per window.

Usage: worker [flags]`

func main() {
	os.Exit(cli.Exit(os.Stderr, "worker", run(context.Background(), os.Args[1:])))
}

type config struct {
	brokers, topic, group, dlq, namespace, id, httpAddr, logFormat, logLevel  string
	redis                                                                     cli.RedisOptions
	claimTTL, retention, grace, sessionTimeout, heartbeat, extend, stallAfter time.Duration
	rf, concurrency, maxUncommitted                                           int
	kafkaSec                                                                  cli.KafkaSecurity
	signing                                                                   cli.SigningOptions
	checkACLs, metricsJobLabel                                                bool
	httpAllowHosts                                                            string
	metricsMaxJobs                                                            int
}

func run(ctx context.Context, args []string) error {
	var c config
	var controlTopic string
	var checkRedis bool
	f := cli.NewFlags("worker", usage)
	f.String(&c.brokers, "brokers", "KJOB_BROKERS", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	f.String(&c.topic, "topic", "KJOB_TOPIC", names.DefaultTopic, "topic the producer publishes windows to")
	f.String(&c.group, "group", "KJOB_GROUP", names.DefaultGroup, "consumer group of the workers")
	f.String(&c.dlq, "dlq-topic", "KJOB_DLQ_TOPIC", "", "dead-letter topic (default <topic>.dlq)")
	f.String(&controlTopic, "control-topic", "KJOB_CONTROL_TOPIC", "", "control topic of operators' replays (kjobctl replay; default <topic>.control)")
	f.IntRange(&c.rf, "replication-factor", "KJOB_REPLICATION_FACTOR", 1, 1, math.MaxInt16, "replication factor of the dead-letter and control topics when created (1 to 32767)")
	f.String(&c.namespace, "namespace", "KJOB_NAMESPACE", names.DefaultNamespace, "deployment name: prefixes Redis keys; one per kjob deployment")
	f.String(&c.id, "id", "KJOB_ID", cli.DefaultID(), "this worker's id (claim owner, group member)")
	c.kafkaSec.Register(f)
	f.Bool(&c.checkACLs, "kafka-check-acls", "KJOB_KAFKA_CHECK_ACLS", true, "before starting, check that the Kafka principal holds the worker's ACLs (deploy/SECURITY.md)")
	c.signing.RegisterWorker(f)
	c.redis.Register(f)
	f.Bool(&checkRedis, "redis-check-acls", "KJOB_REDIS_CHECK_ACLS", true, "before starting, run each Redis script and command the worker uses once, on throwaway keys, and stop if the Redis user lacks a permission (deploy/SECURITY.md)")
	f.Duration(&c.claimTTL, "claim-ttl", "KJOB_CLAIM_TTL", 6*time.Second, "how long a claim outlives a worker that stopped extending it: a crashed worker's window re-runs after at most this long. "+
		"Trade-off: a running handler whose claim cannot be extended (Redis unreachable) is cancelled before the claim can expire, after claim-ttl - max(claim-extend, claim-ttl/5) without a successful extend (4s by default), and re-runs once Redis is back; raise it if Redis outages (e.g. a Sentinel failover) last longer than that")
	f.Duration(&c.extend, "claim-extend", "KJOB_CLAIM_EXTEND", 0, "how often a running handler's claim is extended; must be less than claim-ttl/2 (default claim-ttl/3)")
	f.Duration(&c.retention, "retention", "KJOB_RETENTION", 7*24*time.Hour, "how long done markers are kept: the replay horizon")
	f.Duration(&c.grace, "grace", "KJOB_GRACE", 10*time.Second, "on shutdown or revoke, how long in-flight handlers may finish; also how long a handler that ignores cancellation is waited for")
	f.Duration(&c.stallAfter, "stall-after", "KJOB_STALL_AFTER", worker.DefaultStallAfter, "how long settling a partition's oldest record may keep failing (its dead letter refused, Redis not answering) before the partition is reported stalled: /readyz 503, kjob_partition_stalled_seconds, kjobctl status")
	f.IntRange(&c.concurrency, "concurrency", "KJOB_CONCURRENCY", worker.DefaultConcurrency, 1, 1_000_000, "how many windows run at once across the partitions this worker owns; windows of one job follow its overlap policy (1 runs one window at a time)")
	f.IntRange(&c.maxUncommitted, "max-uncommitted", "KJOB_MAX_UNCOMMITTED", partition.DefaultMaxUncommitted, 1, 10_000_000, "per partition, how many records may be fetched and not yet committed (from the first unsettled one on) before fetching pauses: bounds memory and what a crash re-delivers")
	f.Duration(&c.sessionTimeout, "session-timeout", "KJOB_SESSION_TIMEOUT", 6*time.Second, "consumer group session timeout (real Kafka brokers refuse less than 6s by default)")
	f.Duration(&c.heartbeat, "heartbeat", "KJOB_HEARTBEAT", time.Second, "consumer group heartbeat interval")
	f.String(&c.httpAddr, "http-addr", "KJOB_HTTP_ADDR", ":8080", "listen address for /healthz, /readyz and /metrics; empty turns it off")
	f.Bool(&c.metricsJobLabel, "metrics-job-label", "KJOB_METRICS_JOB_LABEL", true, "label per-job metrics with the job's name (kjob_job); turn off with many thousands of jobs to keep the number of series bounded")
	f.IntRange(&c.metricsMaxJobs, "metrics-max-jobs", "KJOB_METRICS_MAX_JOBS", metrics.DefaultMaxJobLabels, 1, math.MaxInt32,
		`at most this many distinct kjob_job label values; windows of further jobs (e.g. names a writer to the windows topic made up) are counted under kjob_job="other" and in kjob_metrics_job_labels_folded_total`)
	f.String(&c.httpAllowHosts, "http-allow-hosts", "KJOB_HTTP_ALLOW_HOSTS", "",
		"comma-separated hosts the built-in http handler may POST to: names (hooks.example.com), *.example.com, IP addresses or CIDR blocks (10.0.0.0/8); empty allows any host, with a warning at start-up (deploy/SECURITY.md)")
	f.String(&c.logFormat, "log-format", "KJOB_LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.logLevel, "log-level", "KJOB_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		return err
	}
	log, err := cli.Logger(os.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	// go-redis's own lines ("failed to dial") in the process's format,
	// rate-limited.
	redis.SetLogger(cli.RedisLogger(log, cli.RedisLogEvery))
	// worker.New and control.NewAgent add the worker key themselves: they
	// get base, the rest of main logs with it.
	base := log
	log = log.With("worker", c.id)
	if err := c.check(f); err != nil {
		return err
	}
	brokers, err := cli.Brokers(c.brokers)
	if err != nil {
		return f.Errorf("brokers", "%v", err)
	}
	allow, err := parseAllowHosts(c.httpAllowHosts)
	if err != nil {
		return f.Errorf("http-allow-hosts", "%v", err)
	}
	// The trust model (deploy/SECURITY.md): whoever can write to the
	// windows topic chooses the handler and payload of what runs, unless
	// signatures are required; say so loudly when they are not.
	if !c.signing.Required {
		log.Warn("signatures are not required: any principal that can write to the windows topic can run any registered handler with any payload on this worker; "+
			"sign windows (producer --signing-keys-dir, --signing-key-id) and set --signatures-required/KJOB_SIGNATURES_REQUIRED=true (deploy/SECURITY.md)",
			"signing_keys_dir", c.signing.KeysDir)
	}
	if allow == nil {
		log.Warn("the http handler may POST to ANY host: --http-allow-hosts/KJOB_HTTP_ALLOW_HOSTS is empty, so a window's payload.url can point at internal services and cloud metadata endpoints (SSRF); "+
			"list the hosts your http jobs call (deploy/SECURITY.md)", "signatures_required", c.signing.Required)
	}
	if c.extend == 0 {
		c.extend = c.claimTTL / 3
	}
	rdb, err := c.redis.Client()
	if err != nil {
		return err
	}
	defer rdb.Close()
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: c.namespace, ClaimTTL: c.claimTTL, Retention: c.retention})
	if err != nil {
		return f.WithFlags(err, map[string]string{"Config.Namespace": "namespace", "Config.ClaimTTL": "claim-ttl", "Config.Retention": "retention"})
	}

	kafkaOpts, err := c.kafkaSec.ClientOpts()
	if err != nil {
		return err
	}
	verify, err := c.signing.Verifier()
	if err != nil {
		return err
	}

	mux := handler.NewMux()
	mux.Use(handler.Recover())
	registerBuiltins(mux, log, &http.Client{}, allow)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	obs, err := cli.Observe(ctx, log, "kjob-worker", rdb, c.metricsJobLabel, c.metricsMaxJobs)
	if err != nil {
		return err
	}
	defer obs.Close()
	reg, m, tr := obs.Registry, obs.Metrics, obs.Tracing

	// /healthz from the first moment: start-up may wait long for Kafka or
	// Redis, and a liveness probe must not kill the process meanwhile.
	// /readyz says what it waits for.
	health := cli.NewHealth()
	srv, err := cli.StartServer(log, c.httpAddr, reg, health.Ready, stop)
	if err != nil {
		return err
	}
	defer srv.Stop()

	if c.checkACLs {
		health.Waiting("waiting for kafka (checking the worker's ACLs)")
		d := names.Deployment{Namespace: c.namespace, Topic: c.topic}
		dlq := c.dlq
		if dlq == "" {
			dlq = d.DeadLetterTopic()
		}
		ctrl := controlTopic
		if ctrl == "" {
			ctrl = d.ControlTopic()
		}
		if err := cli.CheckKafkaAccess(ctx, log, brokers, kafkaOpts, access.Worker(c.topic, dlq, ctrl, c.group)); err != nil {
			if ctx.Err() != nil {
				return srv.Stop()
			}
			return err
		}
	}
	if checkRedis {
		health.Waiting("waiting for redis (checking the worker's Redis permissions)")
		role, err := cli.WorkerRedisRole(rdb, c.redis.User(), c.namespace, c.id)
		if err != nil {
			return err
		}
		if err := cli.CheckRedisAccess(ctx, log, role); err != nil {
			if ctx.Err() != nil {
				return srv.Stop()
			}
			return err
		}
	}
	w, err := worker.New(worker.Config{
		Brokers:             brokers,
		ClientOpts:          append(obs.KafkaOpts(false), kafkaOpts...),
		Verify:              verify,
		Topic:               c.topic,
		Group:               c.group,
		DeadLetterTopic:     c.dlq,
		ReplicationFactor:   int16(c.rf),
		Store:               m.Store(store),
		Handler:             mux,
		WorkerID:            c.id,
		Grace:               c.grace,
		Concurrency:         c.concurrency,
		StallAfter:          c.stallAfter,
		MaxUncommitted:      c.maxUncommitted,
		ClaimExtendInterval: c.extend,
		SessionTimeout:      c.sessionTimeout,
		HeartbeatInterval:   c.heartbeat,
		Logger:              base,
		OnExecuted:          m.Executed,
		OnAttempt:           tr.Attempt,
	})
	if err != nil {
		return f.WithFlags(err, map[string]string{
			"Config.Brokers": "brokers", "Config.Topic": "topic", "Config.Group": "group", "Config.DeadLetterTopic": "dlq-topic",
			"Config.WorkerID": "id", "Config.Grace": "grace", "Config.ClaimExtendInterval": "claim-extend",
			"Config.Concurrency": "concurrency", "Config.MaxUncommitted": "max-uncommitted", "Config.StallAfter": "stall-after",
			"Config.SessionTimeout": "session-timeout", "Config.HeartbeatInterval": "heartbeat",
		})
	}

	ready := func() error {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := rdb.Ping(pctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if !w.Joined() {
			return fmt.Errorf("kafka: not (yet) a member of consumer group %q", c.group)
		}
		return w.StallError()
	}
	reg.MustRegister(metrics.Stalls(w.Stalled))

	health.Running(ready)
	log.Info("worker starting", "brokers", c.brokers, "topic", c.topic, "group", c.group, "handlers", mux.Names())
	var wg sync.WaitGroup
	hctx, hcancel := context.WithCancel(ctx)
	// The control agent applies operators' replays (kjobctl replay) to the
	// partitions this worker owns.
	agent, err := control.NewAgent(control.AgentConfig{Brokers: brokers, ClientOpts: kafkaOpts, Group: c.group, Topic: c.topic, ControlTopic: controlTopic,
		ReplicationFactor: int16(c.rf), Member: c.id, Seeker: w, Logger: base})
	if err != nil {
		hcancel()
		wg.Wait()
		return f.WithFlags(err, map[string]string{"AgentConfig.ControlTopic": "control-topic", "AgentConfig.Topic": "topic", "AgentConfig.Group": "group"})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := agent.Run(hctx); err != nil {
			log.Error("control agent stopped; kjobctl replay cannot reach this worker", "err", err)
		}
	}()
	// Every worker exports the group's lag, read with kadm off the scrape
	// path; dashboards take the max per partition across workers.
	lagCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, kafkaOpts...)...)
	if err != nil {
		hcancel()
		wg.Wait()
		return err
	}
	defer lagCl.Close()
	// And the time lag: the age of the oldest window not yet settled.
	timeLag, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: brokers, ClientOpts: kafkaOpts,
		Topic: c.topic, Group: c.group, States: store})
	if err != nil {
		hcancel()
		wg.Wait()
		return err
	}
	defer timeLag.Close()
	lag := metrics.NewLag(reg, kadm.NewClient(lagCl), c.group, c.topic, 5*time.Second, log, metrics.WithTimeLag(timeLag, c.metricsJobLabel), metrics.WithTimeLagMaxJobs(c.metricsMaxJobs))
	wg.Add(1)
	go func() {
		defer wg.Done()
		lag.Run(hctx)
	}()
	err = w.Run(ctx)
	hcancel()
	wg.Wait()
	log.Info("worker stopped")
	if err := srv.Stop(); err != nil {
		return err
	}
	if errors.Is(err, topic.ErrMismatch) {
		return fmt.Errorf("%s, %s: %w", f.Ref("dlq-topic"), f.Ref("replication-factor"), err)
	}
	return err
}

// check refuses settings that would break the guarantee, before anything
// is built, naming the flag, its variable, the value and the fix.
func (c *config) check(f *cli.Flags) error {
	switch {
	case c.claimTTL < dedupe.MinClaimTTL:
		return f.Errorf("claim-ttl", "below the minimum %v: set at least %v (a few seconds in production)", dedupe.MinClaimTTL, dedupe.MinClaimTTL)
	case c.extend < 0:
		return f.Errorf("claim-extend", "negative: set a duration below --claim-ttl/2, or 0 for claim-ttl/3")
	case c.extend >= c.claimTTL/2:
		return f.Errorf("claim-extend", "must be less than --claim-ttl/2 (%v; %s), or claims expire while their handlers run and another worker may run the same window: lower --claim-extend (0 picks claim-ttl/3) or raise --claim-ttl",
			c.claimTTL/2, f.Ref("claim-ttl"))
	case c.retention > 0 && c.retention < c.claimTTL:
		return f.Errorf("retention", "shorter than %s: done markers must outlive claims; set at least the claim TTL (7 days is customary: it is the replay horizon)", f.Ref("claim-ttl"))
	case c.heartbeat > 0 && c.sessionTimeout > 0 && c.heartbeat >= c.sessionTimeout:
		return f.Errorf("heartbeat", "must be below %s: set about a third of the session timeout (%v)", f.Ref("session-timeout"), c.sessionTimeout/3)
	}
	return nil
}
