// Package perf holds kjob's performance workloads as Go benchmarks: a
// burst of 100,000 windows through one worker process, window lateness
// with 1 and 1,000 jobs firing every second, one producer with 100,000
// schedules, the idle cost of a producer and a worker, and the schedules
// of issue 23 (a spec change reaching the leader's publications, an apply
// of 100,000 new jobs through kjob.Schedules, a takeover with 100,000
// specs in the schedules topic). They run against the embedded broker
// (in the benchmark's process) and a real redis-server, and print figures
// instead of asserting timings:
//
//	make bench                      # everything, as one table
//	make bench BENCH_DURATION=10s   # shorter timed workloads
//	go test -run '^$' -bench Burst -benchtime 1x ./test/perf/
//
// docs/performance.md records the figures, the machine and the settings.
package perf
