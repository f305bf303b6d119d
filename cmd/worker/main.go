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
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/pkg/access"
	"github.com/kjob/kjob/pkg/control"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/worker"
)

const usage = `worker: run kjob job windows from Kafka, exactly once per window.

Usage: worker [flags]`

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

type config struct {
	brokers, topic, group, dlq, namespace, id, httpAddr, logFormat, logLevel string
	redis                                                                    cli.RedisOptions
	claimTTL, retention, grace, sessionTimeout, heartbeat, extend            time.Duration
	rf                                                                       int
	kafkaSec                                                                 cli.KafkaSecurity
	signing                                                                  cli.SigningOptions
	checkACLs                                                                bool
}

func run(ctx context.Context, args []string) error {
	var c config
	var controlTopic string
	f := cli.NewFlags("worker", usage)
	f.String(&c.brokers, "brokers", "KJOB_BROKERS", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	f.String(&c.topic, "topic", "KJOB_TOPIC", "kjob.windows", "topic the producer publishes windows to")
	f.String(&c.group, "group", "KJOB_GROUP", "kjob-workers", "consumer group of the workers")
	f.String(&c.dlq, "dlq-topic", "KJOB_DLQ_TOPIC", "", "dead-letter topic (default <topic>.dlq)")
	f.String(&controlTopic, "control-topic", "KJOB_CONTROL_TOPIC", "", "control topic of operators' replays (kjobctl replay; default <topic>.control)")
	f.Int(&c.rf, "replication-factor", "KJOB_REPLICATION_FACTOR", 1, "replication factor of the dead-letter topic when created")
	f.String(&c.namespace, "namespace", "KJOB_NAMESPACE", "kjob", "deployment name: prefixes Redis keys; one per kjob deployment")
	f.String(&c.id, "id", "KJOB_ID", cli.DefaultID(), "this worker's id (claim owner, group member)")
	c.kafkaSec.Register(f)
	f.Bool(&c.checkACLs, "kafka-check-acls", "KJOB_KAFKA_CHECK_ACLS", true, "before starting, check that the Kafka principal holds the worker's ACLs (deploy/SECURITY.md)")
	c.signing.RegisterWorker(f)
	c.redis.Register(f)
	f.Duration(&c.claimTTL, "claim-ttl", "KJOB_CLAIM_TTL", 15*time.Second, "how long a claim outlives a worker that stopped extending it (a crashed worker's window re-runs after this)")
	f.Duration(&c.extend, "claim-extend", "KJOB_CLAIM_EXTEND", 0, "how often a running handler's claim is extended (default claim-ttl/3)")
	f.Duration(&c.retention, "retention", "KJOB_RETENTION", 7*24*time.Hour, "how long done markers are kept: the replay horizon")
	f.Duration(&c.grace, "grace", "KJOB_GRACE", 10*time.Second, "on shutdown or revoke, how long an in-flight handler may finish; also how long a handler that ignores cancellation is waited for")
	f.Duration(&c.sessionTimeout, "session-timeout", "KJOB_SESSION_TIMEOUT", 6*time.Second, "consumer group session timeout (real Kafka brokers refuse less than 6s by default)")
	f.Duration(&c.heartbeat, "heartbeat", "KJOB_HEARTBEAT", time.Second, "consumer group heartbeat interval")
	f.String(&c.httpAddr, "http-addr", "KJOB_HTTP_ADDR", ":8080", "listen address for /healthz, /readyz and /metrics; empty turns it off")
	f.String(&c.logFormat, "log-format", "KJOB_LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.logLevel, "log-level", "KJOB_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		return err
	}
	log, err := cli.Logger(os.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	// worker.New and control.NewAgent add the worker key themselves: they
	// get base, the rest of main logs with it.
	base := log
	log = log.With("worker", c.id)
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
		return err
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
	registerBuiltins(mux, log, &http.Client{})

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if c.checkACLs {
		dlq := c.dlq
		if dlq == "" {
			dlq = c.topic + ".dlq"
		}
		ctrl := controlTopic
		if ctrl == "" {
			ctrl = control.DefaultTopic(c.topic)
		}
		if err := cli.CheckKafkaAccess(ctx, log, strings.Split(c.brokers, ","), kafkaOpts, access.Worker(c.topic, dlq, ctrl, c.group)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	w, err := worker.New(worker.Config{
		Brokers:             strings.Split(c.brokers, ","),
		ClientOpts:          kafkaOpts,
		Verify:              verify,
		Topic:               c.topic,
		Group:               c.group,
		DeadLetterTopic:     c.dlq,
		ReplicationFactor:   int16(c.rf),
		Store:               store,
		Handler:             mux,
		WorkerID:            c.id,
		Grace:               c.grace,
		ClaimExtendInterval: c.extend,
		SessionTimeout:      c.sessionTimeout,
		HeartbeatInterval:   c.heartbeat,
		Logger:              base,
	})
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ready := func() error {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := rdb.Ping(pctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if !w.Joined() {
			return fmt.Errorf("kafka: not (yet) a member of consumer group %q", c.group)
		}
		return nil
	}

	log.Info("worker starting", "brokers", c.brokers, "topic", c.topic, "group", c.group, "handlers", mux.Names())
	var wg sync.WaitGroup
	var httpErr error
	hctx, hcancel := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := cli.Serve(hctx, log, c.httpAddr, reg, ready); err != nil {
			httpErr = err
			stop()
		}
	}()
	// The control agent applies operators' replays (kjobctl replay) to the
	// partitions this worker owns.
	agent, err := control.NewAgent(control.AgentConfig{Brokers: strings.Split(c.brokers, ","), ClientOpts: kafkaOpts, Group: c.group, Topic: c.topic, ControlTopic: controlTopic,
		ReplicationFactor: int16(c.rf), Member: c.id, Seeker: w, Logger: base})
	if err != nil {
		hcancel()
		wg.Wait()
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := agent.Run(hctx); err != nil {
			log.Error("control agent stopped; kjobctl replay cannot reach this worker", "err", err)
		}
	}()
	err = w.Run(ctx)
	hcancel()
	wg.Wait()
	log.Info("worker stopped")
	if httpErr != nil {
		return httpErr
	}
	return err
}
