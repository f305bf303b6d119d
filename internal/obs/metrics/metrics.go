// Package metrics exports kjob's Prometheus metrics. A producer or worker
// main creates one Metrics with the registry it serves on /metrics and
// passes its hook methods to the producer, lease elector and worker
// configurations; nothing here changes what those packages do.
//
//	m := metrics.New(reg)
//	producer.Config{..., OnPublished: m.Published, OnSkipped: m.Skipped}
//	lease.Config{..., OnChange: m.LeaseChanged}
//	worker.Config{..., OnExecuted: m.Executed, Store: m.Store(store)}
//
// Every name starts with kjob_; counters end in _total and durations are
// in seconds. Labels are bounded: outcomes and triggers come from fixed
// sets, partitions from the topic, and job names (label kjob_job, since
// Prometheus keeps "job" for the scrape job) are bounded by
// WithMaxJobLabels: a worker takes job names from the records it reads,
// and whoever can write to the windows topic could otherwise add a series
// per made-up name. The first DefaultMaxJobLabels (1000) distinct names get
// their own label value; later ones are counted under kjob_job="other"
// (OtherJobLabel), and kjob_metrics_job_labels_folded_total counts what was
// folded. A deployment with many thousands of jobs can drop the per-job
// series with WithoutJobLabel.
package metrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/lease"
)

// Latency buckets from 1ms to about 65s: lateness is milliseconds when all
// is well and seconds behind a slow window or during a failover.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// Metrics holds kjob's collectors. Create it with New; its methods are safe
// for concurrent use.
type Metrics struct {
	published       *prometheus.CounterVec
	skipped         *prometheus.CounterVec
	malformed       *prometheus.CounterVec
	publishLateness prometheus.Histogram
	leaseHeld       prometheus.Gauge
	leaderChanges   *prometheus.CounterVec
	takeover        prometheus.Histogram
	handlerLateness prometheus.Histogram
	handlerDuration *prometheus.HistogramVec
	executions      *prometheus.CounterVec
	deadLettered    *prometheus.CounterVec
	dedupe          *prometheus.CounterVec
	dedupeErrors    *prometheus.CounterVec
	noJob           bool // WithoutJobLabel
	maxJobs         int  // WithMaxJobLabels
	folded          prometheus.Counter
	jobsMu          sync.RWMutex
	jobs            map[string]struct{} // the job label values in use
	acquired        time.Time           // start of the current tenure, for takeover
	acquiredPending bool                // no publication yet in the current tenure

	// The series Executed updates, by job label: a window's settlement
	// then costs one lookup by job name rather than a label check and a
	// label hash per metric. Only jobs whose label is their name are kept
	// (at most maxJobs; with WithoutJobLabel only the empty label): a
	// folded job takes the slow path, which counts each folding.
	execSeries sync.Map // job name → *jobSeries
}

// jobSeries are the series of one job label, by outcome (outcomeIndex),
// resolved the first time they are used.
type jobSeries struct {
	job       string
	mu        sync.Mutex
	counters  [len(outcomes)]prometheus.Counter
	durations [len(outcomes)]prometheus.Observer
}

// outcomes are worker.Execution's outcomes, in outcomeIndex's order.
var outcomes = [...]string{worker.OutcomeDone, worker.OutcomeFailed, worker.OutcomeSkippedDone, worker.OutcomeDeadLettered,
	worker.OutcomeFenced, worker.OutcomeAbandoned, worker.OutcomeSkipped, worker.OutcomeSuperseded, worker.OutcomeSteppedDown,
	worker.OutcomeSkippedReplay}

// outcomeIndex returns o's index in outcomes, or -1.
func outcomeIndex(o string) int {
	for i, x := range outcomes {
		if x == o {
			return i
		}
	}
	return -1
}

