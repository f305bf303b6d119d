// Command producer publishes kjob job windows. Run two or more replicas: one
// holds the lease and publishes each job's windows at their start times in
// Kafka transactions; the others stand by and take over when it stops.
//
// It is kjob.NewProducer with flags, and the schedules file loaded.
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/gctune"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/schedule"
)

const usage = `producer: publish kjob job windows to Kafka from the lease-holding replica.

Usage: producer [flags]`

// gcTuning is the producer's GOGC unless the environment sets one: Go's
// default 100 while the live heap is small, 50 once it reaches 32 MiB
// (internal/base/gctune). A large producer heap is almost all long-lived
// state (the view of every job, the timer heap, the parsed schedules
// file) and it allocates little once running, so GOGC 100, which lets the
// heap grow to twice the live heap before a collection, mostly holds
// garbage: at 100,000 jobs from a file the live heap is about 76 MB and
// the heap reached 128 MB; 50 keeps the row "100k schedules: producer RSS"
// within its 200 MB target with room (Prometheus made the same trade,
// GOGC 75 by default since 2.53, prometheus/prometheus#14288). A small
// one gains little from 50 and pays in collections during each herd of
// windows: with 1,000 jobs due at once, 50 started them 12% later at the
// p99 (docs/performance.md, "GOGC by live heap").
var gcTuning = gctune.Config{Small: 100, Large: 50, From: 32 << 20}

func main() {
	if os.Getenv("GOGC") == "" {
		gctune.Start(gcTuning)
	}
	os.Exit(cli.Exit(os.Stderr, "producer", run(context.Background(), os.Args[1:])))
}

