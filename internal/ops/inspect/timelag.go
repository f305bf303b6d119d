package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// Time lag: how late the windows are, rather than how many offsets the
// group is behind. A cron topic carries one record per tick, so an offset
// lag of 2 says little (one running window and its transaction marker);
// the age of the oldest window that was published and is due but not
// settled says how late the work is.

// Defaults and bounds of TimeLagConfig.
const (
	// DefaultTimeLagMaxRecords is TimeLagConfig.MaxRecords when it is
	// zero: the records read per partition from the committed offset on.
	DefaultTimeLagMaxRecords = 5000
	// DefaultTimeLagLookBack is TimeLagConfig.LookBack when it is zero:
	// the offsets read below the committed offset, for the newest settled
	// window of each job.
	DefaultTimeLagLookBack = 1000
)

// Settled reports whether a window whose record in the idempotency store
// has status is settled for good: done, dead (dead-lettered), or the
// overlap policies' skipped and superseded (dedupe.Settled, the store's
// own list). A window in any other state (no record, running, failed)
// still has to run.
func Settled(status string) bool { return dedupe.Settled(status) }

// WindowStates reads windows' records in the idempotency store;
// *dedupe.Store implements it.
type WindowStates interface {
	States(ctx context.Context, ids []string) (map[string]dedupe.State, error)
}

