package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/jobsource"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// Errors that select an exit code (see exitCode).
var (
	errNotFound = errors.New("not found")
	errDryRun   = errors.New("dry run: nothing was changed; add --execute to apply it")
	errConflict = errors.New("refused")
)

// nowFunc is the clock of the operations commands (tests fix it).
var nowFunc = time.Now

// opts are the connection options every operations command shares. Each
// mirrors the KJOB_* variable the producer and worker read, so an operator
// shell with the deployment's environment needs no flags.
type opts struct {
	brokers, topic, stateTopic, dlqTopic, controlTopic, group, namespace, schedules, output string
	redis                                                                                   cli.RedisOptions
	kafkaSec                                                                                cli.KafkaSecurity
	signing                                                                                 cli.SigningOptions
	timeout                                                                                 time.Duration
	// retention is the workers' dedupe retention: how long the markers of
	// published windows are kept (registerRetention).
	retention time.Duration
	// lease* locate the producer lease for status (registerLease).
	leaseBackend, leaseNS, leaseName, kubeconfig string

	rdb redis.UniversalClient
	// jobs is the job list once read (jobSet): the schedules topic's, or
	// the --schedules file's.
	jobs  *jobsource.Set
	kafka []kgo.Opt               // TLS, SASL
	sign  func(*kgo.Record) error // nil: windows kjobctl creates are not signed
}

func (o *opts) register(f *cli.Flags) {
	f.String(&o.brokers, "brokers", "KJOB_BROKERS", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	f.String(&o.topic, "topic", "KJOB_TOPIC", "", "windows topic (default kjob.<namespace>.windows; "+names.DefaultTopic+" for the namespace "+names.DefaultNamespace+")")
	f.String(&o.stateTopic, "state-topic", "KJOB_STATE_TOPIC", "", "the producer's state topic (default <topic>.state)")
	f.String(&o.dlqTopic, "dlq-topic", "KJOB_DLQ_TOPIC", "", "dead-letter topic (default <topic>.dlq)")
	f.String(&o.controlTopic, "control-topic", "KJOB_CONTROL_TOPIC", "", "control topic the workers read (default <topic>.control)")
	f.String(&o.group, "group", "KJOB_GROUP", "", "the workers' consumer group (default kjob-workers-<namespace>; "+names.DefaultGroup+" for the namespace "+names.DefaultNamespace+")")
	f.String(&o.namespace, "namespace", "KJOB_NAMESPACE", names.DefaultNamespace, "deployment name: Redis key prefix, and the default topics and group derive from it")
	o.redis.Register(f)
	o.kafkaSec.Register(f)
	o.signing.RegisterProducer(f)
	f.String(&o.schedules, "schedules", "KJOB_SCHEDULES", "", schedulesHelp)
	f.String(&o.output, "output", "", "table", "output format: table or json")
	f.String(&o.output, "o", "", "table", "short for --output")
	f.Duration(&o.timeout, "timeout", "", 30*time.Second, "overall deadline of the command")
}

// schedulesHelp is --schedules's help: see docs/schedules.md, "The commands".
const schedulesHelp = "read the jobs from this schedules file (YAML) instead of the schedules topic: only for a deployment whose producer " +
	"does not write the topic (one older than schedules as a log). By default the commands read the topic, which also has the jobs created " +
	"through the API; a file's jobs are used as they are, and never compared with the topic (kjobctl schedule apply -f FILE shows the differences)"

// setup validates the shared options and connects to Redis (lazily:
// go-redis dials on first use).
func (o *opts) setup() error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: want table or json: %w", o.output, errUsage)
	}
	if _, err := cli.Brokers(o.brokers); err != nil {
		return fmt.Errorf("--brokers/KJOB_BROKERS=%s: %v: %w", o.brokers, err, errUsage)
	}
	d := o.deployment().WithDefaults()
	if o.topic == "" {
		o.topic = d.Topic
	}
	if o.group == "" {
		o.group = d.Group()
	}
	o.namespace = d.Namespace
	if o.stateTopic == "" {
		o.stateTopic = d.StateTopic()
	}
	if o.dlqTopic == "" {
		o.dlqTopic = d.DeadLetterTopic()
	}
	if o.controlTopic == "" {
		o.controlTopic = d.ControlTopic()
	}
	kafka, err := o.kafkaSec.ClientOpts()
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	o.kafka = kafka
	signer, err := o.signing.Signer()
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	if signer != nil {
		o.sign = signer.Sign
	}
	rdb, err := o.redis.Client()
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	o.rdb = rdb
	return nil
}

func (o *opts) close() {
	if o.rdb != nil {
		o.rdb.Close()
	}
}

// registerRetention adds --retention, for the commands that publish windows.
func (o *opts) registerRetention(f *cli.Flags) {
	f.Duration(&o.retention, "retention", "KJOB_RETENTION", dedupe.DefaultRetention,
		"the workers' --retention: how long kjobctl remembers the windows it published, as the workers remember the windows they ran")
}

