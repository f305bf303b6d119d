package metrics

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// timeLagCollector exports the time lag of the last successful read. The
// ages are computed at scrape time from the windows' due times, so they
// keep growing between reads, and while reads fail (Kafka or Redis down:
// nothing settles then either) the last known oldest window keeps aging
// instead of freezing at a stale value. Where the last read found nothing
// unsettled, the age is unknown while reads fail (windows published since
// may be waiting): it reads NaN then, never a false 0, and
// kjob_time_lag_error is 1 until a read succeeds, which the
// KjobTimeLagUnknown alert uses. A job's newest settled window is
// remembered across reads: its age grows until a newer one is seen.
type timeLagCollector struct {
	r        TimeLagReader
	jobLabel bool
	maxJobs  int // WithTimeLagMaxJobs
	now      func() time.Time

	partAge, windows, truncated, jobAge, settledAge *prometheus.Desc
	errors                                          prometheus.Counter
	failing                                         prometheus.Gauge // kjob_time_lag_error

	mu      sync.Mutex
	read    bool // a read succeeded
	failed  bool // the last read failed: ages of nothing unsettled are unknown
	parts   []partState
	oldest  map[string]time.Time // job label -> due of its oldest unsettled window
	settled map[string]time.Time // job label -> start of its newest settled window
	// labelled are the job names with a label of their own: the first
	// maxJobs seen. Job names come from the records, which anyone who can
	// write to the windows topic writes, so the others share
	// kjob_job=OtherJobLabel (the largest age among them).
	labelled map[string]bool
}

type partState struct {
	partition string
	due       time.Time // zero: nothing unsettled
	windows   int
	truncated bool
}

// newTimeLagCollector returns the collector of r's time lag; maxJobs
// bounds its kjob_job values (0: DefaultMaxJobLabels).
func newTimeLagCollector(r TimeLagReader, jobLabel bool, maxJobs int, now func() time.Time) *timeLagCollector {
	if now == nil {
		now = time.Now
	}
	if maxJobs <= 0 {
		maxJobs = DefaultMaxJobLabels
	}
	return &timeLagCollector{r: r, jobLabel: jobLabel, maxJobs: maxJobs, now: now,
		partAge: prometheus.NewDesc("kjob_oldest_unsettled_window_age_seconds",
			"Age of the oldest window of the partition that is published and due but not settled (done, dead-lettered, skipped or superseded): now minus its start (for a backfilled window: minus when it was published); 0 if none, NaN while it cannot be computed (kjob_time_lag_error 1) if the last read found none. A lower bound when kjob_time_lag_truncated is 1.",
			[]string{"partition"}, nil),
		windows: prometheus.NewDesc("kjob_consumer_lag_windows",
			"Window records of the partition past the group's committed offset (transaction markers left out; counted up to the read cap).",
			[]string{"partition"}, nil),
		truncated: prometheus.NewDesc("kjob_time_lag_truncated",
			"1 when the partition held more records past the committed offset than the time lag reads: the age is then a lower bound.",
			[]string{"partition"}, nil),
		jobAge: prometheus.NewDesc("kjob_job_oldest_unsettled_window_age_seconds",
			"Age of the job's oldest published, due and unsettled window; 0 if none, NaN while it cannot be computed (kjob_time_lag_error 1) if the last read found none.",
			[]string{"kjob_job"}, nil),
		settledAge: prometheus.NewDesc("kjob_newest_settled_window_age_seconds",
			"Age of the newest settled window of the job seen by this worker: now minus its start.",
			[]string{"kjob_job"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kjob_time_lag_errors_total",
			Help: "Time lag reads that failed (Kafka or Redis unreachable); the ages then grow from the last read."}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kjob_time_lag_error",
			Help: "1 while the time lag cannot be computed (the last read failed: Kafka or Redis unreachable), 0 after a successful read. Meanwhile an age whose last read found no unsettled window is NaN, not 0."}),
		oldest: map[string]time.Time{}, settled: map[string]time.Time{}, labelled: map[string]bool{},
	}
}

