package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// Errors of Plan and Execute that callers (and tests) branch on.
var (
	// ErrNoGroup: the group has no members and no committed offsets.
	ErrNoGroup = errors.New("group does not exist")
	// ErrNoTopic: the windows topic (a replay) or the dead-letter topic
	// (ReadDeadLetters) does not exist.
	ErrNoTopic = errors.New("topic does not exist")
	// ErrNoPartition: a requested partition is not in the topic.
	ErrNoPartition = errors.New("no such partition")
	// ErrRebalancing: the group is between assignments; try again.
	ErrRebalancing = errors.New("group is rebalancing")
	// ErrNotAcknowledged: no worker applied the seek in time.
	ErrNotAcknowledged = errors.New("seek not acknowledged")
	// ErrInvalidSpec: the ReplaySpec itself is wrong (no group, an unknown
	// mode, a job whose partition is not among Partitions).
	ErrInvalidSpec = errors.New("invalid replay")
	// ErrUnsettled: the replay moves offsets forward past windows that are
	// not settled (ReplayPlan.Skip), and ReplaySpec.SkipUnsettled does not
	// allow it: Execute refuses and changes nothing.
	ErrUnsettled = errors.New("replay would skip unsettled windows")
)

// Mode selects how a replay computes its target offsets; the modes mirror
// kafka-consumer-groups --reset-offsets.
type Mode string

// The modes.
const (
	// ToDatetime: the first offset whose timestamp is at or after Time.
	ToDatetime Mode = "to-datetime"
	// ByDuration: the first offset at or after now - Duration.
	ByDuration Mode = "by-duration"
	// ToOffset: the absolute Offset.
	ToOffset Mode = "to-offset"
	// ShiftBy: the committed offset plus Offset (negative rewinds).
	ShiftBy Mode = "shift-by"
	// ToEarliest: the log start.
	ToEarliest Mode = "to-earliest"
	// ToLatest: the log end (skips everything not yet processed).
	ToLatest Mode = "to-latest"
)

