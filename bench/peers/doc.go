// Package peers measures kjob's peers, asynq (Redis) and River
// (PostgreSQL), on the workloads of kjob's own benchmarks (test/perf), on
// the same machine and at the same concurrency, so docs/performance.md can
// put their figures beside kjob's:
//
//   - I/O burst: 2,000 tasks already enqueued, a handler that sleeps 50 ms
//     (honouring its context), at concurrency 10, 100 and 1,000 (asynq
//     Config.Concurrency, River QueueConfig.MaxWorkers): tasks per second
//     from the server's start to the last handler's return, and to the
//     last task settled in the peer's store.
//   - No-op burst: 20,000 tasks, a handler that returns at once, at
//     concurrency 100 and 1,000, and at one more that did well on this
//     machine kind (asynq 10, River 2,000).
//   - Head-of-line: at concurrency 100, a task that sleeps for
//     KJOB_BENCH_DURATION (60s by default, as kjob's) beside a periodic
//     task every second (asynq's Scheduler "@every 1s", River's
//     PeriodicInterval(1s)): how long after it was due each periodic
//     task's handler starts while the slow one runs.
//
// It is a module of its own, so neither `make test` nor CI builds it or
// fetches its dependencies. It needs redis-server on PATH (each asynq run
// starts its own on a free loopback port) and a PostgreSQL server with
// trust authentication (KJOB_PEERS_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/postgres; each River run creates and
// drops its own database):
//
//	make bench-peers
//	cd bench/peers && go test -run '^$' -bench 'River/io' -benchtime 1x .
//	cd bench/peers && KJOB_BENCH_DURATION=10s go test -run '^$' -bench HeadOfLine -benchtime 1x .
//
// Each figure is a benchmark metric and, when KJOB_BENCH_TABLE names a
// file, a row of the same tab-separated table as test/perf's (figure,
// value, unit, settings), with the peer's version, the concurrency, the
// handler and the machine in the settings. KJOB_PEERS_IO_CONCURRENCY and
// KJOB_PEERS_NOOP_CONCURRENCY (comma-separated) change the concurrencies
// measured.
package peers
