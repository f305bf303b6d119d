package metrics

import (
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// RedisPool returns a collector of a Redis client's connection pool
// statistics (go-redis PoolStats) under kjob_redis_pool_*.
func RedisPool(rdb redis.UniversalClient) prometheus.Collector {
	return &redisPool{rdb: rdb,
		hits:     prometheus.NewDesc("kjob_redis_pool_hits_total", "Times a free connection was found in the pool.", nil, nil),
		misses:   prometheus.NewDesc("kjob_redis_pool_misses_total", "Times no free connection was found in the pool.", nil, nil),
		timeouts: prometheus.NewDesc("kjob_redis_pool_timeouts_total", "Times waiting for a connection timed out.", nil, nil),
		total:    prometheus.NewDesc("kjob_redis_pool_connections", "Connections in the pool.", nil, nil),
		idle:     prometheus.NewDesc("kjob_redis_pool_idle_connections", "Idle connections in the pool.", nil, nil),
		stale:    prometheus.NewDesc("kjob_redis_pool_stale_connections_total", "Stale connections removed from the pool.", nil, nil),
	}
}

type redisPool struct {
	rdb                                        redis.UniversalClient
	hits, misses, timeouts, total, idle, stale *prometheus.Desc
}

func (c *redisPool) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.misses, c.timeouts, c.total, c.idle, c.stale} {
		ch <- d
	}
}

func (c *redisPool) Collect(ch chan<- prometheus.Metric) {
	s := c.rdb.PoolStats()
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns))
	ch <- prometheus.MustNewConstMetric(c.stale, prometheus.CounterValue, float64(s.StaleConns))
}

// Lag exports a consumer group's lag per partition of a topic
// (kjob_consumer_lag, kjob_consumer_committed_offset,
// kjob_consumer_end_offset), refreshed by Run every interval with kadm, so
// a scrape never waits for Kafka. The workers commit past transaction
// markers, so a drained group reads 0 here as in every Kafka tool.
//
// With WithTimeLag it also exports the time lag (see timeLagCollector):
// how old the oldest published, due and unsettled window is, per
// partition and per job, and how old each job's newest settled window is.
type Lag struct {
	adm              *kadm.Client
	group, topic     string
	interval         time.Duration
	log              *slog.Logger
	lag, commit, end *prometheus.GaugeVec
	errors           prometheus.Counter
	timeLag          *timeLagCollector // nil without WithTimeLag
}

// LagOption configures NewLag.
type LagOption func(*lagOptions)

type lagOptions struct {
	timeLag  TimeLagReader
	withTime bool
	jobLabel bool
	maxJobs  int
	now      func() time.Time
}

// TimeLagReader measures the time lag; *inspect.TimeLag implements it.
type TimeLagReader interface {
	Read(ctx context.Context) (*inspect.TimeLagReport, error)
}

// WithTimeLag makes the Lag collector read r every refresh and export the
// time lag: kjob_oldest_unsettled_window_age_seconds,
// kjob_consumer_lag_windows and kjob_time_lag_truncated per partition,
// and, per job, kjob_job_oldest_unsettled_window_age_seconds and
// kjob_newest_settled_window_age_seconds; jobLabel false reports those two
// under kjob_job="" (the largest age over the jobs), as WithoutJobLabel
// does for the other metrics.
func WithTimeLag(r TimeLagReader, jobLabel bool) LagOption {
	return func(o *lagOptions) { o.timeLag, o.withTime, o.jobLabel = r, true, jobLabel }
}

// WithTimeLagMaxJobs bounds the kjob_job values of the time lag's per-job
// series at n (at least 1; default DefaultMaxJobLabels), as
// WithMaxJobLabels does for the other metrics: the first n job names seen
// keep their own series, later ones share kjob_job=OtherJobLabel (with the
// largest age among them). Pass the bound given to WithMaxJobLabels (the
// worker's --metrics-max-jobs).
func WithTimeLagMaxJobs(n int) LagOption {
	return func(o *lagOptions) { o.maxJobs = max(n, 1) }
}