// ReplaySpec says what to replay.
type ReplaySpec struct {
	// Group is the workers' consumer group.
	Group string `json:"group"`
	// Mode and its argument (Time, Duration or Offset).
	Mode     Mode          `json:"mode"`
	Time     time.Time     `json:"time,omitzero"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	Offset   int64         `json:"offset,omitempty"`
	// Partitions restricts the replay; empty means all.
	Partitions []int32 `json:"partitions,omitempty"`
	// Job restricts the replay to the job's partition and, with Rerun, the
	// cleared done markers to the job's windows.
	Job string `json:"job,omitempty"`
	// Rerun clears the done markers of the replayed windows.
	Rerun bool `json:"rerun"`
	// SkipUnsettled allows a replay that moves a partition forward past
	// windows that are not settled (ReplayPlan.Skip: never claimed,
	// failed and waiting for a retry, or running): they are settled as
	// skipped (dedupe.SkippedByReplay, shown as "skipped (replay)"), a
	// running attempt is cancelled after the workers' grace, and none of
	// them runs again. Without it Execute refuses such a plan
	// (ErrUnsettled).
	SkipUnsettled bool `json:"skip_unsettled,omitempty"`
}

// ReplayPartition is one partition's before/after.
type ReplayPartition struct {
	Partition int32 `json:"partition"`
	// Owner is the owning worker's id; empty if unassigned.
	Owner string `json:"owner"`
	// Before is the committed offset when the plan was made; -1 if none.
	Before int64 `json:"before"`
	// Target is the offset the partition is moved to.
	Target int64 `json:"target"`
	// Start and End bound the log.
	Start int64 `json:"log_start"`
	End   int64 `json:"log_end"`
	// Clamped says the requested offset was outside the log and moved to
	// its "earliest" or "latest" offset, as kafka-consumer-groups does.
	Clamped string `json:"clamped,omitempty"`
	// Replayed counts the records between Target and Before that are
	// delivered again: windows, read committed, so neither transaction
	// markers nor aborted records count.
	Replayed int64 `json:"replayed"`
	// ReplayedOffsets is Before - Target (0 when moving forward): the
	// offsets moved back, which on kjob's transactional topic include one
	// commit marker per producer transaction, so it is larger than
	// Replayed (about twice as large when each window was published in a
	// transaction of its own).
	ReplayedOffsets int64 `json:"replayed_offsets"`
	// Unsettled counts the windows of ReplayPlan.Skip on this partition:
	// not settled, between Before and a Target ahead of it.
	Unsettled int `json:"unsettled"`
	// Skipped counts, after Execute with SkipUnsettled, the windows
	// settled as skipped by the replay on this partition.
	Skipped int `json:"skipped"`
	// After is the committed offset after Execute; -1 if not known.
	After int64 `json:"after"`
	// AppliedBy is the worker that applied the seek, or "kadm" for a
	// direct commit of an empty group.
	AppliedBy string `json:"applied_by,omitempty"`
}

// ReplayPlan is what Execute will do.
type ReplayPlan struct {
	Spec  ReplaySpec `json:"spec"`
	Group string     `json:"group"`
	Topic string     `json:"topic"`
	// Online is true when the group has members: the seek goes through the
	// control topic to the owners.
	Online     bool              `json:"online"`
	State      string            `json:"state"`
	Partitions []ReplayPartition `json:"partitions"`
	// Rerun lists the windows whose done markers Execute clears (with
	// Spec.Rerun: every window in the replayed range, of Spec.Job only if
	// set).
	Rerun []string `json:"rerun"`
	// Retry lists, without Spec.Rerun, the windows in the replayed range
	// (of Spec.Job only if set) that failed or were dead-lettered when the
	// plan was made. Execute clears their records, if they are still in
	// that state, so the re-delivered records run again; windows that are
	// done are skipped when re-delivered. After Execute it lists the
	// windows actually cleared.
	Retry []RetryWindow `json:"retry"`
	// OtherJobs lists, with Job, the other jobs whose windows are in the
	// replayed range: they are re-delivered and skipped by dedupe.
	OtherJobs []string `json:"other_jobs,omitempty"`
	// Skip lists the windows a partition moved forward skips over that
	// were not settled when the plan was made (every job's: moving a
	// partition moves all of its jobs): never claimed (pending), failed
	// and waiting for a retry, or running. Execute refuses a plan that
	// lists any unless Spec.SkipUnsettled allows it; then they are settled
	// as skipped (replay) and never run.
	Skip []SkipWindow `json:"skip"`
}

// SkipWindow is a window that a replay forward moves past before it was
// settled.
type SkipWindow struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Job       string `json:"job"`
	ID        string `json:"id"`
	// State is SkipPending, dedupe.StatusFailed, dedupe.StatusRunning, or
	// SkipUnknown (no Store to read it).
	State string `json:"state"`
	// run holds what settling it records in the run history.
	run dedupe.Run
}

// SkipWindow states that are not a dedupe status.
const (
	// SkipPending: the window has no record: it was never claimed.
	SkipPending = "pending"
	// SkipUnknown: the Replayer has no Store to read the window's state.
	SkipUnknown = "unknown"
)

// RetryWindow is a failed or dead-lettered window a plain replay runs
// again.
type RetryWindow struct {
	ID string `json:"id"`
	// Status is dedupe.StatusFailed or dedupe.StatusDeadLettered.
	Status string `json:"status"`
}

// WindowStore is what a Replayer needs of the idempotency store;
// *dedupe.Store implements it.
type WindowStore interface {
	// States returns the records of ids that have one.
	States(ctx context.Context, ids []string) (map[string]dedupe.State, error)
	// ForgetAll deletes the records of ids.
	ForgetAll(ctx context.Context, ids []string) error
	// Settle applies settlements and records runs (a replay forward
	// settles the windows it skips with it, dedupe.SkipForReplayWith).
	Settle(ctx context.Context, ss []dedupe.Settlement, runs ...dedupe.Run) ([]dedupe.Result, error)
}

// ReplayerConfig configures a Replayer.
type ReplayerConfig struct {
	Brokers    []string
	ClientOpts []kgo.Opt
	// Topic is the windows topic. Default "kjob.windows"
	// (names.DefaultTopic).
	Topic string
	// ControlTopic defaults to Topic + ".control"
	// (names.Deployment.ControlTopic).
	ControlTopic string
	// ReplicationFactor of the control topic if it is created. Default 1.
	ReplicationFactor int16
	// Store reads window states (to find failed and dead-lettered windows
	// a plain replay runs again) and clears them. Required for Rerun;
	// without it a plain replay leaves failed and dead-lettered windows
	// settled.
	Store WindowStore
	// IssuedBy names the operator in requests.
	IssuedBy string
	// AckTimeout bounds the wait for workers' acks. Default 60s.
	AckTimeout time.Duration
	// Resend is how often unacknowledged partitions are re-sent. Default 3s.
	Resend time.Duration
	// Now is the clock for ByDuration. Default time.Now.
	Now func() time.Time
}

// Replayer plans and executes replays.
type Replayer struct {
	cfg ReplayerConfig
	cl  *kgo.Client
	adm *kadm.Client
}

// NewReplayer validates cfg (a setting it refuses is a *configerr.Error)
// and creates the Kafka client; Close it.
func NewReplayer(cfg ReplayerConfig) (*Replayer, error) {
	if len(cfg.Brokers) == 0 {
		return nil, &configerr.Error{Op: "operator", Field: "ReplayerConfig.Brokers", Reason: "is empty; set at least one seed broker"}
	}
	if cfg.Topic == "" {
		cfg.Topic = names.DefaultTopic
	}
	if cfg.ControlTopic == "" {
		cfg.ControlTopic = names.Deployment{Topic: cfg.Topic}.ControlTopic()
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = 1
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 60 * time.Second
	}
	if cfg.Resend == 0 {
		cfg.Resend = 3 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ProducerLinger(0)}, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("operator: kafka client: %w", err)
	}
	return &Replayer{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close releases the client.
func (r *Replayer) Close() { r.cl.Close() }

type groupView struct {
	state     string
	members   int
	owner     map[int32]string
	committed map[int32]int64
}

func (r *Replayer) describe(ctx context.Context, group string) (*groupView, error) {
	dg, err := r.adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describe group %s: %w", group, err)
	}
	d := dg[group]
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("describe group %s: %w", group, d.Err)
	}
	v := &groupView{state: d.State, members: len(d.Members), owner: map[int32]string{}, committed: map[int32]int64{}}
	for _, m := range d.Members {
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				if t.Topic == r.cfg.Topic {
					for _, p := range t.Partitions {
						v.owner[p] = m.ClientID
					}
				}
			}
		}
	}
	offs, err := r.adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("fetch offsets of %s: %w", group, err)
	}
	for p, o := range offs[r.cfg.Topic] {
		if o.Err == nil && o.At >= 0 {
			v.committed[p] = o.At
		}
	}
	return v, nil
}

// specError is the *configerr.Error of a ReplaySpec field Plan refuses;
// it matches sentinel (ErrInvalidSpec, ErrNoPartition), whose words the
// reason includes.
func specError(field string, value any, reason string, sentinel error, related ...string) error {
	return &configerr.Error{Op: "replay", Field: field, Value: value, Reason: reason, Related: related, Err: sentinel}
}

// Plan computes target offsets and, for Rerun, the windows to clear. It
// changes nothing. A spec it refuses is a *configerr.Error naming the
// ReplaySpec field (matching ErrInvalidSpec, or ErrNoPartition for a
// partition the topic lacks).
func (r *Replayer) Plan(ctx context.Context, spec ReplaySpec) (*ReplayPlan, error) {
	if spec.Group == "" {
		return nil, specError("ReplaySpec.Group", nil, fmt.Sprintf("is empty; name the workers' consumer group, e.g. kjob-workers: %v", ErrInvalidSpec), ErrInvalidSpec)
	}
	switch spec.Mode {
	case ToDatetime, ByDuration, ToOffset, ShiftBy, ToEarliest, ToLatest:
	default:
		return nil, specError("ReplaySpec.Mode", string(spec.Mode), fmt.Sprintf(": want one of to-datetime, by-duration, to-offset, shift-by, to-earliest, to-latest: %v", ErrInvalidSpec), ErrInvalidSpec)
	}
	td, err := r.adm.ListTopics(ctx, r.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("replay: list topic %s: %w", r.cfg.Topic, err)
	}
	t, ok := td[r.cfg.Topic]
	if !ok || t.Err != nil {
		return nil, fmt.Errorf("replay: %s: %w", r.cfg.Topic, ErrNoTopic)
	}
	n := int32(len(t.Partitions))
	parts := slices.Clone(spec.Partitions)
	for _, p := range parts {
		if p < 0 || p >= n {
			return nil, specError("ReplaySpec.Partitions", p, fmt.Sprintf(": %v: topic %s has partitions 0-%d", ErrNoPartition, r.cfg.Topic, n-1), ErrNoPartition)
		}
	}
	if spec.Job != "" {
		jp := names.JobPartition(spec.Job, int(n))
		if len(parts) > 0 && !slices.Contains(parts, jp) {
			return nil, specError("ReplaySpec.Job", spec.Job, fmt.Sprintf(": its windows are on partition %d, not on ReplaySpec.Partitions %v: %v", jp, parts, ErrInvalidSpec),
				ErrInvalidSpec, "ReplaySpec.Partitions")
		}
		parts = []int32{jp}
	}
	if len(parts) == 0 {
		for p := range n {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)

	g, err := r.describe(ctx, spec.Group)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if g.members == 0 && len(g.committed) == 0 {
		return nil, fmt.Errorf("replay: group %q: %w (no members, no committed offsets on %s)", spec.Group, ErrNoGroup, r.cfg.Topic)
	}
	plan := &ReplayPlan{Spec: spec, Group: spec.Group, Topic: r.cfg.Topic, Online: g.members > 0, State: g.state, Rerun: []string{}, Retry: []RetryWindow{}, Skip: []SkipWindow{}}
	if plan.Online && g.state != "Stable" {
		return nil, fmt.Errorf("replay: group %q: %w (state %s); run the command again in a few seconds", spec.Group, ErrRebalancing, g.state)
	}
	starts, err := r.adm.ListStartOffsets(ctx, r.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("replay: log start offsets: %w", err)
	}
	ends, err := r.adm.ListEndOffsets(ctx, r.cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("replay: log end offsets: %w", err)
	}
	var byTime kadm.ListedOffsets
	switch spec.Mode {
	case ToDatetime, ByDuration:
		at := spec.Time
		if spec.Mode == ByDuration {
			at = r.cfg.Now().Add(-spec.Duration)
		}
		if byTime, err = r.adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), r.cfg.Topic); err != nil {
			return nil, fmt.Errorf("replay: offsets by time: %w", err)
		}
	}
	others := map[string]bool{}
	seen := map[string]bool{}
	var pending []string // ids whose state a plain replay checks, in batches
	checkPending := func() error {
		if len(pending) == 0 {
			return nil
		}
		sts, err := r.cfg.Store.States(ctx, pending)
		if err != nil {
			return fmt.Errorf("replay: read the states of the replayed windows: %w", err)
		}
		for _, id := range pending {
			if st, ok := sts[id]; ok && (st.Status == dedupe.StatusFailed || st.Status == dedupe.StatusDeadLettered) {
				plan.Retry = append(plan.Retry, RetryWindow{ID: id, Status: st.Status})
			}
		}
		pending = pending[:0]
		return nil
	}
	for _, p := range parts {
		st, _ := starts.Lookup(r.cfg.Topic, p)
		en, _ := ends.Lookup(r.cfg.Topic, p)
		rp := ReplayPartition{Partition: p, Owner: g.owner[p], Before: -1, Start: st.Offset, End: en.Offset, After: -1}
		cur, has := g.committed[p]
		if has {
			rp.Before = cur
		} else {
			cur = st.Offset // the workers start a partition without commits at its beginning
		}
		if plan.Online && rp.Owner == "" {
			return nil, fmt.Errorf("replay: partition %d has no owner in group %q: %w; run the command again in a few seconds", p, spec.Group, ErrRebalancing)
		}
		var want int64
		switch spec.Mode {
		case ToDatetime, ByDuration:
			o, ok := byTime.Lookup(r.cfg.Topic, p)
			if !ok || o.Err != nil || o.Offset < 0 {
				want = en.Offset
			} else {
				want = o.Offset
			}
		case ToOffset:
			want = spec.Offset
		case ShiftBy:
			want = cur + spec.Offset
		case ToEarliest:
			want = st.Offset
		case ToLatest:
			want = en.Offset
		}
		switch {
		case want < st.Offset:
			want, rp.Clamped = st.Offset, "earliest"
		case want > en.Offset:
			want, rp.Clamped = en.Offset, "latest"
		}
		rp.Target = want
		if want < cur {
			rp.ReplayedOffsets = cur - want
			// Read the replayed range (streaming: only ids are kept) to
			// count its windows and find those to run again.
			err := kread.Each(ctx, r.opts(), r.cfg.Topic, p, want, cur, func(rec *kgo.Record) error {
				rp.Replayed++
				m, err := jobmsg.FromRecord(rec)
				if err != nil {
					return nil // an undecodable record is dead-lettered again, nothing to clear
				}
				if spec.Job != "" && m.Job != spec.Job {
					others[m.Job] = true
					return nil
				}
				if seen[m.ID] {
					return nil
				}
				seen[m.ID] = true
				switch {
				case spec.Rerun:
					plan.Rerun = append(plan.Rerun, m.ID)
				case r.cfg.Store != nil:
					if pending = append(pending, m.ID); len(pending) >= stateBatch {
						return checkPending()
					}
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("replay: read the replayed windows: %w", err)
			}
		}
		if want > cur {
			skip, err := r.unsettled(ctx, p, cur, want)
			if err != nil {
				return nil, err
			}
			rp.Unsettled = len(skip)
			plan.Skip = append(plan.Skip, skip...)
		}
		plan.Partitions = append(plan.Partitions, rp)
	}
	if err := checkPending(); err != nil {
		return nil, err
	}
	for j := range others {
		plan.OtherJobs = append(plan.OtherJobs, j)
	}
	sort.Strings(plan.OtherJobs)
	if spec.Rerun && r.cfg.Store == nil && len(plan.Rerun) > 0 {
		return nil, &configerr.Error{Op: "replay", Field: "ReplaySpec.Rerun", Value: true,
			Reason: "needs ReplayerConfig.Store to clear done markers; set it (a *dedupe.Store)", Related: []string{"ReplayerConfig.Store"}}
	}
	return plan, nil
}

// stateBatch is how many window ids Plan looks up in one States call.
const stateBatch = 5000

// unsettled returns the windows of partition p at offsets [from, to),
// which a replay forward moves past, that are not settled now (every
// window, as SkipUnknown, without a Store).
func (r *Replayer) unsettled(ctx context.Context, p int32, from, to int64) ([]SkipWindow, error) {
	var ws []SkipWindow
	seen := map[string]bool{}
	err := kread.Each(ctx, r.opts(), r.cfg.Topic, p, from, to, func(rec *kgo.Record) error {
		m, err := jobmsg.FromRecord(rec)
		if err != nil || seen[m.ID] {
			return nil // not a window: dead-lettered, nothing to settle
		}
		seen[m.ID] = true
		ws = append(ws, SkipWindow{Partition: p, Offset: rec.Offset, Job: m.Job, ID: m.ID, State: SkipUnknown,
			run: dedupe.Run{WindowID: m.ID, Job: m.Job, Trigger: string(m.Trigger), WindowStart: m.Window.Start, ScheduleVersion: m.ScheduleVersion}})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay: read the windows skipped over: %w", err)
	}
	if r.cfg.Store == nil {
		return ws, nil
	}
	out := ws[:0]
	for i := 0; i < len(ws); i += stateBatch {
		chunk := ws[i:min(len(ws), i+stateBatch)]
		ids := make([]string, len(chunk))
		for k, w := range chunk {
			ids[k] = w.ID
		}
		sts, err := r.cfg.Store.States(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("replay: read the states of the windows skipped over: %w", err)
		}
		for _, w := range chunk {
			st, ok := sts[w.ID]
			switch {
			case !ok:
				w.State = SkipPending
			case dedupe.Settled(st.Status):
				continue
			default:
				w.State = st.Status
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// unsettledError is Execute's refusal of a plan that skips unsettled
// windows without SkipUnsettled.
func unsettledError(plan *ReplayPlan) error {
	w := plan.Skip[0]
	return &configerr.Error{Op: "replay", Field: "ReplaySpec.SkipUnsettled", Value: false,
		Reason: fmt.Sprintf(": the target is ahead of the committed offset past %d windows that are not settled (first: %s, %s, on partition %d); "+
			"they would never be delivered again. Set it to settle them as skipped (replay) and never run them, or replay to an offset at or before the committed one: %v",
			len(plan.Skip), w.ID, w.State, w.Partition, ErrUnsettled),
		Err: ErrUnsettled}
}
func (r *Replayer) opts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...)}, r.cfg.ClientOpts...)
}

// Execute carries out plan: it clears the Rerun windows' records (done
// markers), and the records of the Retry windows still failed or
// dead-lettered, then moves each partition, through its owner when the
// group has members (waiting for the acks, re-sending to new owners after
// a rebalance) or by a direct commit when it has none, and fills in After
// and AppliedBy.
func (r *Replayer) Execute(ctx context.Context, plan *ReplayPlan) error {
	if len(plan.Skip) > 0 && !plan.Spec.SkipUnsettled {
		return unsettledError(plan)
	}
	if len(plan.Skip) > 0 && r.cfg.Store == nil {
		return &configerr.Error{Op: "replay", Field: "ReplaySpec.SkipUnsettled", Value: true,
			Reason: "needs ReplayerConfig.Store to settle the windows it skips; set it (a *dedupe.Store)", Related: []string{"ReplayerConfig.Store"}}
	}
	if len(plan.Rerun) > 0 {
		if err := r.cfg.Store.ForgetAll(ctx, plan.Rerun); err != nil {
			return fmt.Errorf("replay: clear done markers: %w (nothing was replayed; some markers may be cleared already: run it again)", err)
		}
	}
	if len(plan.Retry) > 0 {
		// A failed window may have been retried and completed since the
		// plan was made: clear only those still failed or dead-lettered.
		ids := make([]string, len(plan.Retry))
		for i, w := range plan.Retry {
			ids[i] = w.ID
		}
		sts, err := r.cfg.Store.States(ctx, ids)
		if err != nil {
			return fmt.Errorf("replay: read the states of the failed windows: %w (nothing was changed)", err)
		}
		still := plan.Retry[:0]
		ids = ids[:0]
		for _, w := range plan.Retry {
			if st, ok := sts[w.ID]; ok && (st.Status == dedupe.StatusFailed || st.Status == dedupe.StatusDeadLettered) {
				still = append(still, RetryWindow{ID: w.ID, Status: st.Status})
				ids = append(ids, w.ID)
			}
		}
		plan.Retry = still
		if err := r.cfg.Store.ForgetAll(ctx, ids); err != nil {
			return fmt.Errorf("replay: clear the records of failed windows: %w (nothing was replayed; run it again)", err)
		}
	}
	remaining := map[int32]int64{}
	for _, p := range plan.Partitions {
		remaining[p.Partition] = p.Target
	}
	applied := map[int32]string{}
	deadline := time.Now().Add(r.cfg.AckTimeout)
	var watch *kgo.Client
	defer func() {
		if watch != nil {
			watch.Close()
		}
	}()
	// One request id for the whole replay: re-sending it (to partitions
	// not acknowledged yet) never makes an owner apply it twice.
	reqID := newID()
	sent := []string{reqID}
	skipped := map[int32]int{}
	from := map[int32]int64{}
	for _, p := range plan.Partitions {
		if p.Target > p.Before && p.Before >= 0 {
			from[p.Partition] = p.Before
		} else if p.Before < 0 && p.Target > p.Start {
			from[p.Partition] = p.Start
		}
	}
	for len(remaining) > 0 {
		g, err := r.describe(ctx, plan.Group)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if g.members == 0 {
			if plan.Spec.SkipUnsettled {
				// No worker runs: settle what the commit moves past here.
				if err := r.skipOffline(ctx, plan, remaining, skipped); err != nil {
					return err
				}
			}
			if err := r.commitDirect(ctx, plan.Group, remaining); err != nil {
				return err
			}
			for p := range remaining {
				applied[p] = "kadm"
			}
			break
		}
		if watch == nil {
			if watch, err = r.startWatch(ctx); err != nil {
				return err
			}
		}
		req := &control.SeekRequest{ID: reqID, Group: plan.Group, Topic: r.cfg.Topic, Offsets: remaining, IssuedBy: r.cfg.IssuedBy, IssuedAt: r.cfg.Now().UTC()}
		if plan.Spec.SkipUnsettled {
			req.SkipUnsettled, req.From = true, from
		}
		rec, err := req.Record(r.cfg.ControlTopic)
		if err != nil {
			return err
		}
		if err := r.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return fmt.Errorf("replay: write seek request to %s: %w", r.cfg.ControlTopic, err)
		}
		wait := min(r.cfg.Resend, time.Until(deadline))
		if err := r.collect(ctx, watch, sent, remaining, applied, skipped, wait); err != nil {
			return err
		}
		if len(remaining) > 0 && time.Now().After(deadline) {
			var ps []string
			for p := range remaining {
				ps = append(ps, fmt.Sprint(p))
			}
			sort.Strings(ps)
			return fmt.Errorf("replay: %w by any worker within %v for partitions %s; are the workers running a kjob with the control agent? %s",
				ErrNotAcknowledged, r.cfg.AckTimeout, strings.Join(ps, ","), clearedNote(plan))
		}
		remaining = copyOffsets(remaining)
	}
	g, err := r.describe(ctx, plan.Group)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	for i := range plan.Partitions {
		p := &plan.Partitions[i]
		p.AppliedBy = applied[p.Partition]
		p.Skipped = skipped[p.Partition]
		if c, ok := g.committed[p.Partition]; ok {
			p.After = c
		}
	}
	return nil
}

// clearedNote says what an Execute that failed after clearing records
// left behind.
func clearedNote(plan *ReplayPlan) string {
	n := len(plan.Rerun) + len(plan.Retry)
	if n == 0 {
		return "(nothing was changed on those partitions)"
	}
	return fmt.Sprintf("(nothing was rolled back: the records of %d windows in the replayed range were already cleared, so they run again "+
		"when re-delivered, but the offsets of those partitions did not move; run the replay again once the workers answer)", n)
}

func copyOffsets(m map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// skipOffline settles, for an empty group, the unsettled windows of the
// partitions in offs that the direct commit moves past: those of the plan,
// looked at again (they may have been settled since).
func (r *Replayer) skipOffline(ctx context.Context, plan *ReplayPlan, offs map[int32]int64, skipped map[int32]int) error {
	var runs []dedupe.Run
	part := map[string]int32{}
	for _, w := range plan.Skip {
		if _, ok := offs[w.Partition]; ok {
			run := w.run
			if run.WindowID == "" { // a plan decoded from JSON
				run = dedupe.Run{WindowID: w.ID, Job: w.Job}
			}
			runs = append(runs, run)
			part[w.ID] = w.Partition
		}
	}
	by := r.cfg.IssuedBy
	if by == "" {
		by = "kjobctl replay"
	}
	res, err := dedupe.SkipForReplayWith(ctx, r.cfg.Store.Settle, runs, dedupe.ReplaySkipReason("a direct commit of the empty group "+plan.Group+" by "+by), by)
	for _, id := range res.Skipped {
		skipped[part[id]]++
	}
	if err != nil {
		return fmt.Errorf("replay: settle the windows skipped over: %w (nothing was committed; run it again)", err)
	}
	if len(res.Busy) > 0 {
		return fmt.Errorf("replay: %d windows skipped over are held by a live claim although no worker is in group %s (first %s): "+
			"a worker of another group runs them, or one just left; nothing was committed: run it again after the store's claim TTL", len(res.Busy), plan.Group, res.Busy[0])
	}
	return nil
}

func (r *Replayer) commitDirect(ctx context.Context, group string, offs map[int32]int64) error {
	os := kadm.Offsets{}
	for p, o := range offs {
		os.Add(kadm.Offset{Topic: r.cfg.Topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := r.adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("replay: commit offsets of empty group %s: %w (if workers joined meanwhile, run the command again)", group, err)
	}
	return nil
}

// startWatch creates the control topic if needed and a consumer of it
// starting at its current end, so it sees every ack of requests written
// after it.
func (r *Replayer) startWatch(ctx context.Context) (*kgo.Client, error) {
	if err := control.EnsureTopic(ctx, r.adm, r.cfg.ControlTopic, r.cfg.ReplicationFactor); err != nil {
		return nil, fmt.Errorf("replay: control topic: %w", err)
	}
	ends, err := r.adm.ListEndOffsets(ctx, r.cfg.ControlTopic)
	if err != nil {
		return nil, fmt.Errorf("replay: control topic end: %w", err)
	}
	e, _ := ends.Lookup(r.cfg.ControlTopic, 0)
	return kgo.NewClient(append(r.opts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.ControlTopic: {0: kgo.NewOffset().At(e.Offset)}}))...)
}

// collect reads acks for any of the sent requests for up to wait.
func (r *Replayer) collect(ctx context.Context, watch *kgo.Client, sent []string, remaining map[int32]int64, applied map[int32]string, skipped map[int32]int, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	for len(remaining) > 0 {
		fs := watch.PollFetches(wctx)
		if wctx.Err() != nil {
			return ctx.Err()
		}
		var ackErr error
		fs.EachRecord(func(rec *kgo.Record) {
			if control.Kind(rec) != control.KindSeekAck {
				return
			}
			a, err := control.ParseSeekAck(rec)
			if err != nil || !slices.Contains(sent, a.RequestID) {
				return
			}
			if a.Error != "" {
				ackErr = fmt.Errorf("replay: worker %s could not move partition %d to %d: %s", a.Member, a.Partition, a.Offset, a.Error)
				return
			}
			if want, ok := remaining[a.Partition]; ok && want == a.Offset {
				delete(remaining, a.Partition)
				applied[a.Partition] = a.Member
				skipped[a.Partition] = a.Skipped
			}
		})
		if ackErr != nil {
			return ackErr
		}
	}
	return nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