// TimeLagConfig configures a TimeLag. Brokers and States are required.
type TimeLagConfig struct {
	// Brokers and ClientOpts (TLS, SASL) reach the Kafka cluster.
	Brokers    []string
	ClientOpts []kgo.Opt
	// Admin, if set, is the client TimeLag reads offsets with, in place of
	// one of its own: a plain client (no consumer group, no transactions)
	// shared with other readers of the process. Close leaves it open.
	Admin *kadm.Client
	// Topic is the windows topic. Default "kjob.windows"
	// (names.DefaultTopic).
	Topic string
	// Group is the workers' consumer group. Default "kjob-workers"
	// (names.DefaultGroup).
	Group string
	// States reads the windows' records (a *dedupe.Store).
	States WindowStates
	// MaxRecords caps the records read per partition from the committed
	// offset on, per Read. Default 5000. When a partition holds more, the
	// windows beyond are not looked at and the partition's age is a lower
	// bound (PartitionTimeLag.AtLeast).
	MaxRecords int
	// LookBack is how many offsets below the committed offset are read for
	// the newest settled window of each job (the records below the
	// committed offset are settled). Default 1000; -1 reads none.
	LookBack int64
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// TimeLag measures per partition of the windows topic, and per job, the
// age of the oldest window that is published, due and not settled. It
// reads Kafka (the group's committed offsets and the records from there
// on, read committed, without joining the group) and the windows' records
// in Redis, so it works whether or not the group has members. Create it
// with NewTimeLag; Close it.
type TimeLag struct {
	cfg TimeLagConfig
	cl  *kgo.Client
	adm *kadm.Client
}

// NewTimeLag validates cfg (a setting it refuses is a *configerr.Error)
// and creates the Kafka client (it connects lazily).
func NewTimeLag(cfg TimeLagConfig) (*TimeLag, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Admin != nil {
		return &TimeLag{cfg: cfg, adm: cfg.Admin}, nil
	}
	cl, err := kgo.NewClient(cfg.opts()...)
	if err != nil {
		return nil, fmt.Errorf("inspect: kafka client: %w", err)
	}
	return &TimeLag{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// validate applies the defaults and checks every field.
func (cfg *TimeLagConfig) validate() error {
	switch {
	case len(cfg.Brokers) == 0:
		return &configerr.Error{Op: "inspect", Field: "TimeLagConfig.Brokers", Reason: `is empty; set at least one seed broker, e.g. "127.0.0.1:9092"`}
	case cfg.States == nil:
		return &configerr.Error{Op: "inspect", Field: "TimeLagConfig.States", Reason: "is nil; pass the deployment's *dedupe.Store"}
	case cfg.MaxRecords < 0:
		return &configerr.Error{Op: "inspect", Field: "TimeLagConfig.MaxRecords", Value: cfg.MaxRecords,
			Reason: fmt.Sprintf("is negative; set it to the records to read per partition, or 0 for %d", DefaultTimeLagMaxRecords)}
	case cfg.LookBack < -1:
		return &configerr.Error{Op: "inspect", Field: "TimeLagConfig.LookBack", Value: cfg.LookBack,
			Reason: fmt.Sprintf(": want -1 (none), 0 (%d) or a number of offsets", DefaultTimeLagLookBack)}
	}
	if cfg.Topic == "" {
		cfg.Topic = names.DefaultTopic
	}
	if cfg.Group == "" {
		cfg.Group = names.DefaultGroup
	}
	if cfg.MaxRecords == 0 {
		cfg.MaxRecords = DefaultTimeLagMaxRecords
	}
	switch cfg.LookBack {
	case 0:
		cfg.LookBack = DefaultTimeLagLookBack
	case -1:
		cfg.LookBack = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return nil
}

func (cfg *TimeLagConfig) opts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOpts...)
}

// TimeLag measures the time lag of the Inspector's group on its windows
// topic with the default bounds (see TimeLag.Read). It needs Redis.
func (in *Inspector) TimeLag(ctx context.Context) (*TimeLagReport, error) {
	if in.store == nil {
		return nil, errors.New("time lag: no Redis configured: the windows' records are needed to tell settled windows from unsettled ones")
	}
	cfg := TimeLagConfig{Brokers: in.cfg.Brokers, ClientOpts: in.cfg.ClientOpts, Topic: in.cfg.Topic, Group: in.cfg.Group, States: in.store, Now: in.cfg.Now}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t := &TimeLag{cfg: cfg, cl: in.cl, adm: in.adm}
	return t.Read(ctx)
}

// Close releases the Kafka client, unless it is TimeLagConfig.Admin's.
func (t *TimeLag) Close() {
	if t.cl != nil && t.cfg.Admin == nil {
		t.cl.Close()
	}
}

// TimeLagReport is one Read: per partition and per job, the oldest due
// window not yet settled, and per job the newest settled one.
type TimeLagReport struct {
	// At is the time the ages are relative to.
	At time.Time `json:"at"`
	// Group and Topic are what was read.
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Partitions lists every partition of the topic, in order.
	Partitions []PartitionTimeLag `json:"partitions"`
	// Jobs lists the jobs with a window among the records read, by name.
	Jobs []JobTimeLag `json:"jobs"`
	// Oldest is the oldest unsettled due window of all partitions (nil if
	// none), Age its age (0 if none) and AtLeast whether some partition
	// held more records than were read.
	Oldest     *UnsettledWindow `json:"oldest,omitempty"`
	Age        time.Duration    `json:"-"`
	AgeSeconds float64          `json:"age_seconds"`
	AtLeast    bool             `json:"at_least,omitempty"`
}

// PartitionTimeLag is one partition's time lag.
type PartitionTimeLag struct {
	Partition int32 `json:"partition"`
	// Committed is the group's committed offset (-1: none; reading starts
	// at the log start, as the workers do).
	Committed int64 `json:"committed"`
	// End is the last stable offset: where a read-committed consumer
	// stops.
	End int64 `json:"end"`
	// Windows counts the window records from the committed offset to End
	// (transaction markers and aborted records left out), up to the cap:
	// what the group has not committed, in windows rather than offsets.
	Windows int `json:"windows"`
	// NotDue counts the windows among them whose start lies in the future.
	NotDue int `json:"not_due,omitempty"`
	// Oldest is the oldest due window not settled; nil if none.
	Oldest *UnsettledWindow `json:"oldest,omitempty"`
	// Age is At - Oldest.Due, 0 if none.
	Age        time.Duration `json:"-"`
	AgeSeconds float64       `json:"age_seconds"`
	// AtLeast is true when the partition held more than MaxRecords records
	// past the committed offset: those beyond were not read, so Age is a
	// lower bound and Windows a count of those read.
	AtLeast bool `json:"at_least,omitempty"`
}

// UnsettledWindow is a window that is published and due but not settled.
type UnsettledWindow struct {
	ID  string `json:"id"`
	Job string `json:"job"`
	// Trigger is the window's trigger.
	Trigger string `json:"trigger"`
	// Start is the window's start; Due is when it fell due: its start, or
	// for a backfilled window the time it was published (a backfill's
	// windows may start months back by design; they are late only from
	// when they were asked for).
	Start time.Time `json:"start"`
	Due   time.Time `json:"due"`
	// Partition and Offset locate its record.
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Status is its record's status: running, failed, or pending (no
	// record: not claimed yet).
	Status string `json:"status"`
}

// SettledWindow is a window that is settled.
type SettledWindow struct {
	ID    string    `json:"id"`
	Start time.Time `json:"start"`
	// Status is done, dead, skipped or superseded when its record was
	// read; empty for a window below the committed offset (settled, as the
	// workers commit only settled windows).
	Status string `json:"status,omitempty"`
}

// JobTimeLag is one job's time lag.
type JobTimeLag struct {
	Job       string `json:"job"`
	Partition int32  `json:"partition"`
	// Oldest is the job's oldest due window not settled (nil if none),
	// Age its age.
	Oldest     *UnsettledWindow `json:"oldest,omitempty"`
	Age        time.Duration    `json:"-"`
	AgeSeconds float64          `json:"age_seconds"`
	// AtLeast is the partition's AtLeast: windows of the job beyond the
	// cap were not read.
	AtLeast bool `json:"at_least,omitempty"`
	// NewestSettled is the job's newest settled window among the records
	// read (nil if none was seen: its last window lies further back than
	// LookBack), NewestSettledAge At - its start.
	NewestSettled           *SettledWindow `json:"newest_settled,omitempty"`
	NewestSettledAge        time.Duration  `json:"-"`
	NewestSettledAgeSeconds float64        `json:"newest_settled_age_seconds,omitempty"`
}

// errCapped stops a read at the cap.
var errCapped = errors.New("cap reached")

// maxReadConcurrency bounds the partitions read at once.
const maxReadConcurrency = 8

// Read measures the time lag now. It fails if the offsets or a
// partition's records cannot be read from Kafka or the windows' records
// from Redis: a time lag with parts missing would understate the lag.
func (t *TimeLag) Read(ctx context.Context) (*TimeLagReport, error) {
	now := t.cfg.Now()
	topic := t.cfg.Topic
	starts, err := t.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("time lag: log start offsets of %s: %w", topic, err)
	}
	ends, err := t.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("time lag: last stable offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("time lag: topic %s does not exist (the producer creates it): %w", topic, err)
		}
		return nil, fmt.Errorf("time lag: last stable offsets of %s: %w", topic, err)
	}
	commits, err := t.adm.FetchOffsets(ctx, t.cfg.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("time lag: committed offsets of group %s: %w", t.cfg.Group, err)
	}
	var parts []PartitionTimeLag
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic {
			return
		}
		p := PartitionTimeLag{Partition: o.Partition, Committed: -1, End: o.Offset}
		if c, ok := commits.Lookup(topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			p.Committed = c.At
		}
		parts = append(parts, p)
	})
	sort.Slice(parts, func(i, k int) bool { return parts[i].Partition < parts[k].Partition })

	rep := &TimeLagReport{At: now.UTC(), Group: t.cfg.Group, Topic: topic, Partitions: parts, Jobs: []JobTimeLag{}}
	jobs := map[string]*JobTimeLag{}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, maxReadConcurrency)
	)
	for i := range parts {
		st, _ := starts.Lookup(topic, parts[i].Partition)
		wg.Add(1)
		sem <- struct{}{}
		go func(p *PartitionTimeLag, logStart int64) {
			defer wg.Done()
			defer func() { <-sem }()
			pj, err := t.readPartition(ctx, now, p, logStart)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, j := range pj {
				jobs[j.Job] = j
			}
		}(&parts[i], st.Offset)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("time lag: %w", err)
	}
	for i := range parts {
		p := &parts[i]
		rep.AtLeast = rep.AtLeast || p.AtLeast
		if p.Oldest != nil && (rep.Oldest == nil || p.Oldest.Due.Before(rep.Oldest.Due)) {
			rep.Oldest, rep.Age = p.Oldest, p.Age
		}
	}
	rep.AgeSeconds = rep.Age.Seconds()
	for _, j := range jobs {
		rep.Jobs = append(rep.Jobs, *j)
	}
	slices.SortFunc(rep.Jobs, func(a, b JobTimeLag) int { return cmp.Compare(a.Job, b.Job) })
	return rep, nil
}

