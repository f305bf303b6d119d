// Package service holds what every kjob process serves about itself: the
// /healthz, /readyz and /metrics endpoints (Server, Health), its
// Prometheus registry and tracing (Observe), and go-redis's own log lines
// routed through slog (RedisLogger). The kjob package assembles them for
// the worker and the producer; nothing else should need them.
package service
