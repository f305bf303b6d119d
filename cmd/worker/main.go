// Command worker runs kjob job windows: it joins the workers' consumer group,
// and for each partition it owns, runs the partition's windows with Redis
// idempotency keys so a window that is done never runs again.
//
// It is kjob.NewWorker with flags: a worker main of your own, with your
// handlers registered on it, runs the same process (see the README).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
)

const usage = `worker: run kjob job windows from Kafka, exactly once per window.

Usage: worker [flags]`

func main() {
	os.Exit(cli.Exit(os.Stderr, "worker", run(context.Background(), os.Args[1:])))
}

func run(ctx context.Context, args []string) error {
	var p cli.Process
	var c kjob.WorkerConfig
	var signing cli.SigningOptions
	var allow string
	f := cli.NewFlags("worker", usage)
	p.Register(f, "worker", nil)
	f.String(&c.Group, "group", "KJOB_GROUP", "", "consumer group of the workers (default kjob-workers-<namespace>; "+names.DefaultGroup+" for the namespace "+names.DefaultNamespace+")").Feeds("WorkerConfig.Group")
	f.String(&c.DeadLetterTopic, "dlq-topic", "KJOB_DLQ_TOPIC", "", "dead-letter topic (default <topic>.dlq)").Feeds("WorkerConfig.DeadLetterTopic")
	f.String(&c.ControlTopic, "control-topic", "KJOB_CONTROL_TOPIC", "", "control topic of operators' replays (kjobctl replay; default <topic>.control)").Feeds("WorkerConfig.ControlTopic")
	signing.RegisterWorker(f)
	f.Duration(&c.ClaimTTL, "claim-ttl", "KJOB_CLAIM_TTL", dedupe.DefaultClaimTTL, "how long a claim outlives a worker that stopped extending it: a crashed worker's window re-runs after at most this long. "+
		"Trade-off: a running handler whose claim cannot be extended (Redis unreachable) is cancelled before the claim can expire, after claim-ttl - max(claim-extend, claim-ttl/5) without a successful extend (4s by default), and re-runs once Redis is back; raise it if Redis outages (e.g. a Sentinel failover) last longer than that").Feeds("WorkerConfig.ClaimTTL")
	f.Duration(&c.ClaimExtendInterval, "claim-extend", "KJOB_CLAIM_EXTEND", 0, "how often a running handler's claim is extended; must be less than claim-ttl/2 (default claim-ttl/3)").Feeds("WorkerConfig.ClaimExtendInterval")
	f.Duration(&c.Retention, "retention", "KJOB_RETENTION", dedupe.DefaultRetention, "how long done markers are kept: the replay horizon").Feeds("WorkerConfig.Retention")
	f.Duration(&c.Grace, "grace", "KJOB_GRACE", partition.DefaultGrace, "on shutdown or revoke, how long in-flight handlers may finish; also how long a handler that ignores cancellation is waited for").
		Feeds("WorkerConfig.Grace").
		// WorkerConfig reads 0 as its default; on the command line 0 reads
		// as "no grace", so it is refused rather than silently made 10s.
		Require(func() string {
			if c.Grace <= 0 {
				return fmt.Sprintf("must be positive: in-flight handlers get this long to finish on shutdown or revoke before they are abandoned and their windows run again elsewhere; set a duration such as %v (the default)", partition.DefaultGrace)
			}
			return ""
		})
	f.Duration(&c.StallAfter, "stall-after", "KJOB_STALL_AFTER", worker.DefaultStallAfter, "how long settling a partition's oldest record may keep failing (its dead letter refused, Redis not answering) before the partition is reported stalled: /readyz 503, kjob_partition_stalled_seconds, kjobctl status").Feeds("WorkerConfig.StallAfter")
	f.IntRange(&c.Concurrency, "concurrency", "KJOB_CONCURRENCY", worker.DefaultConcurrency, 1, 1_000_000, "how many windows run at once across the partitions this worker owns; windows of one job follow its overlap policy (1 runs one window at a time)").Feeds("WorkerConfig.Concurrency")
	f.IntRange(&c.MaxUncommitted, "max-uncommitted", "KJOB_MAX_UNCOMMITTED", partition.DefaultMaxUncommitted, 1, 10_000_000, "per partition, how many records may be fetched and not yet committed (from the first unsettled one on) before fetching pauses: bounds memory and what a crash re-delivers").Feeds("WorkerConfig.MaxUncommitted")
	f.Duration(&c.SessionTimeout, "session-timeout", "KJOB_SESSION_TIMEOUT", partition.DefaultSessionTimeout, "consumer group session timeout (real Kafka brokers refuse less than 6s by default)").Feeds("WorkerConfig.SessionTimeout")
	f.Duration(&c.HeartbeatInterval, "heartbeat", "KJOB_HEARTBEAT", partition.DefaultHeartbeatInterval, "consumer group heartbeat interval").Feeds("WorkerConfig.HeartbeatInterval")
	f.String(&allow, "http-allow-hosts", "KJOB_HTTP_ALLOW_HOSTS", "",
		"comma-separated hosts the built-in http handler may POST to: names (hooks.example.com), *.example.com, IP addresses or CIDR blocks (10.0.0.0/8); empty allows any host, with a warning at start-up (deploy/SECURITY.md)").Feeds("WorkerConfig.HTTPAllowHosts")
	if err := f.Parse(args); err != nil {
		return err
	}
	s, err := p.Start(f, os.Stderr)
	if err != nil {
		return err
	}
	defer s.Redis.Close()
	if allow != "" {
		c.HTTPAllowHosts = strings.Split(allow, ",")
	}
	if c.Verifier, err = signing.WorkerVerifier(); err != nil {
		return err
	}
	c.Brokers, c.KafkaOpts, c.Redis, c.Logger = s.Brokers, s.KafkaOpts, s.Redis, s.Log
	c.Topic, c.Namespace, c.ID, c.ReplicationFactor, c.HTTPAddr = p.Topic, p.Namespace, p.ID, int16(p.ReplicationFactor), p.HTTPAddr
	c.SkipKafkaAccessCheck, c.SkipRedisAccessCheck, c.NoJobLabel, c.MaxJobLabels = !p.CheckKafkaACLs, !p.CheckRedisACLs, !p.JobLabel, p.MaxJobs
	// Tracing is the library's opt-in; the binary opts in from OTEL_*.
	tp, flushTraces, err := cli.Tracing(ctx, s.Log, "kjob-worker")
	if err != nil {
		return err
	}
	defer flushTraces()
	c.TracerProvider = tp
	w, err := kjob.NewWorker(c)
	if err != nil {
		return f.ConfigError(err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return f.ConfigError(w.Run(ctx))
}
