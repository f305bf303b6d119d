// Package chaos judges a chaos run of kjob: Check is a pure function over
// what a run left behind (the test's independent ledger of handler
// invocations, the windows topic read-committed, the workers' reported
// completions and skips, and the idempotency store's final state) that
// lists every breach of kjob's guarantees. It holds no I/O, so hand-made
// histories test it (check_test.go) and the multi-process chaos test in
// test/ feeds it real ones.
//
// The rules, as numbered in the project's chaos issue:
//
//	(a) every window due during the run is published exactly once; a
//	    window not published is explained only by the catch-up limit;
//	    and a window due while the producers' lease store was down
//	    (History.LeaseStoreOutages) only by the longer of the catch-up
//	    limit and LeaseOutageCatchup: no replica can lead then, and the
//	    one that wins the lease after the outage publishes its windows.
//	    For a job with spec changes (History.SpecChanges) the windows due
//	    are those of the version in force at each start: version V's
//	    schedule's starts in (EffectiveFrom of V, EffectiveFrom of the
//	    next version] (a delete's: its commit plus History.PublishLead,
//	    as in rule (p)); none while a delete, pause or enabled: false is
//	    in force. A window that both sides of a change call for is judged
//	    by rule (q) instead;
//	(b) no window completes twice;
//	(c) a window runs again only after an attempt that did not complete,
//	    and the re-run carries a strictly higher fencing token;
//	(d) a zombie producer's records never become visible (producer epochs
//	    never go back within a partition) and a zombie worker's completion
//	    is rejected (only the window's latest token completes it);
//	(e) once faults stop, the group's lag is 0 and every published window
//	    is settled: done (or dead-lettered), no claim left running; or,
//	    for a job whose overlap policy allows it, skipped (skip, latest)
//	    or superseded (replace), which needs no handler invocation. A
//	    window skipped or superseded under any other policy is not
//	    settled.
//
// and, per job, by its overlap policy (Job.Overlap):
//
//	(f) queue: a job's window k+1 never starts before window k is
//	    settled. The job's published windows are ordered by start; a
//	    window is settled when the attempt whose token settled it ended:
//	    the ledger attempt with the store's token of a done window (its
//	    completing attempt), or of a dead-lettered window (else the latest
//	    End of its attempts). Every attempt of a later window (any
//	    worker, any token, zombies included) must start at or after the
//	    settling of every earlier window, and none may start while an
//	    earlier window was never settled (a skipped or superseded window
//	    counts as settled here; rules (e) and (g) judge it). A zombie
//	    attempt of window k itself may still run after that: only the
//	    settling attempt counts.
//	(g) skip and latest: each window is completed at most once or
//	    recorded as skipped exactly once, with its reason: a window whose
//	    store status is "skipped" (terminal: recorded once) has no
//	    completion, a non-empty reason and at most one Skip reported for
//	    it (a worker killed between its store write and its log line
//	    reports none; one reporting twice is a violation), and (skip) an earlier or
//	    (latest) a newer window of the job exists that it was skipped
//	    for; a Skip reported for a window whose final status is not
//	    "skipped" is two outcomes; a superseded window is not theirs. A
//	    window of a queue or allow job is never skipped or superseded.
//	(h) replace: a superseded window is never completed after its
//	    successor started: the attempt that completed a done window
//	    ended at or before the first attempt of every later window of
//	    the job began; a window whose store status is "superseded" has
//	    no completion, a non-empty reason, at most one Skip (status
//	    "superseded", none of another status) reported for it and a newer window of the job that
//	    superseded it. A replace job's windows are never "skipped".
//	(i) queue: a job's fencing tokens grow in window order: every attempt
//	    of a window carries a token above the one that settled (done or
//	    dead-lettered) each earlier window of the job, since a window is
//	    claimed only once the one before it is settled.
//	(k) allow with a max_concurrent (Job.MaxConcurrent > 0): no worker
//	    ever runs more than MaxConcurrent attempts of the job at once. An
//	    attempt runs from its Start to its End on its Worker; one ending
//	    as another starts has freed its slot. An attempt that never ended
//	    (its worker died mid-request) is not counted: its slot died with
//	    the worker.
//
// for operators' replays forward:
//
//	(j) a window skipped by a replay (StatusSkippedReplay) is settled for
//	    good, whatever its job's policy: it has no completion, no attempt
//	    starts after the replay skipped it (History.ReplaySkips), and a
//	    window reported skipped by a replay ends in that status. Rule (e)
//	    counts it settled, not lost.
//
// and, for deployments sharing a Kafka cluster:
//
//	(m) no window is executed by a worker of another namespace: an
//	    attempt whose worker's namespace is known (Attempt.Namespace) of a
//	    window whose record names its namespace (Record.Namespace) has the
//	    same namespace. Either left empty is not judged.
//
// and across the idempotency store's losses (History.StoreLosses):
//
//	(l) a job's fencing tokens never go back across a store loss: every
//	    attempt of a job that started after the store came back carries a
//	    token above every token of the job's attempts that started before
//	    it went down (the store epoch, internal/store/storeepoch), zombies included.
//
// and, for a job whose max_attempts is given (Job.MaxAttempts):
//
//	(n) a window's handler is invoked at most max_attempts times, counted
//	    by distinct fencing tokens in the ledger: every attempt counts,
//	    also one cut off (a worker killed, a partition revoked or lost),
//	    so a window whose attempts keep being interrupted ends
//	    dead-lettered instead of running again and again.
//
// and, for schedules changed at runtime (History.SpecChanges: the
// schedule change log, each change's version, commit time, EffectiveFrom
// and schedule; judged for the jobs that have changes):
//
//	(o) every window was produced by a spec version committed before its
//	    publication: its record carries a ScheduleVersion V, the change
//	    log committed V for its job at or before the record's
//	    PublishedAt, V does not stop the job (delete, pause, enabled:
//	    false), and V was the version in force at the window's start:
//	    the start is strictly after V's EffectiveFrom (unless V was
//	    imported with no bound, EffectiveFrom zero) and at or before the
//	    EffectiveFrom of the job's next version (else a stale version
//	    produced it).
//	(p) no window of a deleted, paused or disabled job is published for a
//	    start after the delete, pause or disable took effect
//	    (EffectiveFrom, the commit plus the producers' publish lead;
//	    Committed + History.PublishLead for a delete, whose tombstone
//	    carries no record), until a later change re-creates, resumes or
//	    enables it; windows due at or before that instant were published
//	    ahead or flushed by the change's transaction, and stand. A resumed
//	    job does not catch up the paused windows: rule (a) expects none of
//	    them.
//	(q) across a change, no window is published twice: a window id
//	    published under two versions is a violation (rule (a) also counts
//	    its records); a version never takes effect before the one it
//	    follows; and a window start that both the old and the new version
//	    call for (on both schedules, in the old version's span or the
//	    new one's), due during the run, is published, explained only by
//	    the catch-up limit and lease outages as in rule (a), where a
//	    change's commit also shows a leader acted for the job.
//
// and, for windows published ahead of their start (History.PublishLead):
//
//	(r) no handler attempt starts before its window's start: every
//	    attempt in the ledger of a window whose published record is known
//	    starts at or after the record's Start (no tolerance: the ledger
//	    and the workers share the machine's clock). A worker holds a
//	    window published ahead, may claim it early, and starts its
//	    handler only at its start.
//	(s) no window is published more than History.PublishLead before its
//	    start: every record's PublishedAt is at or after its Start minus
//	    PublishLead minus 1ms of slack. A record without PublishedAt is
//	    not judged.
//
// Check refuses to judge incomplete input: an empty ledger, a topic not
// read to its end, a published window whose store state was not read, an
// unknown final lag, a job whose overlap policy is not one of the five, a
// published window of a job not in History.Jobs, skipped windows in the
// store but no skip collected, a spec change whose schedule does not
// parse, a job missing from a non-empty change log, window records none
// of which carries a schedule version, ... make it return an error wrapping
// ErrIncomplete that names what is missing, so a run that collected
// nothing cannot pass vacuously.
package chaos

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// ErrIncomplete is wrapped by Check's error when the history lacks
// something the rules need; the error names what.
var ErrIncomplete = errors.New("chaos: incomplete history")

