// Package inspect reads what a running kjob deployment is doing, for
// kjobctl status and lag, dashboards and the workers' metrics: the
// producer leader (from its lease), the workers' group members and their
// partitions, per-partition lag as kadm computes it, per job its schedule,
// next fire times, last published window and that window's outcome, and
// the time lag: per partition and per job the age of the oldest window
// that is published and due but not settled (TimeLag). It only reads.
//
//	in, err := inspect.New(inspect.Config{Brokers: brokers, Redis: rdb, JobSource: cache}) // or Jobs: set.Jobs
//	defer in.Close()
//	snap, err := in.Snapshot(ctx)
//	lag, err := in.TimeLag(ctx)
package inspect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/schedule"
)

// ErrNoGroup is returned by Lag and Group for a group that has neither
// members nor committed offsets.
var ErrNoGroup = errors.New("inspect: group does not exist")

// ErrNoTopic is returned by Partitions (and the calls that need it) when
// the windows topic does not exist.
var ErrNoTopic = errors.New("inspect: topic does not exist")

// ErrPartial is returned by Snapshot.Err when some parts of a snapshot
// could not be read.
var ErrPartial = errors.New("inspect: parts of the snapshot could not be read")

// Config configures an Inspector. Brokers is required; Redis is needed for
// the leader and the windows' outcomes (left out without it).
type Config struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// ClientOpts are extra Kafka client options (TLS, SASL).
	ClientOpts []kgo.Opt
	// Redis is the deployment's Redis. Optional.
	Redis redis.UniversalClient
	// Namespace is the deployment's namespace. Default "kjob"
	// (names.DefaultNamespace).
	Namespace string
	// Topic is the windows topic. Default the namespace's
	// (names.DefaultTopicOf: "kjob.windows" for the default namespace).
	Topic string
	// StateTopic is the producer's state topic. Default Topic + ".state"
	// (names.Deployment.StateTopic).
	StateTopic string
	// DLQTopic is the dead-letter topic. Default Topic + ".dlq"
	// (names.Deployment.DeadLetterTopic).
	DLQTopic string
	// Group is the workers' consumer group. Default the namespace's
	// (names.Deployment.Group: "kjob-workers" for the default namespace).
	Group string
	// Jobs are the deployment's jobs, as read once (jobsource.Set.Jobs:
	// the schedules topic's, or a schedules file's). Optional: without
	// them and without JobSource a job is known only from the state
	// topic, with no schedule.
	Jobs []*schedule.Job
	// JobSource supplies the jobs at every read instead, for a
	// long-running reader (the dashboard: a *jobsource.Follower of the
	// schedules topic), so jobs created or changed meanwhile show. Set
	// Jobs or JobSource, not both.
	JobSource JobSource
	// Pauses supplies the jobs' pauses from their specs in the schedules
	// topic: who paused a job, since when, the note (*jobsource.Follower,
	// *jobsource.Set). Optional: without it no job shows as paused.
	Pauses Pauses
	// ChangeLog reads the schedule change log (*specs.Client), so that a
	// window with no record that fell due during a pause that has ended
	// is told from a lost one (read only for such a window). Optional.
	ChangeLog ChangeLog
	// LeaderSource reads the producer leader. Optional: by default the
	// Redis lease at names.Deployment.LeaseKey, where cmd/producer keeps
	// it with --lease-backend redis; a producer using a Kubernetes Lease
	// needs a reader of that Lease (kjobctl builds one with
	// kubelease.Get).
	LeaderSource func(ctx context.Context) (*Leader, error)
	// NextN is how many next fire times to report per job. Default 3.
	NextN int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// JobSource supplies the deployment's jobs; *jobsource.Follower implements
// it.
type JobSource interface {
	Jobs(ctx context.Context) ([]*schedule.Job, error)
}

// Pauses supplies the paused jobs' pauses, by job, from their specs;
// *jobsource.Follower implements it.
type Pauses interface {
	Pauses(ctx context.Context) (map[string]*specs.Pause, error)
}

// ChangeLog reads the schedule change log; *specs.Client implements it.
type ChangeLog interface {
	History(ctx context.Context, job string) ([]*specs.Change, error)
}

// PausePeriod is a finished pause: the producer published none of the
// job's windows that start in (Since, Until].
type PausePeriod struct {
	Since, Until time.Time
}