// series returns the counter and duration observer of the job label's
// outcome.
func (m *Metrics) series(js *jobSeries, outcome string) (prometheus.Counter, prometheus.Observer) {
	i := outcomeIndex(outcome)
	if i < 0 { // an outcome this package does not know: resolved each time
		return m.executions.WithLabelValues(js.job, outcome), m.handlerDuration.WithLabelValues(js.job, outcome)
	}
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.counters[i] == nil {
		js.counters[i] = m.executions.WithLabelValues(js.job, outcome)
		js.durations[i] = m.handlerDuration.WithLabelValues(js.job, outcome)
	}
	return js.counters[i], js.durations[i]
}

// jobSeries returns the series of job's label.
func (m *Metrics) jobSeries(job string) *jobSeries {
	if m.noJob {
		job = "" // every job's label
	}
	if v, ok := m.execSeries.Load(job); ok {
		return v.(*jobSeries)
	}
	label := m.job(job)
	js := &jobSeries{job: label}
	if label != job {
		return js // folded: m.job counts each folding, so no caching
	}
	v, _ := m.execSeries.LoadOrStore(job, js)
	return v.(*jobSeries)
}

// Option configures New.
type Option func(*Metrics)

// WithoutJobLabel reports every job under kjob_job="" instead of its name,
// so the number of series does not grow with the number of jobs (for
// deployments with many thousands of schedules).
func WithoutJobLabel() Option { return func(m *Metrics) { m.noJob = true } }

// DefaultMaxJobLabels is the number of distinct kjob_job label values a
// Metrics keeps by default (WithMaxJobLabels).
const DefaultMaxJobLabels = 1000

// OtherJobLabel is the kjob_job value of the jobs beyond the bound.
const OtherJobLabel = "other"

// WithMaxJobLabels bounds the distinct kjob_job label values at n (at
// least 1; default DefaultMaxJobLabels): the first n job names seen keep
// their own series, later ones are reported as OtherJobLabel and counted
// in kjob_metrics_job_labels_folded_total. Size it above the number of jobs
// in your schedules file.
func WithMaxJobLabels(n int) Option { return func(m *Metrics) { m.maxJobs = max(n, 1) } }

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer, opts ...Option) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_windows_published_total",
			Help: "Windows published by this producer, by job and trigger (schedule, catchup, manual, backfill).",
		}, []string{"kjob_job", "trigger"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_windows_skipped_total",
			Help: "Missed windows not published because they were older than the job's catch-up limit.",
		}, []string{"kjob_job"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_schedule_records_malformed_total",
			Help: "Records of the schedules topic, the schedule change log or the control topic skipped as malformed (or whose spec does not validate), by topic: written by hand or by a foreign tool. The job keeps its last good version.",
		}, []string{"topic"}),
		publishLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kjob_publish_lateness_seconds",
			Help:    "Time from a scheduled window's start to its publication (catch-up windows included).",
			Buckets: latencyBuckets,
		}),
		leaseHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kjob_lease_held",
			Help: "1 while this producer replica holds the leader lease, else 0.",
		}),
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_leadership_changes_total",
			Help: "Leadership events of this replica: acquired, lost (could not prove the lease) or released.",
		}, []string{"event"}),
		takeover: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kjob_leader_takeover_seconds",
			Help:    "After a leader change, how long the oldest window that fell due during the change waited for its publication by the new leader (about the time from leader loss to the next publish; nothing is observed when no window fell due).",
			Buckets: latencyBuckets,
		}),
		handlerLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kjob_handler_lateness_seconds",
			Help:    "Time from a window's scheduled start to the start of a handler attempt.",
			Buckets: latencyBuckets,
		}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kjob_handler_duration_seconds",
			Help:    "Duration of handler attempts, by job and outcome (done, failed, fenced, abandoned, dead-lettered).",
			Buckets: latencyBuckets,
		}, []string{"kjob_job", "outcome"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_executions_total",
			Help: "Records settled or attempted by this worker, by job and outcome (done, failed, skipped-done, dead-lettered, fenced, abandoned, skipped, superseded, stepped-down, skipped-replay: moved past by an operator's replay).",
		}, []string{"kjob_job", "outcome"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_dead_lettered_total",
			Help: "Records written to the dead-letter topic, by job (empty for records that could not be decoded).",
		}, []string{"kjob_job"}),
		dedupe: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_dedupe_claims_total",
			Help: "Idempotency claims by outcome: claimed (run it), skipped-done (already done), waited (another claim is live), fenced (a completion or extension refused).",
		}, []string{"outcome"}),
		dedupeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kjob_dedupe_errors_total",
			Help: "Idempotency store calls that failed (Redis unreachable or slow), by operation.",
		}, []string{"op"}),
		folded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kjob_metrics_job_labels_folded_total",
			Help: `Observations reported under kjob_job="other" because the number of distinct job labels reached its bound (MaxJobLabels of the worker's or producer's config).`,
		}),
		maxJobs: DefaultMaxJobLabels,
		jobs:    map[string]struct{}{},
	}
	for _, o := range opts {
		o(m)
	}
	reg.MustRegister(m.published, m.skipped, m.malformed, m.publishLateness, m.leaseHeld, m.leaderChanges, m.takeover,
		m.handlerLateness, m.handlerDuration, m.executions, m.deadLettered, m.dedupe, m.dedupeErrors, m.folded)
	for _, e := range []string{"acquired", "lost", "released"} {
		m.leaderChanges.WithLabelValues(e) // export zeros, so rate() works from the start
	}
	for _, o := range []string{"claimed", "skipped-done", "waited", "fenced"} {
		m.dedupe.WithLabelValues(o)
	}
	return m
}