// StatusAbsent is the State.Status of a window the idempotency store has no
// record of (it was never claimed). A published window must have a State,
// absent or not: a missing entry means its state was not read.
const StatusAbsent = "absent"

// Store statuses Check gives a meaning to; any other status (such as
// "running" or "failed") is a window not settled.
const (
	// StatusDone is a completed window.
	StatusDone = "done"
	// StatusDeadLettered is a window the workers dead-lettered; rule (e)
	// wants its record in the dead-letter topic too (History.DeadLettered).
	StatusDeadLettered = "dead"
	// StatusSkipped is a window the workers settled without running it
	// because of its job's overlap policy: skip (the previous window still
	// ran) or latest (a newer window was waiting too).
	StatusSkipped = "skipped"
	// StatusSuperseded is a window of a replace job that a newer window
	// cancelled, or dropped before it started.
	StatusSuperseded = "superseded"
)

// The overlap policies a Job may have (Job.Overlap); "" means
// OverlapQueue. They are the schedules file's values.
const (
	OverlapQueue   = "queue"
	OverlapSkip    = "skip"
	OverlapLatest  = "latest"
	OverlapReplace = "replace"
	OverlapAllow   = "allow"
)

// Job describes one scheduled job of the run: an interval schedule, or,
// for a job with History.SpecChanges, the schedules of its versions.
type Job struct {
	// Name is the job name.
	Name string
	// Every is the interval between window starts; unused (may be 0) for
	// a job with SpecChanges, whose versions give its schedules.
	Every time.Duration
	// Catchup is the job's catch-up limit: a window that fell due while no
	// leader was live is published late only if it is younger than this.
	Catchup time.Duration
	// Overlap is the job's overlap policy: "queue" (the default when
	// empty), "skip", "latest", "replace" or "allow".
	Overlap string
	// MaxConcurrent is the schedules file's max_concurrent of an allow
	// job: rule (k) checks that no worker ran more of its windows at
	// once. 0: not checked (the worker's default bound depends on its
	// concurrency).
	MaxConcurrent int
	// MaxAttempts is the job's max_attempts, for rule (n); 0 leaves the
	// rule out for the job.
	MaxAttempts int
}