// registerLease adds the flags that say where the producers keep their
// lease, mirroring the producer's.
func (o *opts) registerLease(f *cli.Flags) {
	f.String(&o.leaseBackend, "lease-backend", "KJOB_LEASE_BACKEND", "redis", "where the producers keep their lease: redis, or kubernetes (a coordination.k8s.io Lease)")
	f.String(&o.leaseNS, "lease-namespace", "KJOB_LEASE_NAMESPACE", "", "Kubernetes namespace of the Lease (default: the kubeconfig context's namespace, or the pod's own in a cluster)")
	f.String(&o.leaseName, "lease-name", "KJOB_LEASE_NAME", "", "name of the Kubernetes Lease (default kjob-producer-<namespace>)")
	f.String(&o.kubeconfig, "kubeconfig", "KUBECONFIG", "", "kubeconfig file for --lease-backend kubernetes (default ~/.kube/config, or in-cluster credentials)")
}

// deployment names the deployment kjobctl operates: the names of its
// topics and keys derive from it.
func (o *opts) deployment() names.Deployment {
	return names.Deployment{Namespace: o.namespace, Topic: o.topic}
}

func (o *opts) brokerList() []string { return strings.Split(o.brokers, ",") }

func (o *opts) kgoOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(o.brokerList()...)}, o.kafka...)
}

func (o *opts) store() (*dedupe.Store, error) {
	return dedupe.New(o.rdb, dedupe.Config{Namespace: o.namespace})
}

// actor is who kjobctl's schedule changes (pause and resume included) are
// recorded under: the SASL user it authenticates with, else
// specs.DefaultActor().
func (o *opts) actor() string {
	if o.kafkaSec.SASLMechanism != "" && o.kafkaSec.SASLUser != "" {
		return o.kafkaSec.SASLUser
	}
	return specs.DefaultActor()
}

// specsClient reads the schedules topic and change log, and asks the
// producer leader for changes under kjobctl's actor (source kjobctl).
func (o *opts) specsClient() (*specs.Client, error) {
	c, err := specs.NewClient(specs.ClientConfig{Opts: o.kgoOpts(), Deployment: o.deployment(), Actor: o.actor(), Source: specs.Source{Kind: specs.SourceCLI}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errUsage)
	}
	return c, nil
}

func (o *opts) redrives() (*operator.Redrives, error) {
	return operator.NewRedrives(o.rdb, o.namespace)
}

func (o *opts) published() (*operator.Published, error) {
	return operator.NewPublished(o.rdb, o.namespace, o.retention)
}

// inspector is the deployment's inspector; its jobs come from jobs (nil:
// the inspector knows the jobs only from the state topic), and so do the
// jobs' pauses when jobs has them (the schedules topic's records).
func (o *opts) inspector(jobs inspect.JobSource) (*inspect.Inspector, error) {
	sc, err := o.specsClient()
	if err != nil {
		return nil, err
	}
	cfg := inspect.Config{
		Brokers: o.brokerList(), ClientOpts: o.kafka, Redis: o.rdb, Namespace: o.namespace, Topic: o.topic, StateTopic: o.stateTopic,
		DLQTopic: o.dlqTopic, Group: o.group, JobSource: jobs, ChangeLog: sc, Now: nowFunc,
	}
	if p, ok := jobs.(inspect.Pauses); ok {
		cfg.Pauses = p
	}
	if o.leaseBackend != "" {
		if cfg.LeaderSource, err = o.leaderSource(); err != nil {
			return nil, err
		}
	}
	return inspect.New(cfg)
}

// operator is the operator API (internal/ops/operator, which the dashboard
// calls too) on what a command built: the job list it read (jobSet), the
// deployment's names, Redis stores, and publisher and redriver (nil: the
// command publishes or redrives nothing). The published-window markers are there for the
// commands that register --retention. Call it after setup.
func (o *opts) operator(publisher, redriver *kgo.Client) (*operator.Operator, error) {
	return o.operatorWith(publisher, redriver, nil)
}

// replayer is the deployment's replayer (the operator's replay part):
// issuedBy names the operator in the requests the workers log, ackTimeout
// bounds the wait for their acks (0: the replayer's default). Close it.
// Call it after setup.
func (o *opts) replayer(issuedBy string, ackTimeout time.Duration) (*operator.Replayer, error) {
	store, err := o.store()
	if err != nil {
		return nil, err
	}
	return operator.NewReplayer(operator.ReplayerConfig{
		Brokers: o.brokerList(), ClientOpts: o.kafka, Topic: o.topic, ControlTopic: o.controlTopic, Store: store,
		IssuedBy: issuedBy, AckTimeout: ackTimeout, Now: nowFunc,
	})
}