// Published is a producer.Config.OnPublished hook.
func (m *Metrics) Published(ws []producer.Published) {
	for _, w := range ws {
		m.published.WithLabelValues(m.job(w.Job), string(w.Trigger)).Inc()
		m.publishLateness.Observe(w.PublishedAt.Sub(w.Start).Seconds())
	}
	if len(ws) > 0 && m.acquiredPending {
		// The first publication of a tenure: the windows that fell due
		// before it began waited for the leader change.
		m.acquiredPending = false
		var worst time.Duration
		for _, w := range ws {
			if w.Start.Before(m.acquired) {
				worst = max(worst, w.PublishedAt.Sub(w.Start))
			}
		}
		if worst > 0 {
			m.takeover.Observe(worst.Seconds())
		}
	}
}

// Skipped is a producer.Config.OnSkipped hook.
func (m *Metrics) Skipped(job string, n int) {
	m.skipped.WithLabelValues(m.job(job)).Add(float64(n))
}

// Malformed is a producer.Config.OnMalformed hook.
func (m *Metrics) Malformed(topic string) {
	m.malformed.WithLabelValues(topic).Inc()
}

// job is the kjob_job label value of a job: its name while fewer than
// maxJobs names are in use, else OtherJobLabel.
func (m *Metrics) job(name string) string {
	if m.noJob {
		return ""
	}
	m.jobsMu.RLock()
	_, ok := m.jobs[name]
	m.jobsMu.RUnlock()
	if ok {
		return name
	}
	m.jobsMu.Lock()
	defer m.jobsMu.Unlock()
	if _, ok := m.jobs[name]; ok {
		return name
	}
	if len(m.jobs) < m.maxJobs {
		m.jobs[name] = struct{}{}
		return name
	}
	m.folded.Inc()
	return OtherJobLabel
}

// LeaseChanged is a lease.Config.OnChange hook. It runs on the elector's
// goroutine; Published runs on the leader's, which the elector starts after
// the Acquired event and stops before the next one, so the takeover start
// needs no lock.
func (m *Metrics) LeaseChanged(e lease.Event) {
	switch e.Kind {
	case lease.Acquired:
		m.leaseHeld.Set(1)
		m.leaderChanges.WithLabelValues("acquired").Inc()
		m.acquired, m.acquiredPending = time.Now(), true
	case lease.Lost:
		m.leaseHeld.Set(0)
		m.leaderChanges.WithLabelValues("lost").Inc()
	case lease.Released:
		m.leaseHeld.Set(0)
		m.leaderChanges.WithLabelValues("released").Inc()
	}
}

