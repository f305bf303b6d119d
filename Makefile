# kjob: the two commands that matter are `make demo` and `make test`.
GO        ?= go
BIN       := bin
# The slowest packages first, so that go test starts them first and the
# end of a run is not one long package on one core (the rest is ./...).
PKGS      := ./test/ ./internal/exec/producer/ ./cmd/kjobdev/ ./internal/exec/worker/ ./cmd/kjobctl/ ./...
FALLBACK_PKGS ?= ./...
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build build-lean demo test-external test test-fallback vet fuzz bench bench-peers bench-failover soak clean test-containers

all: build

## build: build producer, worker, kjobctl and kjobdev into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## build-lean: a producer without the Kubernetes Lease backend (no client-go:
## a smaller binary and about 16 MiB less resident memory)
build-lean:
	$(GO) build -tags nokubernetes -o $(BIN)/producer ./cmd/producer

## demo: run broker, Redis, 2 producers and 3 workers locally (Ctrl-C stops)
demo: build
	./$(BIN)/kjobdev demo $(DEMO_FLAGS)

## test: vet, then every test with the race detector against the embedded
## broker and a real redis-server (falls back to miniredis, labelled, when
## redis-server is not installed; CI forbids the fallback)
test: vet
	$(GO) test $(TEST_FLAGS) $(PKGS)

## test-fallback: the tests (FALLBACK_PKGS, all by default) with the
## in-process miniredis, as on a machine without redis-server (it hides
## redis-* from PATH: .ci/without-redis). CI runs it on the user-facing
## packages.
test-fallback:
	bash .ci/without-redis $(GO) test $(TEST_FLAGS) $(FALLBACK_PKGS)

## test-external: the tests against an external Kafka and Redis, one package
## at a time. Both must be dedicated to the tests: every test deletes all
## topics and groups and flushes the Redis db first. KJOB_TEST_BROKERS and
## KJOB_TEST_REDIS_URL select them; the broker must accept session timeouts
## down to 10ms (group.min.session.timeout.ms=10).
test-external:
	@test -n "$$KJOB_TEST_BROKERS" || { echo "set KJOB_TEST_BROKERS (and KJOB_TEST_REDIS_URL)"; exit 2; }
	$(GO) test -p 1 $(TEST_FLAGS) $(PKGS)

## vet: also compiles and vets the Docker suite (test/containers, build tag
## containers), which make test does not run: it needs no Docker to compile
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags containers ./test/containers/
	$(GO) vet -tags nokubernetes ./cmd/producer

## test-containers: build the image from the Dockerfile and run the
## end-to-end scenario with producer and worker containers from it on real
## Apache Kafka and Redis containers (testcontainers-go). Needs a local
## Docker engine; not part of `test`.
test-containers:
	$(GO) test -tags containers $(TEST_FLAGS) ./test/containers/

## fuzz: run each fuzz target briefly
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzUnmarshal -fuzztime=30s ./internal/store/jobmsg
	$(GO) test -run='^$$' -fuzz=FuzzFastMatchesReference -fuzztime=30s ./internal/store/jobmsg
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./schedule
	$(GO) test -run='^$$' -fuzz=FuzzChunkedParse -fuzztime=30s ./schedule

## bench: hot-path benchmarks, then the workloads of docs/performance.md
## (no-op and I/O bursts, head-of-line, 10,000 windows in flight, lateness,
## 100k schedules, idle cost; schedule change, apply of 100k jobs and
## takeover with 100k specs) printed as one table. BENCH_DURATION sets
## the measured time of the timed workloads (60s), the head-of-line
## workload's slow handler included.
BENCH_DURATION ?= 60s
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/... ./schedule/...
	rm -f bin/bench-table.tsv
	mkdir -p bin
	KJOB_BENCH_TABLE=$(CURDIR)/bin/bench-table.tsv KJOB_BENCH_DURATION=$(BENCH_DURATION) \
		$(GO) test -run='^$$' -bench=. -benchtime=1x -timeout 60m ./test/perf/
	@echo
	@printf 'figure\tvalue\tunit\tsettings\n' | cat - bin/bench-table.tsv | \
		awk -F'\t' '{ printf "%-62s %10s  %-14s %s\n", $$1, $$2, $$3, $$4 }'

## bench-peers: kjob, asynq, River and gocron (with a Redis lock, 2
## replicas) on the same workloads in one run: the no-op burst (20,000
## windows), the I/O burst, head-of-line and the herd (1,000 jobs due at
## once every 10s, PEERS_HERD_TICKS ticks), kjob's rows from test/perf and
## the peers' from bench/peers (a Go module of its own), printed as one
## table and as ratios to kjob for docs/performance.md; BENCH_DURATION is
## the head-of-line workload's slow handler, as in bench. Needs
## redis-server on PATH and a PostgreSQL server with trust authentication
## (KJOB_PEERS_DATABASE_URL, default
## postgres://postgres@127.0.0.1:5432/postgres; each run creates and drops
## its own database). Not part of make test or CI, which never build it.
PEERS_HERD_TICKS ?= 10
bench-peers:
	rm -f bin/bench-peers.tsv
	mkdir -p bin
	KJOB_BENCH_TABLE=$(CURDIR)/bin/bench-peers.tsv KJOB_BENCH_DURATION=$(BENCH_DURATION) KJOB_BENCH_BURST=20000 KJOB_PEERS_HERD_TICKS=$(PEERS_HERD_TICKS) \
		$(GO) test -run='^$$' -bench='BenchmarkBurst/partitions=1/log=info$$|BenchmarkIOBurst/partitions=1$$|BenchmarkHeadOfLine$$|BenchmarkHerd/jobs=1000$$' -benchtime=1x -timeout 30m ./test/perf/
	cd bench/peers && KJOB_PEERS_HERD_TICKS=$(PEERS_HERD_TICKS) KJOB_BENCH_TABLE=$(CURDIR)/bin/bench-peers.tsv KJOB_BENCH_DURATION=$(BENCH_DURATION) \
		$(GO) test -run='^$$' -bench=. -benchtime=1x -timeout 60m .
	@echo
	@printf 'figure\tvalue\tunit\tsettings\n' | cat - bin/bench-peers.tsv | \
		awk -F'\t' '{ printf "%-75s %10s  %-8s %s\n", $$1, $$2, $$3, $$4 }'
	@echo
	$(GO) run ./cmd/internal/peerratio bin/bench-peers.tsv

## bench-failover: time from each fault (producer and worker: graceful stop,
## SIGKILL, SIGSTOP zombie; broker and redis restart) to the next executed
## window, p50/p99/max over 10 repetitions (KJOB_FAILOVER_REPS; KJOB_FAILOVER_FAULTS, a
## regular expression, picks the rows; KJOB_TEST_ARTIFACTS keeps the processes' logs), printed as a
## table with the settings, each row's target and whether it is met, and the
## windows missed (must be 0)
bench-failover:
	$(GO) test -count=1 -run='^$$' -bench=BenchmarkFailover -benchtime=1x -timeout 60m ./test/

## soak: the chaos test with faults for DURATION (default 30m); replay a run
## with KJOB_CHAOS_SEED=<seed it printed>
DURATION ?= 30m
soak:
	KJOB_CHAOS_DURATION=$(DURATION) $(GO) test -count=1 -v -run='^TestChaos$$' -timeout 24h ./test/

clean:
	rm -rf $(BIN)