// operatorWith is operator with the replayer (nil: the command replays
// nothing).
func (o *opts) operatorWith(publisher, redriver *kgo.Client, replayer *operator.Replayer) (*operator.Operator, error) {
	store, err := o.store()
	if err != nil {
		return nil, err
	}
	sc, err := o.specsClient()
	if err != nil {
		return nil, err
	}
	redrives, err := o.redrives()
	if err != nil {
		return nil, err
	}
	cfg := operator.Config{Topic: o.topic, DLQTopic: o.dlqTopic, Namespace: o.namespace, Publisher: publisher, Redriver: redriver,
		ReadOpts: o.kgoOpts(), Store: store, Schedules: sc, Redrives: redrives, Replayer: replayer, Now: nowFunc}
	if o.jobs != nil {
		cfg.Jobs = o.jobs.Jobs
	}
	if o.retention != 0 {
		if cfg.Published, err = o.published(); err != nil {
			return nil, fmt.Errorf("%w: %w", err, errUsage)
		}
	}
	return operator.New(cfg)
}

// jobSet returns the deployment's job list, read once: the schedules
// topic, read committed to its end within --timeout; or, with --schedules
// (flag or KJOB_SCHEDULES), that file, which replaces the topic (a notice
// on stderr says so). Records of the topic that are malformed or whose
// spec does not validate are left out with a warning, as the producer
// leaves them out.
func (o *opts) jobSet(ctx context.Context, stderr io.Writer) (*jobsource.Set, error) {
	if o.jobs != nil {
		return o.jobs, nil
	}
	if o.schedules != "" {
		f, err := schedule.Load(o.schedules)
		if err != nil {
			return nil, fmt.Errorf("--schedules/KJOB_SCHEDULES: %w", err)
		}
		fmt.Fprintf(stderr, "kjobctl: using the jobs of the schedules file %s (--schedules/KJOB_SCHEDULES), not the schedules topic %s: "+
			"jobs created through the API are not seen; unset it to read the topic\n", safe(f.Path), o.deployment().WithDefaults().SchedulesTopic())
		o.jobs = jobsource.FromFile(f, nowFunc())
		return o.jobs, nil
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	s, err := jobsource.ReadTopic(cctx, o.kgoOpts(), o.deployment())
	if err != nil {
		return nil, err
	}
	for _, m := range s.Malformed {
		fmt.Fprintf(stderr, "kjobctl: warning: skipped %s\n", safe(m.Error()))
	}
	for _, n := range slices.Sorted(maps.Keys(s.Invalid)) {
		fmt.Fprintf(stderr, "kjobctl: warning: job %s in %s does not validate, left out as the producer leaves it out: %s\n", safe(n), s.Topic, safe(s.Invalid[n].Error()))
	}
	o.jobs = s
	return s, nil
}

// Jobs implements inspect.JobSource with jobSet (status reads the job
// list with the other parts of its snapshot).
type jobsOf struct {
	o      *opts
	stderr io.Writer
}

func (j jobsOf) Jobs(ctx context.Context) ([]*schedule.Job, error) {
	s, err := j.o.jobSet(ctx, j.stderr)
	if err != nil {
		return nil, err
	}
	return s.Jobs, nil
}

// Pauses implements inspect.Pauses with jobSet: the paused jobs' pauses
// from the schedules topic's records. A --schedules file has none (they
// are in the topic), so then the topic is read for them.
func (j jobsOf) Pauses(ctx context.Context) (map[string]*specs.Pause, error) {
	s, err := j.o.jobSet(ctx, j.stderr)
	if err != nil {
		return nil, err
	}
	if s.Topic != "" {
		return s.Pauses(), nil
	}
	c, err := j.o.specsClient()
	if err != nil {
		return nil, err
	}
	snap, err := c.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return jobsource.FromSnapshot(j.o.deployment().WithDefaults().SchedulesTopic(), snap, nowFunc()).Pauses(), nil
}

// job returns the named job of the job list (jobSet). A job it does not
// have is an errNotFound error naming where it looked and listing the
// known jobs.
func (o *opts) job(ctx context.Context, cmd, name string, stderr io.Writer) (*schedule.Job, error) {
	s, err := o.jobSet(ctx, stderr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	j, err := s.Job(name)
	if errors.Is(err, jobsource.ErrUnknownJob) {
		return nil, fmt.Errorf("%s: %w: %w", cmd, err, errNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return j, nil
}

// warnNoJobs warns on stderr when the schedules topic has no job: a
// deployment whose producer does not write it yet.
func (o *opts) warnNoJobs(stderr io.Writer) {
	if s := o.jobs; s != nil && s.Topic != "" && s.Empty() && len(s.Deleted) == 0 {
		fmt.Fprintf(stderr, "kjobctl: warning: the schedules topic %s has no jobs (it is empty or does not exist): a producer older than schedules as a log "+
			"does not write it; for such a deployment pass the producer's schedules file with --schedules FILE\n", s.Topic)
	}
}

func (o *opts) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, o.timeout)
}

// silentRedis drops go-redis's own log lines ("connection pool: failed to
// dial ..."): kjobctl reports each failure once, as an error of the part
// that needed Redis.
type silentRedis struct{}

func (silentRedis) Printf(context.Context, string, ...any) {}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseTime parses an operator's time: RFC 3339, or a date (midnight UTC).
func parseTime(flag, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05", s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z (or a date, 2026-11-22, for midnight UTC): %w", flag, s, errUsage)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtOffset(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

// plural is "1 window", "2 windows": n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
