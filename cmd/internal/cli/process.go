package cli

import (
	"fmt"
	"io"
	"log/slog"
	"math"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/obs/metrics"
	"github.com/kjob/kjob/internal/obs/service"
	"github.com/kjob/kjob/internal/store/topic"
)

// Process holds the flags every kjob daemon has: where Kafka and Redis
// are, who this process is, what it serves and how it logs. The binaries
// register it, parse, then call Start.
type Process struct {
	Brokers, Topic, Namespace, ID, HTTPAddr, LogFormat, LogLevel string
	Redis                                                        RedisOptions
	Kafka                                                        KafkaSecurity
	CheckKafkaACLs, CheckRedisACLs, JobLabel                     bool
	MaxJobs, ReplicationFactor                                   int
}

// Register adds the shared flags; role is "worker" or "producer", for
// their help. help, if set, replaces the shared help of the flags it
// names with the role's own words (the producer's --id is its lease
// holder's name); it naming a flag Register does not add is a programming
// error, and panics. Each flag that fills a field of kjob.WorkerConfig or
// kjob.ProducerConfig (by role) is recorded as feeding it (Flag.Feeds).
func (p *Process) Register(f *Flags, role string, help map[string]string) {
	used := 0
	h := func(name, text string) string {
		if s, ok := help[name]; ok {
			used++
			return s
		}
		return text
	}
	// cfg is the config whose fields the shared flags fill.
	cfg := "WorkerConfig."
	if role == "producer" {
		cfg = "ProducerConfig."
	}
	f.String(&p.Brokers, "brokers", "KJOB_BROKERS", "127.0.0.1:9092", h("brokers", "comma-separated Kafka seed brokers")).Feeds(cfg + "Brokers")
	f.String(&p.Topic, "topic", "KJOB_TOPIC", "", h("topic", "topic the producer publishes windows to (default kjob.<namespace>.windows; "+names.DefaultTopic+" for the namespace "+names.DefaultNamespace+")")).Feeds(cfg + "Topic")
	f.IntRange(&p.ReplicationFactor, "replication-factor", "KJOB_REPLICATION_FACTOR", int(topic.DefaultReplicationFactor), 1, math.MaxInt16, h("replication-factor", "replication factor of the topics "+role+" creates (1 to 32767)")).Feeds(cfg + "ReplicationFactor")
	f.String(&p.Namespace, "namespace", "KJOB_NAMESPACE", names.DefaultNamespace, h("namespace", "deployment name, one per kjob deployment: prefixes Redis keys, derives the default topics and consumer group, and labels every window")).Feeds(cfg + "Namespace")
	f.String(&p.ID, "id", "KJOB_ID", kjob.DefaultID(), h("id", "this "+role+"'s id")).Feeds(cfg + "ID")
	p.Kafka.Register(f)
	f.Bool(&p.CheckKafkaACLs, "kafka-check-acls", "KJOB_KAFKA_CHECK_ACLS", true, h("kafka-check-acls", "before starting, check that the Kafka principal holds the "+role+"'s ACLs (deploy/SECURITY.md)")).Feeds(cfg + "SkipKafkaAccessCheck")
	p.Redis.Register(f)
	f.Bool(&p.CheckRedisACLs, "redis-check-acls", "KJOB_REDIS_CHECK_ACLS", true, h("redis-check-acls", "before starting, run each Redis script and command the "+role+" uses once, on throwaway keys, and stop if the Redis user lacks a permission (deploy/SECURITY.md)")).Feeds(cfg + "SkipRedisAccessCheck")
	f.String(&p.HTTPAddr, "http-addr", "KJOB_HTTP_ADDR", ":8080", h("http-addr", "listen address for /healthz, /readyz and /metrics; empty turns it off")).Feeds(cfg + "HTTPAddr")
	f.Bool(&p.JobLabel, "metrics-job-label", "KJOB_METRICS_JOB_LABEL", true, h("metrics-job-label", "label per-job metrics with the job's name (kjob_job); turn off with many thousands of jobs to keep the number of series bounded"))
	f.IntRange(&p.MaxJobs, "metrics-max-jobs", "KJOB_METRICS_MAX_JOBS", metrics.DefaultMaxJobLabels, 1, math.MaxInt32, h("metrics-max-jobs",
		`at most this many distinct kjob_job label values; windows of further jobs (e.g. names a writer to the windows topic made up) are counted under kjob_job="other" and in kjob_metrics_job_labels_folded_total`)).Feeds(cfg + "MaxJobLabels")
	f.String(&p.LogFormat, "log-format", "KJOB_LOG_FORMAT", "text", h("log-format", "log format: text or json"))
	f.String(&p.LogLevel, "log-level", "KJOB_LOG_LEVEL", "info", h("log-level", "log level: debug, info, warn or error"))
	if used != len(help) {
		panic(fmt.Sprintf("cli: Process.Register: help names flags it does not add: %v", help))
	}
}

// Started is what Start makes of the shared flags.
type Started struct {
	Log       *slog.Logger
	Brokers   []string
	Redis     redis.UniversalClient
	KafkaOpts []kgo.Opt
}

// Start builds the logger (which names the config fields flags feed by
// those flags, Flags.NameFields; go-redis's own lines go through it too),
// the broker list, the Kafka security options and the Redis client, in
// that order, returning the first error, naming its flag.
func (p *Process) Start(f *Flags, stderr io.Writer) (*Started, error) {
	log, err := Logger(stderr, p.LogFormat, p.LogLevel)
	if err != nil {
		return nil, err
	}
	// The library's messages name config fields; the process's user
	// knows them by their flags.
	log = slog.New(f.nameFieldsIn(log.Handler()))
	// go-redis's own lines ("failed to dial") in the process's format,
	// rate-limited.
	redis.SetLogger(service.RedisLogger(log, service.RedisLogEvery))
	brokers, err := Brokers(p.Brokers)
	if err != nil {
		return nil, f.Errorf("brokers", "%v", err)
	}
	kopts, err := p.Kafka.ClientOpts()
	if err != nil {
		return nil, err
	}
	rdb, err := p.Redis.Client()
	if err != nil {
		return nil, err
	}
	return &Started{Log: log, Brokers: brokers, Redis: rdb, KafkaOpts: kopts}, nil
}
