// Command producer publishes kjob job windows. Run two or more replicas: one
// holds the lease and publishes each job's windows at their start times in
// Kafka transactions; the others stand by and take over when it stops.
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/pkg/access"
	"github.com/kjob/kjob/pkg/lease"
	"github.com/kjob/kjob/pkg/metrics"
	"github.com/kjob/kjob/pkg/names"
	"github.com/kjob/kjob/pkg/pause"
	"github.com/kjob/kjob/pkg/producer"
	"github.com/kjob/kjob/pkg/schedule"
	ktopic "github.com/kjob/kjob/pkg/topic"
)

const usage = `producer: publish kjob job windows to Kafka from the lease-holding replica.

Usage: producer [flags]`

func main() {
	os.Exit(cli.Exit(os.Stderr, "producer", run(context.Background(), os.Args[1:])))
}

func run(ctx context.Context, args []string) error {
	var (
		brokers, topic, stateTopic, txnID, schedules, namespace, id, httpAddr, logFormat, logLevel string
		redisOpts                                                                                  cli.RedisOptions
		partitions, rf                                                                             int
		leaseTTL, renew, txnTimeout, misfireGrace                                                  time.Duration
		kafkaSec                                                                                   cli.KafkaSecurity
		signOpts                                                                                   cli.SigningOptions
		checkACLs, checkRedis, metricsJobLabel                                                     bool
		metricsMaxJobs                                                                             int
		leaseBackend, leaseNS, leaseName                                                           string
	)
	f := cli.NewFlags("producer", usage)
	f.String(&brokers, "brokers", "KJOB_BROKERS", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	f.String(&topic, "topic", "KJOB_TOPIC", names.DefaultTopic, "topic to publish windows to")
	f.String(&stateTopic, "state-topic", "KJOB_STATE_TOPIC", "", "compacted topic with the last published window per job (default <topic>.state)")
	f.IntRange(&partitions, "partitions", "KJOB_PARTITIONS", 1, 1, math.MaxInt32, "partitions of the windows topic when created (an existing topic must match)")
	f.IntRange(&rf, "replication-factor", "KJOB_REPLICATION_FACTOR", 1, 1, math.MaxInt16, "replication factor of created topics (1 to 32767)")
	f.String(&txnID, "transactional-id", "KJOB_TRANSACTIONAL_ID", "", "Kafka transactional id, the same for every producer replica of this deployment (default kjob-producer-<namespace>)")
	f.Duration(&txnTimeout, "transaction-timeout", "KJOB_TRANSACTION_TIMEOUT", 10*time.Second, "Kafka transaction timeout")
	f.String(&schedules, "schedules", "KJOB_SCHEDULES", "schedules.yaml", "schedules file (YAML)")
	f.String(&namespace, "namespace", "KJOB_NAMESPACE", names.DefaultNamespace, "deployment name: prefixes Redis keys; one per kjob deployment")
	f.String(&id, "id", "KJOB_ID", kjob.DefaultID(), "this replica's id (lease holder name)")
	kafkaSec.Register(f)
	f.Bool(&checkACLs, "kafka-check-acls", "KJOB_KAFKA_CHECK_ACLS", true, "before starting, check that the Kafka principal holds the producer's ACLs (deploy/SECURITY.md)")
	signOpts.RegisterProducer(f)
	redisOpts.Register(f)
	f.Bool(&checkRedis, "redis-check-acls", "KJOB_REDIS_CHECK_ACLS", true, "before starting, run each Redis script and command the producer uses once, on throwaway keys, and stop if the Redis user lacks a permission (deploy/SECURITY.md)")
	f.String(&leaseBackend, "lease-backend", "KJOB_LEASE_BACKEND", "redis", "where the leader lease lives: redis, or kubernetes (a coordination.k8s.io Lease, in-cluster credentials)")
	f.String(&leaseNS, "lease-namespace", "KJOB_LEASE_NAMESPACE", "", "Kubernetes namespace of the Lease (default the pod's own, from its service account)")
	f.String(&leaseName, "lease-name", "KJOB_LEASE_NAME", "", "name of the Kubernetes Lease (default kjob-producer-<namespace>)")
	f.Duration(&leaseTTL, "lease-ttl", "KJOB_LEASE_TTL", 5*time.Second, "leader lease TTL: a crashed leader is replaced within about this long")
	f.Duration(&renew, "lease-renew", "KJOB_LEASE_RENEW", time.Second, "how often the leader renews its lease (must be < lease-ttl/2)")
	f.Duration(&misfireGrace, "misfire-grace", "KJOB_MISFIRE_GRACE", producer.DefaultMisfireGrace,
		"a window due at most this long before a new leader took over is published whatever the job's catchup (keep it above --lease-ttl + --lease-renew, the crash failover time; 0 turns it off)")
	f.String(&httpAddr, "http-addr", "KJOB_HTTP_ADDR", ":8080", "listen address for /healthz, /readyz and /metrics; empty turns it off")
	f.Bool(&metricsJobLabel, "metrics-job-label", "KJOB_METRICS_JOB_LABEL", true, "label per-job metrics with the job's name (kjob_job); turn off with many thousands of jobs to keep the number of series bounded")
	f.IntRange(&metricsMaxJobs, "metrics-max-jobs", "KJOB_METRICS_MAX_JOBS", metrics.DefaultMaxJobLabels, 1, math.MaxInt32,
		`at most this many distinct kjob_job label values; further jobs are counted under kjob_job="other" and in kjob_metrics_job_labels_folded_total`)
	f.String(&logFormat, "log-format", "KJOB_LOG_FORMAT", "text", "log format: text or json")
	f.String(&logLevel, "log-level", "KJOB_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		return err
	}
	log, err := cli.Logger(os.Stderr, logFormat, logLevel)
	if err != nil {
		return err
	}
	// go-redis's own lines ("failed to dial") in the process's format,
	// rate-limited.
	redis.SetLogger(cli.RedisLogger(log, cli.RedisLogEvery))
	brokerList, err := cli.Brokers(brokers)
	if err != nil {
		return f.Errorf("brokers", "%v", err)
	}
	// Settings that break leadership stop the process before anything is
	// built, naming what the user set.
	switch {
	case leaseTTL < lease.MinTTL:
		return f.Errorf("lease-ttl", "too short: set at least %v (seconds in production)", lease.MinTTL)
	case renew <= 0:
		return f.Errorf("lease-renew", "not positive: set a duration below --lease-ttl/2 (%v)", leaseTTL/2)
	case renew >= leaseTTL/2:
		return f.Errorf("lease-renew", "must be less than --lease-ttl/2 (%v; %s), or the leader cannot renew before its lease expires: lower --lease-renew or raise --lease-ttl",
			leaseTTL/2, f.Ref("lease-ttl"))
	}

	if misfireGrace < 0 {
		return fmt.Errorf("--misfire-grace/KJOB_MISFIRE_GRACE=%v is negative: use a duration such as 10s, or 0 to turn the grace off", misfireGrace)
	}
	if misfireGrace > 0 && misfireGrace < leaseTTL+renew {
		log.Warn("--misfire-grace is shorter than a crash failover (--lease-ttl + --lease-renew): a window due while a crashed leader's lease runs out is published only if its job's catchup covers it",
			"misfire_grace", misfireGrace, "lease_ttl", leaseTTL, "lease_renew", renew)
	}
	grace := misfireGrace
	if grace == 0 {
		grace = -1 // producer.Config: negative is none, zero the default
	}

	// An invalid schedules file stops the process here, naming file and line.
	file, err := schedule.Load(schedules)
	if err != nil {
		return err
	}
	// Parsing a large file (100k jobs) builds a YAML tree several times
	// the size of the jobs it yields; hand that memory back to the OS now
	// rather than carrying it for the life of the process.
	debug.FreeOSMemory()
	d := names.Deployment{Namespace: namespace, Topic: topic}
	if txnID == "" {
		txnID = d.TransactionalID()
	}
	rdb, err := redisOpts.Client()
	if err != nil {
		return err
	}
	defer rdb.Close()
	obs, err := cli.Observe(ctx, log, "kjob-producer", rdb, metricsJobLabel, metricsMaxJobs)
	if err != nil {
		return err
	}
	defer obs.Close()
	reg, m := obs.Registry, obs.Metrics
	elector, err := newElector(leaseBackend, leaseNS, leaseName, namespace, id, leaseTTL, renew, rdb, log, m.LeaseChanged)
	if err != nil {
		return f.WithFlags(err, map[string]string{"Config.TTL": "lease-ttl", "Config.RenewInterval": "lease-renew", "Config.Holder": "id",
			"Config.RenewDeadline": "lease-ttl", "LeaseDuration": "lease-ttl", "Config.RetryPeriod": "lease-renew", "RenewDeadline": "lease-ttl",
			"Config.Identity": "id", "Config.Namespace": "lease-namespace", "Config.Name": "lease-name"})
	}
	pauses, err := pause.New(rdb, namespace)
	if err != nil {
		return err
	}
	kafkaOpts, err := kafkaSec.ClientOpts()
	if err != nil {
		return err
	}
	sign, err := signOpts.Signer()
	if err != nil {
		return err
	}
	p, err := producer.New(producer.Config{
		Brokers:            brokerList,
		ClientOpts:         append(obs.KafkaOpts(true), kafkaOpts...),
		Sign:               sign,
		Namespace:          namespace,
		Topic:              topic,
		StateTopic:         stateTopic,
		Partitions:         int32(partitions),
		ReplicationFactor:  int16(rf),
		TransactionalID:    txnID,
		TransactionTimeout: txnTimeout,
		MisfireGrace:       grace,
		Jobs:               file.Jobs,
		Elector:            elector,
		Pauses:             pauses,
		Logger:             log,
		OnPublished:        m.Published,
		OnSkipped:          m.Skipped,
	})
	if err != nil {
		return f.WithFlags(err, map[string]string{"Brokers": "brokers", "StateTopic": "state-topic", "Partitions": "partitions",
			"ReplicationFactor": "replication-factor", "TransactionalID": "transactional-id", "TransactionTimeout": "transaction-timeout"})
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// /healthz from the first moment: start-up may wait long for Kafka or
	// Redis, and a liveness probe must not kill the process meanwhile.
	// /readyz says what it waits for.
	health := cli.NewHealth()
	srv, err := cli.StartServer(log, httpAddr, reg, health.Ready, stop)
	if err != nil {
		return err
	}
	defer srv.Stop()

	if checkACLs {
		health.Waiting("waiting for kafka (checking the producer's ACLs)")
		st := stateTopic
		if st == "" {
			st = d.StateTopic()
		}
		if err := cli.CheckKafkaAccess(ctx, log, brokerList, kafkaOpts, access.Producer(topic, st, txnID)); err != nil {
			if ctx.Err() != nil {
				return srv.Stop()
			}
			return err
		}
	}
	if checkRedis {
		health.Waiting("waiting for redis (checking the producer's Redis permissions)")
		leaseKey := ""
		if leaseBackend == "redis" {
			leaseKey = d.LeaseKey()
		}
		role, err := cli.ProducerRedisRole(rdb, redisOpts.User(), namespace, id, leaseKey)
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
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokerList...)}, kafkaOpts...)...)
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ready := func() error {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := rdb.Ping(pctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if _, err := adm.BrokerMetadata(pctx); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		return nil
	}

	health.Running(ready)
	log.Info("producer starting", "id", id, "brokers", brokers, "topic", topic, "jobs", len(file.Jobs), "schedules", schedules, "transactional_id", txnID)
	err = p.Run(ctx)
	log.Info("producer stopped")
	if err := srv.Stop(); err != nil {
		return err
	}
	if errors.Is(err, ktopic.ErrMismatch) {
		return f.WithFlags(err, map[string]string{"Spec.Partitions": "partitions", "Spec.ReplicationFactor": "replication-factor"})
	}
	return err
}