// Executed is a worker.Config.OnExecuted hook.
func (m *Metrics) Executed(e worker.Execution) {
	js := m.jobSeries(e.Job)
	counter, duration := m.series(js, e.Outcome)
	counter.Inc()
	switch e.Outcome {
	case worker.OutcomeSkippedDone, worker.OutcomeSkipped:
		return
	case worker.OutcomeSkippedReplay:
		if e.Attempt == 0 { // never started: no duration, no lateness
			return
		}
	case worker.OutcomeSuperseded:
		if e.Finished.Equal(e.Started) { // dropped before it started
			return
		}
	case worker.OutcomeDeadLettered:
		m.deadLettered.WithLabelValues(js.job).Inc()
	}
	if e.Attempt == 0 { // nothing ran
		return
	}
	if e.Outcome != worker.OutcomeDeadLettered || !e.Finished.Equal(e.Started) {
		duration.Observe(e.Finished.Sub(e.Started).Seconds())
	}
	if !e.ScheduledAt.IsZero() && e.Outcome != worker.OutcomeDeadLettered {
		m.handlerLateness.Observe(e.Started.Sub(e.ScheduledAt).Seconds())
	}
}

// Store wraps a worker's idempotency store, counting claim outcomes and
// store errors.
func (m *Metrics) Store(s worker.Store) worker.Store { return &instrumented{Store: s, m: m} }

func (m *Metrics) claims(cs []dedupe.Claim, err error, op string) {
	if err != nil {
		m.dedupeErrors.WithLabelValues(op).Inc()
		return
	}
	var claimed, done, busy float64
	for _, c := range cs {
		switch c.Outcome {
		case dedupe.Claimed:
			claimed++
		case dedupe.AlreadyDone:
			done++
		case dedupe.Busy:
			busy++
		}
	}
	for _, o := range [...]struct {
		label string
		n     float64
	}{{"claimed", claimed}, {"skipped-done", done}, {"waited", busy}} {
		if o.n > 0 {
			m.dedupe.WithLabelValues(o.label).Add(o.n)
		}
	}
}

type instrumented struct {
	worker.Store
	m *Metrics
}

// ReportStalls passes the worker's stalls on to the store, if it keeps
// them (worker.StallReporter).
func (s *instrumented) ReportStalls(ctx context.Context, worker string, stalls []dedupe.Stall) error {
	if r, ok := s.Store.(interface {
		ReportStalls(context.Context, string, []dedupe.Stall) error
	}); ok {
		return r.ReportStalls(ctx, worker, stalls)
	}
	return nil
}

func (s *instrumented) ClaimBatch(ctx context.Context, ids []string, owner string) ([]dedupe.Claim, error) {
	cs, err := s.Store.ClaimBatch(ctx, ids, owner)
	s.m.claims(cs, err, "claim")
	return cs, err
}

func (s *instrumented) Settle(ctx context.Context, ss []dedupe.Settlement, runs ...dedupe.Run) ([]dedupe.Result, error) {
	res, err := s.Store.Settle(ctx, ss, runs...)
	if err != nil {
		ops := map[dedupe.Op]bool{}
		for _, st := range ss {
			if !ops[st.Op] {
				ops[st.Op] = true
				s.m.dedupeErrors.WithLabelValues(st.Op.String()).Inc()
			}
		}
		return res, err
	}
	var next []dedupe.Claim // the claims chained to completions count as claims
	for _, r := range res {
		if errors.Is(r.Err, dedupe.ErrFenced) {
			s.m.dedupe.WithLabelValues("fenced").Inc()
		}
		if r.Next.WindowID != "" {
			next = append(next, r.Next)
		}
	}
	if len(next) > 0 {
		s.m.claims(next, nil, "claim")
	}
	return res, err
}
