# kjob: the two commands that matter are `make demo` and `make test`.
GO        ?= go
BIN       := bin
PKGS      := ./...
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build demo test vet fuzz bench clean test-containers

all: build

## build: build producer, worker and kjobctl into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## demo: run broker, Redis, 2 producers and 3 workers locally (Ctrl-C stops)
demo: build
	./$(BIN)/kjobctl demo $(DEMO_FLAGS)

## test: vet, then every test with the race detector against the embedded
## broker and a real redis-server (falls back to miniredis, labelled, when
## redis-server is not installed; CI forbids the fallback)
test: vet
	$(GO) test $(TEST_FLAGS) $(PKGS)

vet:
	$(GO) vet $(PKGS)

## test-containers: the end-to-end scenario on real Apache Kafka and Redis
## containers (testcontainers-go). Needs a Docker engine; not part of `test`.
test-containers:
	$(GO) test -tags containers $(TEST_FLAGS) ./test/containers/

## fuzz: run each fuzz target briefly
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzUnmarshal -fuzztime=30s ./pkg/jobmsg
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=30s ./pkg/schedule

## bench: hot-path benchmarks with figures
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./pkg/...

clean:
	rm -rf $(BIN)