// PausePeriods returns each job's finished pauses from its changes in
// the change log, oldest first (as specs.Client.History returns them): a
// pause runs from its Pause.At to the next change that leaves the job
// unpaused (a resume, a delete).
func PausePeriods(changes []*specs.Change) map[string][]PausePeriod {
	out := map[string][]PausePeriod{}
	open := map[string]time.Time{}
	for _, c := range changes {
		since, paused := open[c.Job]
		switch {
		case !paused && c.Paused != nil:
			open[c.Job] = c.Paused.At
		case paused && c.Paused == nil:
			out[c.Job] = append(out[c.Job], PausePeriod{Since: since, Until: c.At})
			delete(open, c.Job)
		}
	}
	return out
}

// Inspector reads a deployment's state. Create it with New; Close it.
type Inspector struct {
	cfg   Config
	cl    *kgo.Client
	adm   *kadm.Client
	store *dedupe.Store
}

// New validates cfg (a setting it refuses is a *configerr.Error) and
// connects (lazily) to Kafka.
func New(cfg Config) (*Inspector, error) {
	if len(cfg.Brokers) == 0 {
		return nil, &configerr.Error{Op: "inspect", Field: "Config.Brokers", Reason: `is empty; set at least one seed broker, e.g. "127.0.0.1:9092"`}
	}
	if cfg.JobSource != nil && len(cfg.Jobs) > 0 {
		return nil, &configerr.Error{Op: "inspect", Field: "Config.JobSource", Reason: "is set with Config.Jobs; set one: Jobs for a list read once, JobSource for one read at every Snapshot"}
	}
	if cfg.NextN < 0 {
		return nil, &configerr.Error{Op: "inspect", Field: "Config.NextN", Value: cfg.NextN, Reason: "is negative; set it to the number of fire times to show, or 0 for 3"}
	}
	d := names.Deployment{Namespace: cfg.Namespace, Topic: cfg.Topic}.WithDefaults()
	cfg.Namespace, cfg.Topic = d.Namespace, d.Topic
	if cfg.StateTopic == "" {
		cfg.StateTopic = d.StateTopic()
	}
	if cfg.DLQTopic == "" {
		cfg.DLQTopic = d.DeadLetterTopic()
	}
	if cfg.Group == "" {
		cfg.Group = d.Group()
	}
	if cfg.NextN == 0 {
		cfg.NextN = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	in := &Inspector{cfg: cfg}
	if cfg.Redis != nil {
		s, err := dedupe.New(cfg.Redis, dedupe.Config{Namespace: cfg.Namespace})
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		in.store = s
	}
	cl, err := kgo.NewClient(in.opts()...)
	if err != nil {
		return nil, fmt.Errorf("inspect: kafka client: %w", err)
	}
	in.cl, in.adm = cl, kadm.NewClient(cl)
	return in, nil
}

func (in *Inspector) opts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(in.cfg.Brokers...)}, in.cfg.ClientOpts...)
}

// Close releases the Kafka client.
func (in *Inspector) Close() { in.cl.Close() }

// Admin returns the Inspector's admin client (valid until Close).
func (in *Inspector) Admin() *kadm.Client { return in.adm }

// Snapshot is everything an operator sees at one moment.
type Snapshot struct {
	// At is when the snapshot was taken.
	At time.Time `json:"at"`
	// Leader is the producer leader; nil when no producer holds the lease
	// (or without Redis).
	Leader *Leader `json:"leader"`
	// Group is the workers' group and its lag; nil if it does not exist
	// (no worker joined yet).
	Group *Group `json:"group"`
	// Jobs are the jobs, sorted by name.
	Jobs []JobStatus `json:"jobs"`
	// DeadLetters counts the records in the dead-letter topic.
	DeadLetters int64 `json:"dead_letters"`
	// Stalls are the partitions workers report they cannot move (their
	// oldest unsettled record cannot be settled: a dead letter the broker
	// does not take, the idempotency store not answering), read from
	// Redis; empty when none.
	Stalls []dedupe.Stall `json:"stalls,omitempty"`
	// StallsError says why the stalls could not be read.
	StallsError string `json:"stalls_error,omitempty"`
	// Errors lists parts that could not be read (the rest is still shown).
	Errors []string `json:"errors,omitempty"`
	// LeaderError, GroupError, JobsError and DeadLettersError say why a
	// part could not be read. The part's field above then holds its zero
	// value, which is not a fact: a nil Leader with a LeaderError does not
	// mean that no producer leads, a DeadLetters of 0 with a
	// DeadLettersError does not mean the dead-letter topic is empty.
	LeaderError      string `json:"leader_error,omitempty"`
	GroupError       string `json:"group_error,omitempty"`
	JobsError        string `json:"jobs_error,omitempty"`
	DeadLettersError string `json:"dead_letters_error,omitempty"`
}