// policy returns j's overlap policy, OverlapQueue when unset.
func (j Job) policy() string {
	if j.Overlap == "" {
		return OverlapQueue
	}
	return j.Overlap
}

// validOverlap reports whether o is a Job.Overlap Check knows.
func validOverlap(o string) bool {
	switch o {
	case "", OverlapQueue, OverlapSkip, OverlapLatest, OverlapReplace, OverlapAllow:
		return true
	}
	return false
}

// settledStatus is the store status a job's policy may settle a window
// with instead of running it ("" for queue and allow: none).
func settledStatus(policy string) string {
	switch policy {
	case OverlapSkip, OverlapLatest:
		return StatusSkipped
	case OverlapReplace:
		return StatusSuperseded
	}
	return ""
}

// Record is one window record read from the windows topic (read-committed).
type Record struct {
	// Window is the window id; Job its job.
	Window, Job string
	// Start is the window's start.
	Start time.Time
	// PublishedAt is when the producer says it published it.
	PublishedAt time.Time
	// Partition and Offset locate the record.
	Partition int32
	// Offset is the record's offset.
	Offset int64
	// ProducerID and ProducerEpoch are the record batch's transactional
	// producer id and epoch.
	ProducerID int64
	// ProducerEpoch is the fencing epoch of the transactional producer.
	ProducerEpoch int16
	// Namespace is the namespace the record carries (rule (m)); empty if
	// unknown.
	Namespace string
	// ScheduleVersion is the version of the job's spec that produced the
	// window (the record's schedule_version; rules (o) to (q)); 0 if the
	// record carries none. Judged only for a job with SpecChanges.
	ScheduleVersion int64
}

// Attempt is one handler invocation as the independent ledger saw it.
type Attempt struct {
	// Window is the window id; Job its job.
	Window, Job string
	// Token is the fencing token the handler was given.
	Token int64
	// Worker is the worker that ran it.
	Worker string
	// Start and End bound the invocation; End is zero if it never ended
	// (the worker died mid-request).
	Start, End time.Time
	// OK reports whether the handler's request was answered (the handler
	// could succeed); false for an invocation cut off.
	OK bool
	// Namespace is the namespace of the worker that ran it (rule (m));
	// empty if unknown.
	Namespace string
}