func run(ctx context.Context, args []string) error {
	var p cli.Process
	var c kjob.ProducerConfig
	var signing cli.SigningOptions
	var schedules, leaseBackend, leaseNS, leaseName string
	var partitions int
	f := cli.NewFlags("producer", usage)
	p.Register(f, "producer", sharedHelp)
	f.String(&c.StateTopic, "state-topic", "KJOB_STATE_TOPIC", "", "compacted topic with the last published window per job (default <topic>.state)").Feeds("ProducerConfig.StateTopic")
	f.IntRange(&partitions, "partitions", "KJOB_PARTITIONS", producer.DefaultPartitions, 1, math.MaxInt32, "partitions of the windows topic when created (an existing topic must match)").Feeds("ProducerConfig.Partitions")
	f.String(&c.TransactionalID, "transactional-id", "KJOB_TRANSACTIONAL_ID", "", "Kafka transactional id, the same for every producer replica of this deployment (default kjob-producer-<namespace>)").Feeds("ProducerConfig.TransactionalID")
	f.Duration(&c.TransactionTimeout, "transaction-timeout", "KJOB_TRANSACTION_TIMEOUT", producer.DefaultTransactionTimeout, "Kafka transaction timeout").Feeds("ProducerConfig.TransactionTimeout")
	f.String(&schedules, "schedules", "KJOB_SCHEDULES", "schedules.yaml", "schedules file (YAML), imported into the schedules topic by the leader (see docs/schedules.md); empty: none, publish the schedules topic's jobs only")
	signing.RegisterProducer(f)
	f.String(&leaseBackend, "lease-backend", "KJOB_LEASE_BACKEND", "redis", "where the leader lease lives: redis, or kubernetes (a coordination.k8s.io Lease, in-cluster credentials)")
	f.String(&leaseNS, "lease-namespace", "KJOB_LEASE_NAMESPACE", "", "Kubernetes namespace of the Lease (default the pod's own, from its service account)")
	f.String(&leaseName, "lease-name", "KJOB_LEASE_NAME", "", "name of the Kubernetes Lease (default kjob-producer-<namespace>)")
	f.Duration(&c.LeaseTTL, "lease-ttl", "KJOB_LEASE_TTL", lease.DefaultTTL, "leader lease TTL: a crashed leader is replaced within about this long").Feeds("ProducerConfig.LeaseTTL")
	f.Duration(&c.LeaseRenew, "lease-renew", "KJOB_LEASE_RENEW", lease.DefaultRenewInterval, "how often the leader renews its lease (must be < lease-ttl/2)").
		Feeds("ProducerConfig.LeaseRenew").
		// ProducerConfig reads 0 as its default; on the command line it is refused.
		Require(func() string {
			if c.LeaseRenew <= 0 {
				return fmt.Sprintf("not positive: set a duration below --lease-ttl/2 (%v)", c.LeaseTTL/2)
			}
			return ""
		})
	f.Duration(&c.MisfireGrace, "misfire-grace", "KJOB_MISFIRE_GRACE", producer.DefaultMisfireGrace,
		"a window due at most this long before a new leader took over is published whatever the job's catchup (keep it above --lease-ttl + --lease-renew, the crash failover time; 0 turns it off)").
		Feeds("ProducerConfig.MisfireGrace").
		// ProducerConfig reads negative as "off" and 0 as its default; on
		// the command line 0 is "off", and a negative value is refused.
		Require(func() string {
			if c.MisfireGrace < 0 {
				return "is negative: use a duration such as 10s, or 0 to turn the grace off"
			}
			return ""
		})
	f.Duration(&c.PublishLead, "publish-lead", "KJOB_PUBLISH_LEAD", producer.DefaultPublishLead,
		"publish each window this long before its start, so that workers hold it claimed and start it on time (a schedule change takes effect this long after it is committed; 0 publishes at the start)").
		Feeds("ProducerConfig.PublishLead").
		// ProducerConfig reads negative as "at the start" and 0 as its
		// default; on the command line 0 is "at the start", and a negative
		// value is refused. The upper bound is ProducerConfig's.
		Require(func() string {
			if c.PublishLead < 0 {
				return "is negative: use a duration such as 500ms, or 0 to publish at each window's start"
			}
			return ""
		})
	if err := f.Parse(args); err != nil {
		return err
	}
	s, err := p.Start(f, os.Stderr)
	if err != nil {
		return err
	}
	defer s.Redis.Close()
	if schedules != "" {
		// An invalid schedules file stops the process here, naming file and line.
		file, err := schedule.Load(schedules)
		if err != nil {
			return err
		}
		// Parsing a large file (100k jobs) builds a YAML tree several times
		// the size of the jobs it yields; hand that memory back to the OS now
		// rather than carrying it for the life of the process.
		debug.FreeOSMemory()
		s.Log.Info("schedules loaded", "schedules", schedules, "jobs", len(file.Jobs))
		c.Jobs = file.Jobs
	}
	if c.Signer, err = signing.ProducerSigner(); err != nil {
		return err
	}
	c.Brokers, c.KafkaOpts, c.Redis, c.Logger = s.Brokers, s.KafkaOpts, s.Redis, s.Log
	c.Topic, c.Namespace, c.ID, c.ReplicationFactor, c.Partitions, c.HTTPAddr = p.Topic, p.Namespace, p.ID, int16(p.ReplicationFactor), int32(partitions), p.HTTPAddr
	c.SkipKafkaAccessCheck, c.SkipRedisAccessCheck, c.NoJobLabel, c.MaxJobLabels = !p.CheckKafkaACLs, !p.CheckRedisACLs, !p.JobLabel, p.MaxJobs
	if c.MisfireGrace == 0 {
		c.MisfireGrace = -1 // --misfire-grace 0 turns the grace off; ProducerConfig's zero is the default
	}
	if c.PublishLead == 0 {
		c.PublishLead = -1 // --publish-lead 0 publishes at the start; ProducerConfig's zero is the default
	}
	if c.Elector, err = newElector(f, leaseBackend, leaseNS, leaseName, c); err != nil {
		return err
	}
	// Tracing is the library's opt-in; the binary opts in from OTEL_*.
	tp, flushTraces, err := cli.Tracing(ctx, s.Log, "kjob-producer")
	if err != nil {
		return err
	}
	defer flushTraces()
	c.TracerProvider = tp
	pr, err := kjob.NewProducer(c)
	if err != nil {
		return f.ConfigError(err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return f.ConfigError(pr.Run(ctx))
}