// candidate is a due window at or after the committed offset.
type candidate struct {
	w UnsettledWindow
}

// readPartition fills in p and returns the jobs seen on it.
func (t *TimeLag) readPartition(ctx context.Context, now time.Time, p *PartitionTimeLag, logStart int64) (map[string]*JobTimeLag, error) {
	from := p.Committed
	if from < logStart {
		from = logStart // no commit (or one below the log start): the workers start at the log start
	}
	readFrom := max(logStart, from-t.cfg.LookBack)
	jobs := map[string]*JobTimeLag{}
	job := func(name string) *JobTimeLag {
		j := jobs[name]
		if j == nil {
			j = &JobTimeLag{Job: name, Partition: p.Partition}
			jobs[name] = j
		}
		return j
	}
	settledSeen := func(name string, w SettledWindow) {
		j := job(name)
		if j.NewestSettled == nil || w.Start.After(j.NewestSettled.Start) {
			j.NewestSettled = &w
		}
	}
	var cands []candidate
	err := kread.Each(ctx, t.cfg.opts(), t.cfg.Topic, p.Partition, readFrom, p.End, func(r *kgo.Record) error {
		m, merr := jobmsg.FromRecord(r)
		if r.Offset < from {
			if merr == nil && !m.Window.Start.After(now) {
				settledSeen(m.Job, SettledWindow{ID: m.ID, Start: m.Window.Start.UTC()})
			}
			return nil
		}
		if p.Windows == t.cfg.MaxRecords {
			p.AtLeast = true
			return errCapped
		}
		p.Windows++
		if merr != nil {
			return nil // a poison record: the workers dead-letter it, it has no start
		}
		w := UnsettledWindow{ID: m.ID, Job: m.Job, Trigger: string(m.Trigger), Start: m.Window.Start.UTC(), Due: m.Window.Start.UTC(),
			Partition: r.Partition, Offset: r.Offset}
		if m.Trigger == jobmsg.TriggerBackfill && m.PublishedAt.After(w.Due) {
			w.Due = m.PublishedAt.UTC()
		}
		job(m.Job)
		if w.Due.After(now) {
			p.NotDue++
			return nil
		}
		cands = append(cands, candidate{w: w})
		return nil
	})
	if err != nil && !errors.Is(err, errCapped) {
		return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
	}
	if err := t.resolve(ctx, now, p, cands, jobs, settledSeen); err != nil {
		return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
	}
	for _, j := range jobs {
		j.AtLeast = p.AtLeast
		if j.NewestSettled != nil {
			j.NewestSettledAge = max(now.Sub(j.NewestSettled.Start), 0)
			j.NewestSettledAgeSeconds = j.NewestSettledAge.Seconds()
		}
	}
	return jobs, nil
}