// Err returns nil if every part of the snapshot was read, else an error
// matching ErrPartial that lists the parts that failed.
func (s *Snapshot) Err() error {
	if len(s.Errors) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrPartial, strings.Join(s.Errors, "; "))
}

// Leader is the producer replica holding the lease.
type Leader struct {
	Holder string    `json:"holder"`
	Epoch  int64     `json:"epoch"`
	Since  time.Time `json:"since"`
	// Source says where the lease was read: "redis" (key
	// names.Deployment.LeaseKey) or "kubernetes Lease <namespace>/<name>", whose
	// Epoch is the Lease's leaseTransitions.
	Source string `json:"source,omitempty"`
	// RenewedAt is the holder's last renewal, when the lease records it
	// (Kubernetes Leases do).
	RenewedAt time.Time `json:"renewed_at,omitzero"`
	// Expired is true when the holder has not renewed the lease within its
	// duration: it has probably stopped, and the next producer to campaign
	// takes over. (A Redis lease expires by itself and is then absent.)
	Expired bool `json:"expired,omitempty"`
}

// Group is a consumer group, its members and per-partition lag.
type Group struct {
	Name       string         `json:"name"`
	State      string         `json:"state"`
	Members    []Member       `json:"members"`
	Partitions []PartitionLag `json:"partitions"`
	// TotalLag is the sum of the partitions' lag.
	TotalLag int64 `json:"total_lag"`
	// TimeLagJobs is the time lag per job and TimeLagError why it could
	// not be read, when AddTimeLag was called (kjobctl lag).
	TimeLagJobs  []JobTimeLag `json:"time_lag_jobs,omitempty"`
	TimeLagError string       `json:"time_lag_error,omitempty"`
}

// AddTimeLag adds a time lag read (TimeLag) to g: each partition's
// PartitionLag.TimeLag and the jobs' TimeLagJobs, or, if err is not nil,
// TimeLagError.
func (g *Group) AddTimeLag(r *TimeLagReport, err error) {
	if err != nil {
		g.TimeLagError = err.Error()
		return
	}
	byPart := map[int32]*PartitionTimeLag{}
	for i := range r.Partitions {
		byPart[r.Partitions[i].Partition] = &r.Partitions[i]
	}
	for i := range g.Partitions {
		g.Partitions[i].TimeLag = byPart[g.Partitions[i].Partition]
	}
	g.TimeLagJobs = r.Jobs
}

// Member is one group member.
type Member struct {
	// ClientID is the worker id (the worker sends it as Kafka client id).
	ClientID string `json:"client_id"`
	MemberID string `json:"member_id"`
	// Host is the client host as the broker reports it, with the member's
	// ephemeral port ("/10.0.3.7:51234"); Address is its address alone
	// ("10.0.3.7"), which names the machine or pod.
	Host       string  `json:"host"`
	Address    string  `json:"address"`
	Partitions []int32 `json:"partitions"`
}