func (c *timeLagCollector) refresh(ctx context.Context) error {
	rep, err := c.r.Read(ctx)
	if err != nil {
		c.mu.Lock()
		c.failed = true
		c.mu.Unlock()
		c.failing.Set(1)
		return err
	}
	c.failing.Set(0)
	parts := make([]partState, 0, len(rep.Partitions))
	for _, p := range rep.Partitions {
		ps := partState{partition: strconv.Itoa(int(p.Partition)), windows: p.Windows, truncated: p.AtLeast}
		if p.Oldest != nil {
			ps.due = p.Oldest.Due
		}
		parts = append(parts, ps)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read, c.failed, c.parts = true, false, parts
	clear(c.oldest)
	delete(c.settled, OtherJobLabel) // the other jobs' newest settled window: from this read only
	for _, j := range rep.Jobs {
		label := c.label(j.Job)
		due, ok := c.oldest[label]
		if !ok {
			c.oldest[label] = time.Time{}
		}
		if j.Oldest != nil && (due.IsZero() || j.Oldest.Due.Before(due)) {
			c.oldest[label] = j.Oldest.Due
		}
		if s := j.NewestSettled; s != nil {
			// For "other", the stalest of the jobs' newest settled windows.
			if cur, ok := c.settled[label]; !ok || label != OtherJobLabel && s.Start.After(cur) || label == OtherJobLabel && s.Start.Before(cur) {
				c.settled[label] = s.Start
			}
		}
	}
	return nil
}

// label returns the kjob_job value of job (c.mu held).
func (c *timeLagCollector) label(job string) string {
	if c.labelled[job] {
		return job
	}
	if len(c.labelled) < c.maxJobs && job != OtherJobLabel {
		c.labelled[job] = true
		return job
	}
	return OtherJobLabel
}

func (c *timeLagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.partAge, c.windows, c.truncated, c.jobAge, c.settledAge} {
		ch <- d
	}
	c.errors.Describe(ch)
	c.failing.Describe(ch)
}

func (c *timeLagCollector) Collect(ch chan<- prometheus.Metric) {
	c.errors.Collect(ch)
	c.failing.Collect(ch)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	failed := c.failed
	// age is the age of a window due at t; zero t: none was unsettled at
	// the last read, which says nothing once reads fail.
	age := func(t time.Time) float64 {
		if t.IsZero() && failed {
			return math.NaN()
		}
		if t.IsZero() || !now.After(t) {
			return 0
		}
		return now.Sub(t).Seconds()
	}
	if !c.read {
		return // nothing known yet: no series rather than a false 0
	}
	for _, p := range c.parts {
		ch <- prometheus.MustNewConstMetric(c.partAge, prometheus.GaugeValue, age(p.due), p.partition)
		ch <- prometheus.MustNewConstMetric(c.windows, prometheus.GaugeValue, float64(p.windows), p.partition)
		tr := 0.0
		if p.truncated {
			tr = 1
		}
		ch <- prometheus.MustNewConstMetric(c.truncated, prometheus.GaugeValue, tr, p.partition)
	}
	if c.jobLabel {
		for job, due := range c.oldest {
			ch <- prometheus.MustNewConstMetric(c.jobAge, prometheus.GaugeValue, age(due), job)
		}
		for job, start := range c.settled {
			ch <- prometheus.MustNewConstMetric(c.settledAge, prometheus.GaugeValue, age(start), job)
		}
		return
	}
	// One series each, the largest age over the jobs.
	// The largest known age; NaN if every job's is unknown.
	var worst, stalest float64
	known := false
	for _, due := range c.oldest {
		if a := age(due); !math.IsNaN(a) {
			worst, known = max(worst, a), true
		}
	}
	if !known && failed {
		worst = math.NaN()
	}
	ch <- prometheus.MustNewConstMetric(c.jobAge, prometheus.GaugeValue, worst, "")
	if len(c.settled) > 0 {
		for _, start := range c.settled {
			stalest = max(stalest, age(start))
		}
		ch <- prometheus.MustNewConstMetric(c.settledAge, prometheus.GaugeValue, stalest, "")
	}
}
