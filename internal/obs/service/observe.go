package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob/internal/obs/metrics"
	"github.com/kjob/kjob/internal/obs/tracing"
)

// Observability is what a kjob process exports about itself: a Prometheus
// registry with the Go, process and Redis pool collectors, kjob's metrics
// on it, and OpenTelemetry tracing (off unless the process gives a
// TracerProvider, see internal/obs/tracing).
type Observability struct {
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics
	Tracing  *tracing.Tracing
}

// Observe sets up the metrics and tracing of a worker or producer. tp
// traces its Kafka clients and handler attempts; nil turns tracing off.
// The process does not own tp: whoever built it flushes and shuts it down.
// jobLabel false drops the per-job label (metrics.WithoutJobLabel);
// maxJobs bounds its values (metrics.WithMaxJobLabels).
func Observe(rdb redis.UniversalClient, tp trace.TracerProvider, jobLabel bool, maxJobs int) *Observability {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), metrics.RedisPool(rdb))
	mopts := []metrics.Option{metrics.WithMaxJobLabels(maxJobs)}
	if !jobLabel {
		mopts = append(mopts, metrics.WithoutJobLabel())
	}
	return &Observability{Registry: reg, Metrics: metrics.New(reg, mopts...), Tracing: tracing.New(tp)}
}

// KafkaOpts are the franz-go options that export a client's metrics
// (plugin/kprom, as kjob_kafka_*) and trace its records (plugin/kotel).
// clientLabel adds a client_id label, for a process with several clients.
func (o *Observability) KafkaOpts(clientLabel bool) []kgo.Opt {
	popts := []kprom.Opt{kprom.Subsystem("kafka"), kprom.Registerer(o.Registry)}
	if clientLabel {
		popts = append(popts, kprom.WithClientLabel())
	}
	return append([]kgo.Opt{kgo.WithHooks(&syncedMetrics{m: kprom.NewMetrics("kjob", popts...)})}, o.Tracing.ClientOpts()...)
}