// HostAddress returns the address part of a client host as Kafka reports
// it: without a leading '/' and without the port ("/10.0.3.7:51234" ->
// "10.0.3.7", "/[::1]:5000" -> "::1").
func HostAddress(host string) string {
	host = strings.TrimPrefix(host, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// PartitionLag is one partition of the windows topic as the group sees it.
type PartitionLag struct {
	Partition int32 `json:"partition"`
	// Committed is the group's committed offset; -1 if none.
	Committed int64 `json:"committed"`
	// Start and End are the log start and end (high watermark) offsets.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Lag is End - Committed (End - Start with no commit), as kadm computes it.
	Lag int64 `json:"lag"`
	// Owner is the owning member's client id; empty if unassigned.
	Owner string `json:"owner"`
	// TimeLag is the partition's time lag, when read (Group.AddTimeLag).
	TimeLag *PartitionTimeLag `json:"time_lag,omitempty"`
}

// JobStatus is one job's schedule and latest window.
type JobStatus struct {
	Name     string `json:"name"`
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Handler  string `json:"handler,omitempty"`
	// Overlap is the job's overlap policy from its spec (queue, skip,
	// latest, replace or allow); "" for a job without a spec.
	Overlap string `json:"overlap,omitempty"`
	Enabled bool   `json:"enabled"`
	Paused  bool   `json:"paused"`
	// Pause is the job's pause from its spec: who paused it, since when,
	// and the note; nil if it is not paused.
	Pause *specs.Pause `json:"pause,omitempty"`
	Next  []time.Time  `json:"next"`
	// Partition is the windows-topic partition of the job's records.
	Partition int32 `json:"partition"`
	// Last is the last window the producer published; nil if none.
	Last *WindowStatus `json:"last"`
	// InFile is true for a job of the job list (Config.Jobs or
	// JobSource: the schedules topic, or a schedules file), false for a
	// job known only from the state topic (deleted, or from another job
	// list). The JSON name predates the schedules topic.
	InFile bool `json:"in_file"`
	// SpecUnknown is true when the job list could not be read: the job is
	// then known only from the state topic, and InFile false is not a
	// fact.
	SpecUnknown bool `json:"spec_unknown,omitempty"`
	// PartitionUnknown is true when the windows topic's partition count
	// could not be read: Partition is then 0, which is not a fact.
	PartitionUnknown bool `json:"partition_unknown,omitempty"`
	// PausedUnknown is true when the schedules topic could not be read:
	// Paused is then false, which is not a fact.
	PausedUnknown bool `json:"paused_unknown,omitempty"`
	// LastUnknown is true when the producer's state topic could not be
	// read: Last is then nil, which does not mean "no window yet".
	LastUnknown bool `json:"last_unknown,omitempty"`
}

// WindowStatus is a window and its outcome in the idempotency store.
type WindowStatus struct {
	ID          string    `json:"id"`
	Start       time.Time `json:"start"`
	PublishedAt time.Time `json:"published_at"`
	// Outcome is done, failed, running, dead (dead-lettered), skipped
	// (not run because of the job's overlap policy skip or latest; the
	// reason is in LastError), superseded (cancelled or dropped for a
	// newer window under overlap policy replace; the reason is in
	// LastError), pending (published, not claimed yet, or its record
	// expired), "skipped (paused)" (the window has no record and started
	// after the job was paused, in a pause that lasts or, from the change
	// log, one that has ended: the producer did not publish it; a producer
	// older than the spec pauses advanced its state past such windows)
	// or unknown (no Redis, or Redis could not be read: see OutcomeError).
	Outcome   string `json:"outcome"`
	Token     int64  `json:"token,omitempty"`
	Attempts  int    `json:"attempts,omitempty"`
	Holder    string `json:"holder,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// OutcomeError says why the outcome could not be read.
	OutcomeError string `json:"outcome_error,omitempty"`
}

// Snapshot reads everything, the parts concurrently. A part that fails is
// left at its zero value, its error is set (LeaderError, GroupError,
// JobsError, DeadLettersError) and listed in Errors; Snapshot.Err reports
// whether any part failed. The returned error is always nil: callers that
// need every part check Snapshot.Err.
func (in *Inspector) Snapshot(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{At: in.cfg.Now().UTC()}
	var (
		wg                          sync.WaitGroup
		leaderErr, groupErr, dlqErr error
		jobsErr                     error
	)
	var stallsErr error
	wg.Add(5)
	go func() { defer wg.Done(); s.Leader, leaderErr = in.Leader(ctx) }()
	go func() { defer wg.Done(); s.Stalls, stallsErr = in.Stalls(ctx) }()
	go func() {
		defer wg.Done()
		g, err := in.Group(ctx)
		switch {
		case errors.Is(err, ErrNoGroup):
			// No worker has joined yet: Group stays nil.
		case err != nil:
			groupErr = err
		default:
			s.Group = g
		}
	}()
	go func() { defer wg.Done(); s.Jobs, jobsErr = in.Jobs(ctx) }()
	go func() { defer wg.Done(); s.DeadLetters, dlqErr = in.DeadLetters(ctx) }()
	wg.Wait()
	if leaderErr != nil {
		s.Leader, s.LeaderError = nil, leaderErr.Error()
		s.Errors = append(s.Errors, "leader: "+s.LeaderError)
	}
	if groupErr != nil {
		s.GroupError = groupErr.Error()
		s.Errors = append(s.Errors, "group: "+s.GroupError)
	}
	if jobsErr != nil {
		s.JobsError = jobsErr.Error()
		s.Errors = append(s.Errors, "jobs: "+s.JobsError)
	}
	if dlqErr != nil {
		s.DeadLetters, s.DeadLettersError = 0, dlqErr.Error()
		s.Errors = append(s.Errors, "dead letters: "+s.DeadLettersError)
	}
	if stallsErr != nil {
		s.Stalls, s.StallsError = nil, stallsErr.Error()
		s.Errors = append(s.Errors, "stalled partitions: "+s.StallsError)
	}
	return s, nil
}

// Stalls returns the partitions workers report they cannot move (see
// dedupe.Stall); none without Redis.
func (in *Inspector) Stalls(ctx context.Context) ([]dedupe.Stall, error) {
	if in.store == nil {
		return nil, nil
	}
	return in.store.Stalls(ctx, in.cfg.Now())
}

// Leader returns the producer leader, or nil if no replica holds the lease.
func (in *Inspector) Leader(ctx context.Context) (*Leader, error) {
	if in.cfg.LeaderSource != nil {
		return in.cfg.LeaderSource(ctx)
	}
	if in.cfg.Redis == nil {
		return nil, errors.New("no Redis configured")
	}
	lock, err := lease.NewRedisLock(in.cfg.Redis, names.Deployment{Namespace: in.cfg.Namespace}.LeaseKey())
	if err != nil {
		return nil, err
	}
	rec, err := lock.Get(ctx)
	if errors.Is(err, lease.ErrNoHolder) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Leader{Holder: rec.Holder, Epoch: rec.Epoch, Since: rec.Acquired.UTC(), Source: "redis"}, nil
}

// Group returns the group's members and its lag on the windows topic, as
// kadm.Client.Lag computes it. It returns ErrNoGroup (with an empty Group)
// for a group with neither members nor commits.
func (in *Inspector) Group(ctx context.Context) (*Group, error) {
	lags, err := in.adm.Lag(ctx, in.cfg.Group)
	if err != nil {
		return nil, err
	}
	l, ok := lags[in.cfg.Group]
	if !ok {
		return nil, fmt.Errorf("group %s missing from the reply", in.cfg.Group)
	}
	if err := l.Error(); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, err
	}
	g := &Group{Name: in.cfg.Group, State: l.State}
	owner := map[int32]string{}
	for _, m := range l.Members {
		mem := Member{ClientID: m.ClientID, MemberID: m.MemberID, Host: m.ClientHost, Address: HostAddress(m.ClientHost), Partitions: []int32{}}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				if t.Topic == in.cfg.Topic {
					mem.Partitions = append(mem.Partitions, t.Partitions...)
				}
			}
		}
		slices.Sort(mem.Partitions)
		for _, p := range mem.Partitions {
			owner[p] = m.ClientID
		}
		g.Members = append(g.Members, mem)
	}
	sort.Slice(g.Members, func(i, j int) bool { return g.Members[i].ClientID < g.Members[j].ClientID })
	for p, ml := range l.Lag[in.cfg.Topic] {
		g.Partitions = append(g.Partitions, PartitionLag{
			Partition: p, Committed: ml.Commit.At, Start: ml.Start.Offset, End: ml.End.Offset, Lag: ml.Lag, Owner: owner[p],
		})
		if ml.Lag > 0 {
			g.TotalLag += ml.Lag
		}
	}
	sort.Slice(g.Partitions, func(i, j int) bool { return g.Partitions[i].Partition < g.Partitions[j].Partition })
	if len(g.Members) == 0 && len(g.Partitions) == 0 {
		return g, fmt.Errorf("%w: %q has no members and no committed offsets on %s", ErrNoGroup, in.cfg.Group, in.cfg.Topic)
	}
	if len(g.Partitions) == 0 || len(g.Members) == 0 {
		// Fill in partitions without commits so every partition shows.
		if err := in.fillPartitions(ctx, g); err != nil {
			return g, err
		}
	}
	return g, nil
}

// fillPartitions adds the topic's partitions the lag reply left out.
func (in *Inspector) fillPartitions(ctx context.Context, g *Group) error {
	starts, err := in.adm.ListStartOffsets(ctx, in.cfg.Topic)
	if err != nil {
		return err
	}
	ends, err := in.adm.ListEndOffsets(ctx, in.cfg.Topic)
	if err != nil {
		return err
	}
	have := map[int32]bool{}
	for _, p := range g.Partitions {
		have[p.Partition] = true
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic != in.cfg.Topic || have[o.Partition] || o.Err != nil {
			return
		}
		st, _ := starts.Lookup(o.Topic, o.Partition)
		pl := PartitionLag{Partition: o.Partition, Committed: -1, Start: st.Offset, End: o.Offset, Lag: o.Offset - st.Offset}
		g.Partitions = append(g.Partitions, pl)
		g.TotalLag += pl.Lag
	})
	sort.Slice(g.Partitions, func(i, j int) bool { return g.Partitions[i].Partition < g.Partitions[j].Partition })
	return nil
}

// Partitions returns the windows topic's partition count.
func (in *Inspector) Partitions(ctx context.Context) (int, error) {
	td, err := in.adm.ListTopics(ctx, in.cfg.Topic)
	if err != nil {
		return 0, err
	}
	t, ok := td[in.cfg.Topic]
	if !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("topic %s does not exist (the producer creates it): %w", in.cfg.Topic, ErrNoTopic)
	}
	if t.Err != nil {
		return 0, t.Err
	}
	return len(t.Partitions), nil
}

// LastWindows reads the producer's state topic: the last window per job.
func (in *Inspector) LastWindows(ctx context.Context) (map[string]jobmsg.State, error) {
	starts, err := in.adm.ListStartOffsets(ctx, in.cfg.StateTopic)
	if err != nil {
		return nil, err
	}
	ends, err := in.adm.ListEndOffsets(ctx, in.cfg.StateTopic)
	if err != nil {
		return nil, err
	}
	out := map[string]jobmsg.State{}
	var rerr error
	ends.Each(func(o kadm.ListedOffset) {
		if rerr != nil || errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return
		}
		if o.Err != nil {
			rerr = o.Err
			return
		}
		st, _ := starts.Lookup(o.Topic, o.Partition)
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		recs, err := kread.Range(rctx, in.opts(), in.cfg.StateTopic, o.Partition, st.Offset, o.Offset)
		cancel()
		if err != nil {
			rerr = err
			return
		}
		for _, r := range recs {
			if r.Value == nil {
				continue
			}
			// A record without LastID is a baseline (a job no window of
			// which was published yet): no last window to show.
			if s, err := jobmsg.ParseState(r.Value); err == nil && s.LastID != "" {
				out[s.Job] = s
			}
		}
	})
	return out, rerr
}

// Jobs returns the status of every job of the job list (Config.Jobs or
// JobSource) and of every job the state topic knows. When a source fails, the jobs are still
// returned with the affected fields marked unknown (PartitionUnknown,
// PausedUnknown, LastUnknown, WindowStatus.OutcomeError) and the error
// lists every failure.
func (in *Inspector) Jobs(ctx context.Context) ([]JobStatus, error) {
	var (
		errs              []string
		last              map[string]jobmsg.State
		nparts            int
		paused            map[string]*specs.Pause
		lastErr, partsErr error
		pausedErr         error
		jobs              = in.cfg.Jobs
		jobsErr           error
		wg                sync.WaitGroup
	)
	wg.Add(2)
	go func() { defer wg.Done(); last, lastErr = in.LastWindows(ctx) }()
	go func() { defer wg.Done(); nparts, partsErr = in.Partitions(ctx) }()
	if in.cfg.JobSource != nil {
		wg.Add(1)
		go func() { defer wg.Done(); jobs, jobsErr = in.cfg.JobSource.Jobs(ctx) }()
	}
	wg.Wait()
	if in.cfg.Pauses != nil { // after the job list: a source may read both at once
		paused, pausedErr = in.cfg.Pauses.Pauses(ctx)
	}
	if jobsErr != nil {
		errs = append(errs, "job list: "+jobsErr.Error())
	}
	if lastErr != nil {
		errs = append(errs, "state topic: "+lastErr.Error())
	}
	if partsErr != nil {
		errs = append(errs, "partitions: "+partsErr.Error())
	}
	if pausedErr != nil {
		errs = append(errs, "pauses (schedules topic): "+pausedErr.Error())
	}
	now := in.cfg.Now()
	seen := map[string]bool{}
	var out []JobStatus
	for _, j := range jobs {
		seen[j.Name] = true
		tz := j.Timezone
		if tz == "" {
			tz = "UTC"
		}
		js := JobStatus{Name: j.Name, Schedule: j.Spec, Timezone: tz, Handler: j.Handler, Overlap: string(window.Policy(j).Overlap), Enabled: j.Enabled, InFile: true, Next: []time.Time{}}
		// A paused job fires nothing until it is resumed.
		if j.Enabled && paused[j.Name] == nil {
			t := now
			for range in.cfg.NextN {
				if t = j.Next(t); t.IsZero() {
					break
				}
				js.Next = append(js.Next, t)
			}
		}
		out = append(out, js)
	}
	for name := range last {
		if !seen[name] {
			out = append(out, JobStatus{Name: name, Next: []time.Time{}, SpecUnknown: jobsErr != nil})
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	var ids []string
	for i := range out {
		js := &out[i]
		js.Pause = paused[js.Name]
		js.Paused = js.Pause != nil
		js.PausedUnknown = pausedErr != nil
		js.PartitionUnknown = partsErr != nil
		js.LastUnknown = lastErr != nil
		if partsErr == nil {
			js.Partition = names.JobPartition(js.Name, nparts)
		}
		if s, ok := last[js.Name]; ok {
			js.Last = &WindowStatus{ID: s.LastID, Start: s.LastWindow.UTC(), PublishedAt: s.PublishedAt.UTC(), Outcome: "unknown"}
			if s.LastID != "" {
				ids = append(ids, s.LastID)
			}
		}
	}
	if in.store == nil || len(ids) == 0 {
		return out, joinErrs(errs)
	}
	states, stErr := in.store.States(ctx, ids)
	if stErr != nil {
		errs = append(errs, "window outcomes: "+stErr.Error())
	}
	var unexplained []*JobStatus // last window without a record, not in a lasting pause
	for i := range out {
		js := &out[i]
		ws := js.Last
		if ws == nil || ws.ID == "" {
			continue
		}
		if stErr != nil {
			ws.OutcomeError = stErr.Error()
			continue
		}
		st, ok := states[ws.ID]
		if ok {
			ws.Outcome, ws.Token, ws.Attempts, ws.Holder, ws.LastError = st.Status, st.Token, st.Attempts, st.Holder, st.LastError
			if dedupe.SkippedByReplay(st) {
				ws.Outcome = dedupe.ReplaySkipLabel // a replay moved the offsets past it
			}
			continue
		}
		switch {
		case js.Pause != nil && ws.Start.After(js.Pause.At):
			ws.Outcome = "skipped (paused)" // the state advanced past it unpublished
		case js.PausedUnknown:
			// Pending or skipped: cannot tell without the pauses.
			ws.OutcomeError = "no record of the window, and the pauses could not be read"
		default:
			ws.Outcome = "pending"
			unexplained = append(unexplained, js)
		}
	}
	if len(unexplained) > 0 && in.cfg.ChangeLog != nil {
		// Rare (a window skipped by an older producer during a pause that
		// has ended since): read the change log only then.
		changes, err := in.cfg.ChangeLog.History(ctx, "")
		if err != nil {
			errs = append(errs, "finished pauses (change log): "+err.Error())
		}
		periods := PausePeriods(changes)
		for _, js := range unexplained {
			for _, p := range periods[js.Name] {
				if js.Last.Start.After(p.Since) && !js.Last.Start.After(p.Until) {
					js.Last.Outcome = "skipped (paused)"
				}
			}
		}
	}
	return out, joinErrs(errs)
}

func joinErrs(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// DeadLetters counts the records of the dead-letter topic (0 if it does not
// exist yet).
func (in *Inspector) DeadLetters(ctx context.Context) (int64, error) {
	starts, err := in.adm.ListStartOffsets(ctx, in.cfg.DLQTopic)
	if err != nil {
		return 0, err
	}
	ends, err := in.adm.ListEndOffsets(ctx, in.cfg.DLQTopic)
	if err != nil {
		return 0, err
	}
	var n int64
	var perr error
	ends.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return // not created yet: no dead letter
		}
		if o.Err != nil {
			perr = fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err)
			return
		}
		st, ok := starts.Lookup(o.Topic, o.Partition)
		if !ok || st.Err != nil {
			perr = fmt.Errorf("%s[%d]: log start unknown: %v", o.Topic, o.Partition, st.Err)
			return
		}
		n += o.Offset - st.Offset
	})
	if perr != nil {
		return 0, perr
	}
	return n, nil
}