// resolveChunk is how many windows' records resolve reads per call.
const resolveChunk = 200

// resolve looks up the candidates' records, oldest due first, until the
// partition's and every job's oldest unsettled window is known: windows
// due after a job's oldest unsettled one need no lookup.
func (t *TimeLag) resolve(ctx context.Context, now time.Time, p *PartitionTimeLag, cands []candidate,
	jobs map[string]*JobTimeLag, settledSeen func(string, SettledWindow)) error {
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if c := a.w.Due.Compare(b.w.Due); c != 0 {
			return c
		}
		return cmp.Compare(a.w.Offset, b.w.Offset)
	})
	for i := 0; i < len(cands); {
		var chunk []candidate
		var ids []string
		for ; i < len(cands) && len(chunk) < resolveChunk; i++ {
			c := cands[i]
			if jobs[c.w.Job].Oldest != nil {
				continue // the job's oldest unsettled window is older
			}
			chunk = append(chunk, c)
			ids = append(ids, c.w.ID)
		}
		if len(chunk) == 0 {
			break
		}
		states, err := t.cfg.States.States(ctx, ids)
		if err != nil {
			return fmt.Errorf("window records: %w", err)
		}
		for _, c := range chunk {
			j := jobs[c.w.Job]
			st, ok := states[c.w.ID]
			switch {
			case ok && Settled(st.Status):
				settledSeen(c.w.Job, SettledWindow{ID: c.w.ID, Start: c.w.Start, Status: st.Status})
				continue
			case j.Oldest != nil:
				continue // an older window of the job in this chunk
			case ok:
				c.w.Status = st.Status
			default:
				c.w.Status = "pending"
			}
			w := c.w
			j.Oldest = &w
			j.Age = max(now.Sub(w.Due), 0)
			j.AgeSeconds = j.Age.Seconds()
			if p.Oldest == nil {
				p.Oldest, p.Age, p.AgeSeconds = &w, j.Age, j.AgeSeconds
			}
		}
	}
	return nil
}