// Completion is a successful compare-and-set Complete a worker reported.
type Completion struct {
	// Window is the window id.
	Window string
	// Token is the completing token.
	Token int64
	// Worker is the worker that completed it.
	Worker string
}

// State is a window's final record in the idempotency store.
type State struct {
	// Status is "done", "running", "failed", "dead", "skipped",
	// "superseded", another store status, or StatusAbsent if the store has
	// no record of the window.
	Status string
	// Token is the latest token that claimed the window.
	Token int64
	// ClaimLive reports whether a claim on it is still live.
	ClaimLive bool
	// Reason is the store's reason for a window settled without running
	// (StatusSkipped, StatusSuperseded): the store's last error.
	Reason string
}

// Skip is a window a worker reported settling without completing it,
// because of its job's overlap policy (the worker's "window skipped" log
// line).
type Skip struct {
	// Window is the window id.
	Window string
	// Worker is the worker that settled it.
	Worker string
	// Status is StatusSkipped or StatusSuperseded.
	Status string
	// Reason is the reason the worker gave.
	Reason string
}

// LeaseOutageCatchup is how late the producer still publishes a window
// that fell due while its lease store was unreachable (its retry
// horizon, internal/exec/producer): a window due during a lease store outage is
// explained by the catch-up limit only if it is older than the longer of
// this and its job's Catchup when a leader publishes again.
const LeaseOutageCatchup = time.Minute

// Interval is a span of time of a run, From to To inclusive.
type Interval struct {
	From, To time.Time
}

// History is everything Check looks at.
type History struct {
	// Jobs are the run's jobs. Each job's history starts with its first
	// published window (kjob does not invent history).
	Jobs []Job
	// DueUntil bounds the run: windows starting before it were due.
	DueUntil time.Time
	// Published is the windows topic, read-committed, in any order.
	Published []Record
	// Partitions is the windows topic's partition count.
	Partitions int
	// TopicEnds are the topic's end offsets per partition when it was
	// read, and TopicReadTo the offset the reader got to (one past the
	// last record or transaction marker it consumed). Every partition must
	// have been read to its end.
	TopicEnds, TopicReadTo map[int32]int64
	// DeadLettered holds the window ids found in the dead-letter topic.
	DeadLettered map[string]bool
	// Attempts is the ledger.
	Attempts []Attempt
	// Completions are the completions workers reported.
	Completions []Completion
	// Skips are the windows workers reported settling as skipped or
	// superseded.
	Skips []Skip
	// ReplaySkips are the windows reported settled as skipped by an
	// operator's replay (rule (j)).
	ReplaySkips []ReplaySkip
	// States is the store's final state of every published window
	// (StatusAbsent for one it has no record of) and of any other window
	// the caller read.
	States map[string]State
	// FinalLag is the consumer group's total lag after faults stopped and
	// the run drained; negative if it could not be read.
	FinalLag int64
	// LeaseStoreOutages are the times the producers' lease store (Redis)
	// was down, as the run injected them (rule (a)); none if empty.
	LeaseStoreOutages []Interval
	// StoreLosses are the times the store was down and may have lost
	// data (rule (l)); none if it never was.
	StoreLosses []StoreLoss
	// SpecChanges are the committed changes of the jobs' specs, read
	// committed from the schedule change log, in any order (rules (o) to
	// (q)). A job with changes is judged by its versions: rule (a) expects
	// the windows of the version in force at each start, and its
	// Job.Every is not used. Empty: every job is judged by Job.Every, as
	// when schedules were a file. With changes, every job of Jobs must
	// have at least one (its creation or import). A job's catch-up limit
	// and overlap policy stay its Job's for every version.
	SpecChanges []SpecChange
	// PublishLead is the producers' Config.PublishLead in the run (the
	// lead they ran with: producer.DefaultPublishLead when they were
	// given none): windows may be published up to this long before their
	// start (rule (s)), and a delete, or a change without EffectiveFrom,
	// committed at T takes effect at T + PublishLead (rules (a), (o), (p),
	// (q)). 0: every window is published at or after its start. Negative
	// is refused.
	PublishLead time.Duration
}

