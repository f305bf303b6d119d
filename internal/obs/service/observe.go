package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/kjob/kjob/internal/obs/metrics"
	"github.com/kjob/kjob/internal/obs/tracing"
)

// Observability is what a kjob binary exports about itself: a Prometheus
// registry with the Go, process and Redis pool collectors, kjob's metrics
// on it, and OpenTelemetry tracing (off unless the OTEL_* environment asks
// for it, see internal/obs/tracing).
type Observability struct {
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics
	Tracing  *tracing.Tracing

	log *slog.Logger
}

// Observe sets up the metrics and tracing of the binary named service
// ("kjob-producer", "kjob-worker"). jobLabel false drops the per-job label
// (metrics.WithoutJobLabel); maxJobs bounds its values
// (metrics.WithMaxJobLabels). Call Close before the process exits to flush
// the traces still buffered.
func Observe(ctx context.Context, log *slog.Logger, service string, rdb redis.UniversalClient, jobLabel bool, maxJobs int) (*Observability, error) {
	tr, err := tracing.FromEnv(ctx, service)
	if err != nil {
		return nil, err
	}
	if tr.Enabled() {
		log.Info("tracing enabled: spans are exported over OTLP/HTTP")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), metrics.RedisPool(rdb))
	mopts := []metrics.Option{metrics.WithMaxJobLabels(maxJobs)}
	if !jobLabel {
		mopts = append(mopts, metrics.WithoutJobLabel())
	}
	return &Observability{Registry: reg, Metrics: metrics.New(reg, mopts...), Tracing: tr, log: log}, nil
}

// KafkaOpts are the franz-go options that export a client's metrics
// (plugin/kprom, as kjob_kafka_*) and trace its records (plugin/kotel).
// clientLabel adds a client_id label, for a process with several clients.
func (o *Observability) KafkaOpts(clientLabel bool) []kgo.Opt {
	popts := []kprom.Opt{kprom.Subsystem("kafka"), kprom.Registerer(o.Registry)}
	if clientLabel {
		popts = append(popts, kprom.WithClientLabel())
	}
	return append([]kgo.Opt{kgo.WithHooks(kprom.NewMetrics("kjob", popts...))}, o.Tracing.ClientOpts()...)
}

// Close flushes the buffered trace spans, waiting 5 s at most; a failure
// is logged, as there is nothing else to do with it at exit.
func (o *Observability) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.Tracing.Shutdown(ctx); err != nil {
		o.log.Warn("flushing traces failed", "err", err)
	}
}
