// Package kjob runs scheduled jobs exactly once per window across
// redundant replicas, with Kafka as the dispatch log and Redis idempotency
// keys.
//
// A Worker is a whole worker process, the same one cmd/worker runs: its
// consumer runs the windows of the partitions it owns with your handlers
// and the built-in ones, its control agent applies operators' replays, and
// it exports lag, time lag and stalls on /metrics beside /healthz and
// /readyz. A Producer is a whole producer process, the same one
// cmd/producer runs: the replica holding the lease publishes each job's
// windows in Kafka transactions. Both take a Config whose zero fields are
// the binaries' defaults, and run until their context ends:
//
//	w, err := kjob.NewWorker(kjob.WorkerConfig{
//		Brokers: []string{"127.0.0.1:9092"},
//		Redis:   redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}),
//	})
//	...
//	w.HandleFunc("report", func(ctx context.Context, j *kjob.Job) error { ... })
//	err = w.Run(ctx)
//
// # Handlers
//
// The handler API mirrors net/http: a Handler runs one attempt at a
// window, HandlerFunc adapts a function, a Mux (the Worker holds one)
// routes windows by the handler name in the schedules file, and
// Middleware wraps handlers (Logging, Timeout, Recover). A handler gets a
// read-only *Job: the window's id and time range (Window), why it was
// published (Trigger), the payload, the attempt and the claim's fencing
// token. Returning nil completes the window; an error fails the attempt,
// which is retried with backoff, then dead-lettered; an error wrapping
// ErrPermanent dead-letters at once. Typed decodes the payload into a
// struct first, naming the field of a payload that does not fit.
//
// A handler can run twice for one window only when an attempt did not
// complete (its worker died or was cut off, it failed, or it timed out):
// the next attempt carries a higher FencingToken, which a downstream
// store can use to refuse the older attempt's writes.
//
// Package kjobtest tests handlers: kjobtest.NewJob builds a Job for a
// unit test, kjobtest.StartPipeline runs a worker against an embedded
// Kafka and a Redis. A Producer elects its publishing replica with a lease
// in Redis, or any Elector (kubelease for a Kubernetes Lease).
//
// # Tracing
//
// Tracing is opt-in: a Worker or Producer traces with OpenTelemetry only
// when its config's TracerProvider is set, and then follows each window
// from the producer's publish to the handler's attempt. Package kjobotel
// builds a provider from the OTEL_* environment, as the binaries do:
//
//	tp, shutdown, err := kjobotel.FromEnv(ctx, "my-worker")
//	...
//	defer shutdown(context.Background())
//	w, err := kjob.NewWorker(kjob.WorkerConfig{..., TracerProvider: tp})
//
// Before, NewWorker and NewProducer read the OTEL_* environment
// themselves; a main of your own now traces only when it sets
// TracerProvider. So this package links the OpenTelemetry API, never its
// SDK, the OTLP exporter or gRPC (see docs/observability.md).
package kjob

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/obs/service"
	"github.com/kjob/kjob/internal/store/access"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// redisUser is the ACL user rdb connects as, for the access check's
// messages.
func redisUser(rdb redis.UniversalClient) string {
	var u string
	switch c := rdb.(type) {
	case *redis.Client:
		u = c.Options().Username
	case *redis.ClusterClient:
		u = c.Options().Username
	}
	if u == "" {
		return "default"
	}
	return u
}

// process is what a Worker and a Producer share: the logger, metrics and
// tracing, health, and the start-up every kjob process makes.
type process struct {
	role    string // "worker" or "producer", for messages
	log     *slog.Logger
	obs     *service.Observability
	health  *service.Health
	started atomic.Bool
}

// HTTPHandler serves /healthz, /readyz and /metrics, for a server of your
// own; Run serves it on the config's HTTPAddr.
func (p *process) HTTPHandler() http.Handler { return service.Handler(p.obs.Registry, p.health.Ready) }

// Registry is the Prometheus registry of the process's metrics, to add
// collectors of your own to.
func (p *process) Registry() *prometheus.Registry { return p.obs.Registry }

// checks are the Kafka requests (every broker must implement them) and the
// permissions a process verifies before it starts; a nil one is skipped.
type checks struct {
	apis  []preflight.API
	kafka []access.Permission
	redis func() (preflight.RedisRole, error)
}

// start serves
// /healthz on addr at once, since start-up may wait long for Kafka or
// Redis and a liveness probe must not kill the process meanwhile, then
// runs the permission checks, saying on /readyz what it waits for. field
// names addr in the config. stop is called if serving fails later. The
// caller stops the returned server; on an error start has stopped it.
func (p *process) start(ctx context.Context, stop func(), field, addr string, brokers []string, kafkaOpts []kgo.Opt, c checks) (*service.Server, error) {
	srv, err := service.StartServer(p.log, addr, p.HTTPHandler(), stop)
	if err != nil {
		return nil, &configerr.Error{Op: "kjob", Field: field, Value: addr, Reason: fmt.Sprintf(": %v; use another address, or empty to serve nothing", err), Err: err}
	}
	if err := p.preflight(ctx, brokers, kafkaOpts, c); err != nil {
		serr := srv.Stop()
		if ctx.Err() != nil {
			return nil, serr // stopped while waiting: not an error
		}
		return nil, err
	}
	return srv, nil
}

// once is nil the first time a process runs, and an error after.
func (p *process) once() error {
	if !p.started.CompareAndSwap(false, true) {
		return fmt.Errorf("kjob: Run called twice; a %s runs once, create a new one", p.role)
	}
	return nil
}

func (p *process) preflight(ctx context.Context, brokers []string, kafkaOpts []kgo.Opt, c checks) error {
	if c.apis != nil {
		p.health.Waiting("waiting for kafka (reading the brokers' API versions)")
		if err := preflight.CheckKafkaAPIs(ctx, p.log, brokers, kafkaOpts, c.apis); err != nil {
			return err
		}
	}
	if c.kafka != nil {
		p.health.Waiting("waiting for kafka (checking the " + p.role + "'s ACLs)")
		if err := preflight.CheckKafkaAccess(ctx, p.log, brokers, kafkaOpts, c.kafka); err != nil {
			return err
		}
	}
	if c.redis != nil {
		p.health.Waiting("waiting for redis (checking the " + p.role + "'s Redis permissions)")
		role, err := c.redis()
		if err != nil {
			return err
		}
		return preflight.CheckRedisAccess(ctx, p.log, role)
	}
	return nil
}