// Violation is one breach of a rule.
type Violation struct {
	// Rule is a letter, "a" to "s".
	Rule string
	// Window is the window concerned, if any.
	Window string
	// Detail says what happened.
	Detail string
}

func (v Violation) String() string {
	if v.Window == "" {
		return fmt.Sprintf("(%s) %s", v.Rule, v.Detail)
	}
	return fmt.Sprintf("(%s) %s: %s", v.Rule, v.Window, v.Detail)
}

// Check returns every violation of rules (a) to (s) in h, ordered by rule
// then window. No violation and a nil error mean the run kept every
// guarantee. If h lacks what the rules need, Check judges nothing and
// returns an error wrapping ErrIncomplete that says what is missing.
func Check(h History) ([]Violation, error) {
	if err := complete(h); err != nil {
		return nil, err
	}
	var out []Violation
	add := func(rule, window, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Window: window, Detail: fmt.Sprintf(format, args...)})
	}
	tls := timelines(h)
	checkPublished(h, tls, add)
	checkVersions(h, tls, add)
	checkStopped(tls, add)
	checkAcrossChanges(h, tls, add)
	checkRuns(h, add)
	checkZombieProducers(h, add)
	checkSettled(h, add)
	checkOverlap(h, add)
	checkReplaySkips(h, add)
	checkNamespaces(h, add)
	checkStoreLosses(h, add)
	checkMaxAttempts(h, add)
	checkEarlyStarts(h, add)
	checkPublishLead(h, add)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Window < out[j].Window
	})
	return out, nil
}

