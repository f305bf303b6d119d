package cli

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kjob/kjob/kjobotel"
)

// Tracing builds the tracer provider of the binary named service
// ("kjob-worker", "kjob-producer") from the OTEL_* environment
// (kjobotel.FromEnv), for WorkerConfig.TracerProvider or
// ProducerConfig.TracerProvider, and logs that tracing is on when it is.
// Off, the provider is nil. Call flush when Run has returned: it flushes
// the spans still buffered, waiting 5 s at most, and logs a failure, as
// there is nothing else to do with it at exit.
func Tracing(ctx context.Context, log *slog.Logger, service string) (provider trace.TracerProvider, flush func(), err error) {
	tp, shutdown, err := kjobotel.FromEnv(ctx, service)
	if err != nil {
		return nil, nil, err
	}
	if tp != nil {
		log.Info("tracing enabled: spans are exported over OTLP/HTTP")
	}
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("flushing traces failed", "err", err)
		}
	}, nil
}