// NewLag creates the lag collector and registers it with reg; call Run to
// refresh it.
func NewLag(reg prometheus.Registerer, adm *kadm.Client, group, topic string, interval time.Duration, log *slog.Logger, opts ...LagOption) *Lag {
	var o lagOptions
	for _, opt := range opts {
		opt(&o)
	}
	l := &Lag{adm: adm, group: group, topic: topic, interval: interval, log: log,
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kjob_consumer_lag",
			Help: "Records of the windows topic not yet committed by the worker group, per partition (end offset - committed offset)."}, []string{"partition"}),
		commit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kjob_consumer_committed_offset",
			Help: "The worker group's committed offset per partition."}, []string{"partition"}),
		end: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kjob_consumer_end_offset",
			Help: "The windows topic's end offset per partition."}, []string{"partition"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kjob_consumer_lag_errors_total",
			Help: "Lag refreshes that failed (Kafka unreachable)."}),
	}
	reg.MustRegister(l.lag, l.commit, l.end, l.errors)
	if o.withTime {
		l.timeLag = newTimeLagCollector(o.timeLag, o.jobLabel, o.maxJobs, o.now)
		reg.MustRegister(l.timeLag)
	}
	return l
}

// Run refreshes the gauges every interval until ctx is done.
func (l *Lag) Run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		l.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads the lag once, and the time lag with WithTimeLag.
func (l *Lag) Refresh(ctx context.Context) {
	if l.timeLag != nil {
		rctx, cancel := context.WithTimeout(ctx, max(l.interval, 5*time.Second))
		err := l.timeLag.refresh(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			l.timeLag.errors.Inc()
			l.log.Debug("cannot read the time lag", "group", l.group, "err", err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, l.interval)
	defer cancel()
	lags, err := l.adm.Lag(rctx, l.group)
	if err == nil {
		err = lags.Error()
	}
	if err != nil {
		if ctx.Err() == nil {
			l.errors.Inc()
			l.log.Debug("cannot read consumer lag", "group", l.group, "err", err)
		}
		return
	}
	for _, gl := range lags {
		for _, p := range gl.Lag[l.topic] {
			if p.Err != nil {
				continue
			}
			part := strconv.Itoa(int(p.Partition))
			l.lag.WithLabelValues(part).Set(float64(p.Lag))
			l.commit.WithLabelValues(part).Set(float64(p.Commit.At))
			l.end.WithLabelValues(part).Set(float64(p.End.Offset))
		}
	}
}

// Names returns the name of every metric this package defines (New, NewLag
// and RedisPool), sorted, for tools that check that dashboards and alert
// rules query only metrics kjob exports. A histogram is listed by its base
// name; Prometheus exposes it as <name>_bucket, <name>_sum and
// <name>_count.
func Names() []string {
	var d describer
	New(&d)
	NewLag(&d, nil, "", "", time.Second, nil, WithTimeLag(nil, true))
	d.MustRegister(RedisPool(nil), Stalls(nil), Slots(nil), StoreEpoch(nil))
	return d.names()
}

// describer is a prometheus.Registerer that only records the descriptions
// of what is registered with it.
type describer struct{ descs []*prometheus.Desc }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc)
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// fqName matches the name in a Desc's String(): Desc{fqName: "x", ...}.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describer) names() []string {
	var out []string
	for _, desc := range d.descs {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stallDesc describes kjob_partition_stalled_seconds.
var stallDesc = prometheus.NewDesc("kjob_partition_stalled_seconds",
	"Per partition this worker owns whose commit point cannot move because settling its oldest record keeps failing (a dead letter refused or not produced, the idempotency store not answering): how long it has been failing. Absent while nothing is stalled.",
	[]string{"partition"}, nil)

// stallCollector reports a worker's stalls at scrape time.
type stallCollector struct {
	stalled func() []dedupe.Stall
	now     func() time.Time
}

// Stalls returns a collector of kjob_partition_stalled_seconds from
// stalled (usually (*worker.Worker).Stalled), read at scrape time.
func Stalls(stalled func() []dedupe.Stall) prometheus.Collector {
	return stallCollector{stalled: stalled, now: time.Now}
}

func (c stallCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stallDesc }

func (c stallCollector) Collect(ch chan<- prometheus.Metric) {
	if c.stalled == nil {
		return
	}
	for _, st := range c.stalled() {
		ch <- prometheus.MustNewConstMetric(stallDesc, prometheus.GaugeValue, c.now().Sub(st.Since).Seconds(), strconv.FormatInt(int64(st.Partition), 10))
	}
}