// complete returns an error wrapping ErrIncomplete naming every part of h
// that is missing or unfinished.
func complete(h History) error {
	var missing []string
	miss := func(format string, args ...any) { missing = append(missing, fmt.Sprintf(format, args...)) }
	if len(h.Jobs) == 0 {
		miss("no jobs: the checker needs the run's jobs and their intervals")
	}
	changed := map[string]bool{}
	for _, c := range h.SpecChanges {
		changed[c.Job] = true
	}
	jobs := map[string]bool{}
	for _, j := range h.Jobs {
		jobs[j.Name] = true
		if j.Every <= 0 && !changed[j.Name] {
			miss("job %q: Every = %v; the checker needs the job's interval (or its SpecChanges)", j.Name, j.Every)
		}
		if !validOverlap(j.Overlap) {
			miss("job %q: Overlap = %q; the checker needs the job's overlap policy: queue (or empty), skip, latest, replace or allow", j.Name, j.Overlap)
		}
	}
	if len(h.Jobs) > 0 {
		var unknown []string
		for _, r := range h.Published {
			if !jobs[r.Job] && !slices.Contains(unknown, r.Job) {
				unknown = append(unknown, r.Job)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			miss("published windows of jobs not in Jobs (%s): the checker needs every published job's overlap policy", strings.Join(unknown, ", "))
		}
	}
	for _, sk := range h.Skips {
		if sk.Status != StatusSkipped && sk.Status != StatusSuperseded {
			miss("skip reported for %s by %s has Status %q; want %q or %q", sk.Window, sk.Worker, sk.Status, StatusSkipped, StatusSuperseded)
		}
	}
	if h.DueUntil.IsZero() {
		miss("DueUntil not set: which windows were due is unknown")
	}
	if len(h.Published) == 0 {
		miss("windows topic empty: no published record to judge")
	}
	switch {
	case h.Partitions <= 0:
		miss("windows topic's partition count not given")
	case h.TopicEnds == nil:
		miss("windows topic's end offsets not given: cannot tell it was read to its end")
	default:
		for p := int32(0); p < int32(h.Partitions); p++ {
			end, ok := h.TopicEnds[p]
			switch {
			case !ok:
				miss("windows topic partition %d: end offset not given", p)
			case h.TopicReadTo[p] < end:
				miss("windows topic partition %d read to offset %d of %d: not read to its end", p, h.TopicReadTo[p], end)
			}
		}
	}
	if len(h.Attempts) == 0 {
		miss("empty ledger: no handler invocation recorded")
	}
	if h.States == nil {
		miss("no idempotency-store (Redis) state")
	} else {
		var unread []string
		seen := map[string]bool{}
		for _, r := range h.Published {
			if _, ok := h.States[r.Window]; !ok && !seen[r.Window] {
				unread = append(unread, r.Window)
			}
			seen[r.Window] = true
		}
		if len(unread) > 0 {
			sort.Strings(unread)
			miss("store (Redis) state of %d published windows not read (first: %s); use StatusAbsent for a window the store does not know", len(unread), unread[0])
		}
	}
	if len(h.Completions) == 0 {
		done := 0
		for _, st := range h.States {
			if st.Status == StatusDone {
				done++
			}
		}
		if done > 0 {
			miss("no completion reported although the store has %d done windows: the workers' completions were not collected", done)
		}
	}
	if len(h.Skips) == 0 {
		n := 0
		for _, st := range h.States {
			if st.Status == StatusSkipped || st.Status == StatusSuperseded {
				n++
			}
		}
		if n > 0 {
			miss("no skip reported although the store has %d skipped or superseded windows: the workers' skips were not collected", n)
		}
	}
	missing = append(missing, specChangesMissing(h)...)
	if m := replaySkipsMissing(h); m != "" {
		miss("%s", m)
	}
	if h.FinalLag < 0 {
		miss("final consumer-group lag unknown (could not be read)")
	}
	if h.PublishLead < 0 {
		miss("PublishLead %v negative: want the lead the producers ran with (0 or more; producer.DefaultPublishLead when they were given none)", h.PublishLead)
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrIncomplete, strings.Join(missing, "; "))
}

type addFunc func(rule, window, format string, args ...any)

// checkEarlyStarts is rule (r): no attempt of a window starts before the
// window's start.
func checkEarlyStarts(h History, add addFunc) {
	starts := map[string]time.Time{}
	for _, r := range h.Published {
		if s, ok := starts[r.Window]; !ok || r.Start.Before(s) {
			starts[r.Window] = r.Start
		}
	}
	for _, a := range h.Attempts {
		s, ok := starts[a.Window]
		if !ok || !a.Start.Before(s) {
			continue
		}
		add("r", a.Window, "attempt with token %d on %s started at %s, %v before the window's start %s",
			a.Token, a.Worker, stamp(a.Start), s.Sub(a.Start), stamp(s))
	}
}

// publishSlack is the tolerance of rule (s). The producer reads the
// record's published_at after it chose the windows due by then + its
// lead, so none should be needed; 1ms keeps a clock reading's jitter
// from being judged.
const publishSlack = time.Millisecond

// checkPublishLead is rule (s): no window is published more than
// PublishLead before its start.
func checkPublishLead(h History, add addFunc) {
	for _, r := range h.Published {
		if r.PublishedAt.IsZero() || !r.PublishedAt.Before(r.Start.Add(-h.PublishLead-publishSlack)) {
			continue
		}
		add("s", r.Window, "published at %s (%d/%d), %v before its start %s: more than the publish lead %v (+%v slack)",
			stamp(r.PublishedAt), r.Partition, r.Offset, r.Start.Sub(r.PublishedAt), stamp(r.Start), h.PublishLead, publishSlack)
	}
}

// checkMaxAttempts is rule (n).
func checkMaxAttempts(h History, add addFunc) {
	limit := map[string]int{}
	for _, j := range h.Jobs {
		limit[j.Name] = j.MaxAttempts
	}
	tokens := map[string]map[int64]bool{}
	job := map[string]string{}
	for _, a := range h.Attempts {
		if tokens[a.Window] == nil {
			tokens[a.Window] = map[int64]bool{}
		}
		tokens[a.Window][a.Token] = true
		job[a.Window] = a.Job
	}
	for id, toks := range tokens {
		if n := limit[job[id]]; n > 0 && len(toks) > n {
			add("n", id, "handler invoked with %d tokens, more than the job's max_attempts %d: an interrupted attempt was not counted", len(toks), n)
		}
	}
}

// checkPublished is rule (a); tls are the timelines of the jobs with
// SpecChanges, judged by their versions.
func checkPublished(h History, tls map[string]*timeline, add addFunc) {
	byWindow := map[string][]Record{}
	byJob := map[string][]Record{}
	for _, r := range h.Published {
		byWindow[r.Window] = append(byWindow[r.Window], r)
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	for id, rs := range byWindow {
		if len(rs) > 1 {
			at := make([]string, len(rs))
			for i, r := range rs {
				at[i] = fmt.Sprintf("%d/%d", r.Partition, r.Offset)
			}
			add("a", id, "published %d times (at %s)", len(rs), strings.Join(at, ", "))
		}
	}
	for _, j := range h.Jobs {
		if tl := tls[j.Name]; tl != nil {
			checkVersionedPublished(h, tl, add)
			continue
		}
		rs := byJob[j.Name]
		if len(rs) == 0 {
			add("a", "", "job %s: no window published during the run", j.Name)
			continue
		}
		starts := map[int64]bool{}
		first := rs[0].Start
		for _, r := range rs {
			starts[r.Start.UnixNano()] = true
			if r.Start.Before(first) {
				first = r.Start
			}
		}
		var evidence []time.Time
		for _, r := range rs {
			evidence = append(evidence, r.PublishedAt)
		}
		for s := first; s.Before(h.DueUntil); s = s.Add(j.Every) {
			if starts[s.UnixNano()] {
				continue
			}
			if why := lostWhy(h, j, s, evidence); why != "" {
				add("a", windowID(j.Name, s), "%s", why)
			}
		}
	}
}

// lostWhy says why a window of job j starting at s that was not published
// is lost, or returns "" if the catch-up limit explains it: no leader
// acted for the job (evidence: the instants it published the job's
// records or committed its changes) while the window was still young
// enough to be caught up (in [s, s+limit]), and one acted later (so the
// run did not just end, leaderless, within the limit). The limit is the
// job's Catchup, or for a window due during a lease store outage at least
// LeaseOutageCatchup.
func lostWhy(h History, j Job, s time.Time, evidence []time.Time) string {
	limit, outage := j.Catchup, leaseOutageAt(h.LeaseStoreOutages, s)
	if outage != nil {
		limit = max(limit, LeaseOutageCatchup)
	}
	inTime, later := false, false
	for _, at := range evidence {
		switch {
		case at.Before(s):
		case !at.After(s.Add(limit)):
			inTime = true
		default:
			later = true
		}
	}
	switch {
	case !inTime && later:
		return ""
	case outage != nil:
		return fmt.Sprintf("due while the lease store was down (%s to %s) but never published, although a leader published within %v of it (max(catch-up limit %v, %v))",
			outage.From.UTC().Format(time.RFC3339Nano), outage.To.UTC().Format(time.RFC3339Nano), limit, j.Catchup, LeaseOutageCatchup)
	default:
		return fmt.Sprintf("due but never published, although a leader published within its catch-up limit %v", j.Catchup)
	}
}

// leaseOutageAt returns the outage s falls in, or nil.
func leaseOutageAt(outages []Interval, s time.Time) *Interval {
	for i, o := range outages {
		if !s.Before(o.From) && !s.After(o.To) {
			return &outages[i]
		}
	}
	return nil
}

// checkRuns is rules (b), (c) and the worker half of (d).
func checkRuns(h History, add addFunc) {
	completions := map[string][]Completion{}
	for _, c := range h.Completions {
		completions[c.Window] = append(completions[c.Window], c)
	}
	for id, cs := range completions {
		if len(cs) > 1 {
			desc := make([]string, len(cs))
			for i, c := range cs {
				desc[i] = fmt.Sprintf("token %d by %s", c.Token, c.Worker)
			}
			add("b", id, "completed %d times (%s)", len(cs), strings.Join(desc, ", "))
		}
		st, ok := h.States[id]
		for _, c := range cs {
			switch {
			case !ok || st.Status == StatusAbsent:
				add("d", id, "completion by token %d (%s) but the store has no record of the window", c.Token, c.Worker)
			case c.Token != st.Token:
				add("d", id, "completion by token %d (%s) accepted although token %d claimed the window later: a zombie completed", c.Token, c.Worker, st.Token)
			}
		}
	}

	// Rule (c), by fencing token. Tokens come from a counter that only
	// grows with every claim, so they order the claims: an attempt that
	// started after another must carry a strictly higher token than every
	// attempt that started before it, and no attempt may carry a token
	// above one that completed the window (a done window is never claimed
	// again).
	attempts := map[string][]Attempt{}
	for _, a := range h.Attempts {
		attempts[a.Window] = append(attempts[a.Window], a)
	}
	for id, as := range attempts {
		sort.SliceStable(as, func(i, j int) bool {
			if !as[i].Start.Equal(as[j].Start) {
				return as[i].Start.Before(as[j].Start)
			}
			return as[i].Token < as[j].Token
		})
		completed := map[int64]string{}
		for _, c := range completions[id] {
			completed[c.Token] = c.Worker
		}
		if st, ok := h.States[id]; ok && st.Status == StatusDone {
			if _, ok := completed[st.Token]; !ok {
				completed[st.Token] = "the store"
			}
		}
		top := as[0]
		for i, cur := range as {
			if i > 0 && cur.Token <= top.Token {
				add("c", id, "re-run on %s at %s has token %d, not above the earlier attempt's token %d (%s at %s)",
					cur.Worker, cur.Start.Format(time.RFC3339Nano), cur.Token, top.Token, top.Worker, top.Start.Format(time.RFC3339Nano))
			}
			if cur.Token > top.Token {
				top = cur
			}
			var below []int64
			for tok := range completed {
				if tok < cur.Token {
					below = append(below, tok)
				}
			}
			if len(below) > 0 {
				sort.Slice(below, func(i, j int) bool { return below[i] < below[j] })
				add("c", id, "ran again on %s (token %d) after token %d completed it (%s)", cur.Worker, cur.Token, below[0], completed[below[0]])
			}
		}
	}
}

// checkZombieProducers is the producer half of rule (d): within a
// partition, a record of an older epoch of the same transactional producer
// never follows one of a newer epoch.
func checkZombieProducers(h History, add addFunc) {
	byPart := map[int32][]Record{}
	for _, r := range h.Published {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p, rs := range byPart {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		newest := map[int64]Record{}
		for _, r := range rs {
			if n, ok := newest[r.ProducerID]; ok && r.ProducerEpoch < n.ProducerEpoch {
				add("d", r.Window, "visible at %d/%d from producer epoch %d after epoch %d wrote offset %d: a fenced (zombie) producer's record",
					p, r.Offset, r.ProducerEpoch, n.ProducerEpoch, n.Offset)
				continue
			}
			newest[r.ProducerID] = r
		}
	}
}

// checkSettled is rule (e), plus "published windows are executed".
func checkSettled(h History, add addFunc) {
	if h.FinalLag != 0 {
		add("e", "", "consumer group lag is %d after faults stopped (want 0)", h.FinalLag)
	}
	okTokens := map[string]map[int64]bool{}
	for _, a := range h.Attempts {
		if a.OK {
			if okTokens[a.Window] == nil {
				okTokens[a.Window] = map[int64]bool{}
			}
			okTokens[a.Window][a.Token] = true
		}
	}
	policies := policies(h)
	seen := map[string]bool{}
	for _, r := range h.Published {
		if seen[r.Window] {
			continue
		}
		seen[r.Window] = true
		if h.DeadLettered[r.Window] {
			continue
		}
		st := h.States[r.Window]
		policy := policies[r.Job]
		switch {
		case st.Status == StatusAbsent:
			add("e", r.Window, "published but never claimed")
		case st.Status == StatusSkippedReplay:
			// Settled by an operator's replay, with their consent: not
			// lost, whatever the policy (rule (j) judges it).
		case st.Status == StatusSkipped || st.Status == StatusSuperseded:
			// Settled without running, if the job's policy does that;
			// no invocation needed.
			if settledStatus(policy) != st.Status {
				add("e", r.Window, "settled as %q, which overlap policy %s never does: the window was not run", st.Status, policy)
			}
		case st.Status != StatusDone:
			add("e", r.Window, "stuck: status %q, token %d, claim live %v after faults stopped", st.Status, st.Token, st.ClaimLive)
		case !okTokens[r.Window][st.Token]:
			add("e", r.Window, "done by token %d but the ledger has no successful invocation with that token", st.Token)
		}
	}
}
