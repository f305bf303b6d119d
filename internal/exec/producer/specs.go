package producer

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// kafkaOpts are the options of one of the producer's schedules readers
// (Config.ReaderOpts, else ClientOpts), with a client id of its own:
// per-client hooks (kprom labels its metrics by client id) must never
// see two live clients with one id.
func (p *Producer) kafkaOpts(id string) []kgo.Opt {
	opts := p.cfg.ClientOpts
	if p.cfg.ReaderOpts != nil {
		opts = p.cfg.ReaderOpts
	}
	return append([]kgo.Opt{kgo.SeedBrokers(p.cfg.Brokers...), kgo.ClientID(id)}, opts...)
}

// malformed logs and counts a record of topic that was skipped.
func (p *Producer) malformed(topic string, err error) {
	p.log.Warn("skipping a malformed record; the job keeps its last good version", "topic", topic, "err", err)
	if p.cfg.OnMalformed != nil {
		p.cfg.OnMalformed(topic)
	}
}

// fileRequests is the import of the schedules file (Config.Jobs) as
// requests of at most specs.MaxEdits edits each (one transaction each, as
// an apply through the API is split), or none if the topic already holds
// every entry as the file has it. See the ownership rule in docs/schedules.md: an entry is put
// when the topic lacks the job or the entry changed since it was last
// imported (its hash differs from Record.FileHash); a job changed since by
// another actor keeps that change until the file's entry changes; a job
// deleted through the API stays deleted; the file never deletes.
//
// A job the import creates that the Redis pause list of older versions
// has paused (legacy) is paused by an edit right after its put, in the
// same request, so it is created paused (the migration of
// docs/schedules.md, "Upgrading").
//
// The requests are built one at a time, as the caller applies them: a
// file of 100,000 jobs never has more than one request's edits (and their
// copies of the specs) in memory. Each job is decided when its request is
// built; the file's names are unique, so an earlier request of the import
// changes nothing a later one decides.
func (p *Producer) fileRequests(snap *specs.Snapshot, live map[string]*liveJob, now time.Time, legacy map[string]pause.Pause) iter.Seq[*specs.Request] {
	return func(yield func(*specs.Request) bool) {
		src := p.cfg.FileSource
		if src.Kind == "" {
			src.Kind = specs.SourceFile
		}
		id := "file-" + strconv.FormatInt(now.UnixNano(), 36)
		k := 0 // requests yielded
		var edits []specs.Edit
		// emit yields a request of the first n edits and keeps the rest;
		// last says no edit follows (a single request keeps the plain id).
		emit := func(n int, last bool) bool {
			q := &specs.Request{ID: id, Namespace: p.cfg.Namespace, Actor: p.actor(),
				Source: src, Note: "imported from the schedules file", IssuedAt: now, Edits: edits[:n:n]}
			if k > 0 || !last {
				q.ID = fmt.Sprintf("%s-%d", id, k+1)
			}
			k++
			edits = append([]specs.Edit(nil), edits[n:]...)
			ok := yield(q)
			for _, e := range q.Edits { // the request's edits are garbage now
				delete(p.fileJobs, e.Spec)
			}
			return ok
		}
		for _, j := range p.cfg.Jobs {
			s := j.ToSpec()
			h := specs.Hash(s)
			if l, ok := live[j.Name]; ok {
				if l.fileHash.is(h) {
					continue
				}
				if l.origin.source.Kind != specs.SourceFile {
					p.log.Warn("the schedules file changed this job's entry: it replaces the version another actor set",
						"job", j.Name, "version", l.version, "set_by", l.origin.setBy, "source", specs.DescribeSource(l.origin.source), "set_at", l.origin.setAt)
				}
			} else if v, deleted := snap.Deleted[j.Name]; deleted {
				p.log.Warn("the schedules file names a job deleted through the schedules API; not re-creating it (re-create it with kjobctl schedule apply, or remove it from the file)",
					"job", j.Name, "deleted_version", v)
				continue
			}
			spec := s
			edits = append(edits, specs.Edit{Op: specs.OpPut, Job: j.Name, Spec: &spec, FileHash: h})
			if p.fileJobs == nil {
				p.fileJobs = map[*schedule.Spec]*schedule.Job{}
			}
			p.fileJobs[&spec] = j
			if lp, ok := legacy[j.Name]; ok && live[j.Name] == nil {
				edits = append(edits, migrationEdit(lp, now))
			}
			// A file of 100,000 jobs in one request would be refused
			// (MaxEdits), and its Result alone would exceed Kafka's record
			// size limit. More than MaxEdits pending: this request is not
			// the last.
			if len(edits) > specs.MaxEdits {
				n := specs.MaxEdits
				if edits[n].Op == specs.OpPause {
					n-- // a put and the pause that migrates its job stay in one transaction
				}
				if !emit(n, false) {
					return
				}
			}
		}
		for len(edits) > 0 {
			n := min(len(edits), specs.MaxEdits)
			if n < len(edits) && edits[n].Op == specs.OpPause {
				n--
			}
			if !emit(n, n == len(edits)) {
				return
			}
		}
	}
}

// actor is the producer's own actor, for the file's imports.
func (p *Producer) actor() string { return "producer " + p.cfg.Replica }

// change is one planned change of a job: what the transaction writes and
// what the leader's view becomes once it commits (next nil: deleted).
type change struct {
	job  string
	next *liveJob
	// deleted is the tombstone's version for a delete.
	deleted int64
}

// refuse builds a Result refusing q at edit i.
func refusal(kind string, i int, job, reason string) *specs.Refusal {
	return &specs.Refusal{Kind: kind, Edit: i, Job: job, Reason: reason}
}

func conflict(i int, job string, l *liveJob, reason string) *specs.Refusal {
	r := refusal(specs.RefusedConflict, i, job, reason)
	if l != nil {
		r.Current, r.SetBy, r.SetAt, r.Source = l.version, l.origin.setBy, l.origin.setAt, l.origin.source
	}
	return r
}

// plan validates q against the leader's view (all edits or none) and
// returns the records to commit with the windows due at f, the changes
// to the view, and the Result; a refused request has only the Result,
// which lists nothing as applied. own says q is the leader's own (the file
// import, the migration of the Redis pause list): only those may carry
// migrated pauses.
//
// at is when the leader commits it (the result's, the change log's and
// the spec record's time); f, PublishLead later, is when it takes effect
// (its EffectiveFrom): the windows up to f may be published already.
func (p *Producer) plan(ctx context.Context, q *specs.Request, snap *specs.Snapshot, live map[string]*liveJob, at, f time.Time, own bool) ([]*kgo.Record, []change, *specs.Result) {
	recs, changes, res := p.planEdits(ctx, q, snap, live, at, f, own)
	if res.Refused != nil {
		// The edits before the refused one were planned, not committed.
		res.Applied = nil
		return nil, nil, res
	}
	return recs, changes, res
}

func (p *Producer) planEdits(ctx context.Context, q *specs.Request, snap *specs.Snapshot, live map[string]*liveJob, at, f time.Time, own bool) ([]*kgo.Record, []change, *specs.Result) {
	res := &specs.Result{Namespace: p.cfg.Namespace, RequestID: q.ID, Leader: p.cfg.Replica, At: at}
	if !own {
		if q.Source.Kind == specs.SourceMigration {
			res.Refused = refusal(specs.RefusedInvalid, 0, "", `source "migration" is the producer leader's own migration of the Redis pause list; use the source of the writer (cli, dashboard, api, file)`)
			return nil, nil, res
		}
		for i, e := range q.Edits {
			if e.Migrated != nil {
				res.Refused = refusal(specs.RefusedInvalid, i, e.Job, "a migrated pause is written only by the producer leader's migration of the Redis pause list; pause the job with a plain pause edit and a note")
				return nil, nil, res
			}
		}
	}
	if len(q.Edits) > specs.MaxEdits {
		res.Refused = refusal(specs.RefusedTooLarge, 0, "", fmt.Sprintf("%d edits in one request, at most %d", len(q.Edits), specs.MaxEdits))
		return nil, nil, res
	}
	if len(q.Edits) == 0 {
		res.Refused = refusal(specs.RefusedInvalid, 0, "", "the request has no edits")
		return nil, nil, res
	}
	cur := map[string]*liveJob{} // the view as the request's earlier edits leave it
	gone := map[string]int64{}   // deleted by an earlier edit: tombstone version
	get := func(job string) (*liveJob, bool) {
		if _, ok := gone[job]; ok {
			return nil, false
		}
		if l, ok := cur[job]; ok {
			return l, true
		}
		l, ok := live[job]
		return l, ok
	}
	lastVersion := func(job string) int64 {
		if l, ok := get(job); ok {
			return l.version
		}
		if v, ok := gone[job]; ok {
			return v
		}
		return snap.Deleted[job]
	}
	var recs []*kgo.Record
	var changes []change
	var shared origins // one origin per distinct (actor, source, note, instant)
	// The jobs' source for validation: one string per request, not per
	// job (a job keeps it as its File; a refusal names the edit).
	source := "request " + q.ID
	for i, e := range q.Edits {
		l, exists := get(e.Job)
		var curSpec schedule.Spec // the job's spec before the edit
		if exists {
			curSpec = l.spec()
		}
		if e.ExpectVersion != nil {
			have := int64(0)
			if exists {
				have = l.version
			}
			if *e.ExpectVersion != have {
				res.Refused = conflict(i, e.Job, l, fmt.Sprintf("the %s expected version %d", e.Op, *e.ExpectVersion))
				return nil, nil, res
			}
		}
		var spec *schedule.Spec
		var job *schedule.Job
		pause := (*specs.Pause)(nil)
		if exists {
			pause = l.paused
		}
		switch e.Op {
		case specs.OpCreate, specs.OpUpdate, specs.OpPut:
			if e.Spec == nil {
				res.Refused = refusal(specs.RefusedInvalid, i, e.Job, "a "+string(e.Op)+" needs a spec")
				return nil, nil, res
			}
			s := *e.Spec
			if s.Name == "" {
				s.Name = e.Job
			}
			if s.Name != e.Job {
				r := refusal(specs.RefusedInvalid, i, e.Job, "the spec's name differs from the job it changes; use the job's name")
				r.Field, r.Value = "name", s.Name
				res.Refused = r
				return nil, nil, res
			}
			j, fromFile := p.fileJobs[e.Spec]
			if !fromFile {
				var err error
				if j, err = s.Job(source); err != nil {
					res.Refused = invalidRefusal(i, e.Job, err)
					return nil, nil, res
				}
			}
			switch {
			case e.Op == specs.OpCreate && exists:
				res.Refused = conflict(i, e.Job, l, "it exists already")
				return nil, nil, res
			case e.Op == specs.OpUpdate && !exists:
				res.Refused = refusal(specs.RefusedNotFound, i, e.Job, fmt.Sprintf("no schedule %q in namespace %q", e.Job, p.cfg.Namespace))
				return nil, nil, res
			}
			c := j.ToSpec()
			spec, job = &c, j
			if exists && specs.Hash(c) == specs.Hash(curSpec) && (e.FileHash == "" || l.fileHash.is(e.FileHash)) {
				res.Applied = append(res.Applied, specs.Applied{Job: e.Job, Op: e.Op, VersionBefore: l.version, VersionAfter: l.version, Unchanged: true})
				continue
			}
		case specs.OpDelete, specs.OpPause, specs.OpResume, specs.OpRevert:
			if !exists {
				res.Refused = refusal(specs.RefusedNotFound, i, e.Job, fmt.Sprintf("no schedule %q in namespace %q", e.Job, p.cfg.Namespace))
				return nil, nil, res
			}
			// A new job value even for the same spec: the heap's entries
			// of the old one must stay invalid (queue.valid compares them).
			jc := *l.job
			spec, job = &curSpec, &jc
			switch e.Op {
			case specs.OpPause:
				if pause != nil {
					res.Applied = append(res.Applied, specs.Applied{Job: e.Job, Op: e.Op, VersionBefore: l.version, VersionAfter: l.version, Unchanged: true})
					continue
				}
				pause = &specs.Pause{Note: e.Note, By: q.Actor, At: at}
				if e.Migrated != nil {
					m := *e.Migrated
					pause = &m
				}
			case specs.OpResume:
				if pause == nil {
					res.Applied = append(res.Applied, specs.Applied{Job: e.Job, Op: e.Op, VersionBefore: l.version, VersionAfter: l.version, Unchanged: true})
					continue
				}
				pause = nil
			case specs.OpRevert:
				old, err := p.specAt(ctx, e.Job, e.ToVersion)
				if err != nil {
					kind := specs.RefusedNotFound
					if !errors.Is(err, specs.ErrNotFound) {
						kind = specs.RefusedInvalid
					}
					res.Refused = refusal(kind, i, e.Job, err.Error())
					return nil, nil, res
				}
				j, err := old.Job(fmt.Sprintf("%s version %d", e.Job, e.ToVersion))
				if err != nil {
					res.Refused = invalidRefusal(i, e.Job, err)
					return nil, nil, res
				}
				c := j.ToSpec()
				spec, job = &c, j
			}
		default:
			res.Refused = refusal(specs.RefusedInvalid, i, e.Job, fmt.Sprintf("unknown op %q: want create, update, put, delete, pause, resume or revert", e.Op))
			return nil, nil, res
		}
		before := lastVersion(e.Job)
		v := before + 1
		src := q.Source
		if e.Migrated != nil {
			src = specs.Source{Kind: specs.SourceMigration}
		}
		ch := &specs.Change{Namespace: p.cfg.Namespace, ID: fmt.Sprintf("%s/%d", q.ID, i), Request: q.ID, Job: e.Job, Op: e.Op,
			VersionAfter: v, Actor: q.Actor, Source: src, Note: q.Note, At: at}
		if exists {
			ch.VersionBefore = l.version
		}
		if e.Note != "" {
			ch.Note = e.Note
		}
		var prevSpec *schedule.Spec
		var prevPause *specs.Pause
		if exists {
			prevSpec, prevPause = &curSpec, l.paused
		}
		if e.Op == specs.OpDelete {
			ch.Diff = specs.Diff(prevSpec, prevPause, nil, nil)
			recs = append(recs, specs.Tombstone(p.cfg.SchedulesTopic, e.Job, v),
				&kgo.Record{Topic: p.cfg.StateTopic, Key: []byte(e.Job)}) // the job's state goes with it
			gone[e.Job] = v
			delete(cur, e.Job)
			changes = append(changes, change{job: e.Job, deleted: v})
		} else {
			rec := &specs.Record{Namespace: p.cfg.Namespace, Job: e.Job, Version: v, Spec: *spec, Paused: pause, SetBy: q.Actor,
				Source: src, Note: ch.Note, SetAt: at, ChangeID: ch.ID, EffectiveFrom: f}
			if exists {
				rec.FileHash = l.fileHash.String()
			}
			if e.FileHash != "" {
				rec.FileHash = e.FileHash
				if !exists && q.Source.Kind == specs.SourceFile && p.knownState(e.Job) {
					rec.EffectiveFrom = time.Time{} // an upgrade's import keeps the job's catch-up
				}
			}
			ch.Diff = specs.Diff(prevSpec, prevPause, spec, pause)
			ch.Spec, ch.Paused = spec, pause
			r, err := specs.SpecRecord(p.cfg.SchedulesTopic, rec)
			if err != nil {
				res.Refused = refusal(specs.RefusedInvalid, i, e.Job, err.Error())
				return nil, nil, res
			}
			recs = append(recs, r)
			n := newLiveJob(rec, job, &shared)
			cur[e.Job] = n
			delete(gone, e.Job)
			changes = append(changes, change{job: e.Job, next: n})
		}
		cr, err := specs.ChangeRecord(p.cfg.ScheduleLogTopic, ch)
		if err != nil {
			res.Refused = refusal(specs.RefusedInvalid, i, e.Job, err.Error())
			return nil, nil, res
		}
		recs = append(recs, cr)
		res.Applied = append(res.Applied, specs.Applied{Job: e.Job, Op: e.Op, VersionBefore: ch.VersionBefore, VersionAfter: v})
	}
	return recs, changes, res
}

// knownState reports whether the state topic knew job when this term
// began (set by term).
func (p *Producer) knownState(job string) bool {
	_, ok := p.termState[job]
	return ok
}

// invalidRefusal turns a validation error into a refusal naming the
// field, the value and the fix.
func invalidRefusal(i int, job string, err error) *specs.Refusal {
	r := refusal(specs.RefusedInvalid, i, job, err.Error())
	var ve *schedule.ValidationError
	if errors.As(err, &ve) {
		r.Field, r.Value, r.Reason = ve.Field, ve.Value, ve.Msg
		if n := countErrors(err); n > 1 {
			r.Reason += fmt.Sprintf(" (and %d more problems)", n-1)
		}
	}
	return r
}

func countErrors(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// specAt returns job's spec at version v from the change log.
func (p *Producer) specAt(ctx context.Context, job string, v int64) (*schedule.Spec, error) {
	hist, bad, err := specs.History(ctx, p.kafkaOpts("kjob-producer-schedule-log"), p.cfg.ScheduleLogTopic, job)
	if err != nil {
		return nil, fmt.Errorf("read the change log: %w", err)
	}
	for _, m := range bad {
		p.malformed(p.cfg.ScheduleLogTopic, m)
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if c := hist[i]; c.Namespace == p.cfg.Namespace && c.VersionAfter == v {
			if c.Spec == nil {
				return nil, fmt.Errorf("version %d of %q is its delete: %w; revert to a version before it", v, job, specs.ErrNotFound)
			}
			return c.Spec, nil
		}
	}
	return nil, fmt.Errorf("no version %d of %q in the change log: %w (kjobctl schedule history %s lists them)", v, job, specs.ErrNotFound, job)
}

// requests reads the control topic for schedule requests of this
// namespace and sends those without a Result to out: first those of the
// last RequestTTL (a request written while no producer led, or one a
// previous term did not answer), then each new one. It returns when ctx
// ends.
func (p *Producer) requests(ctx context.Context, out chan<- *specs.Request) error {
	// The backlog is [Start, End) of each partition: every request
	// written after the listing is at End or after it, so the reader,
	// which goes on past End, reads it (kread.ListSpansSince).
	since := p.cfg.Clock.Now().Add(-specs.RequestTTL)
	spans, err := kread.ListSpansSince(ctx, p.kafkaOpts("kjob-producer-requests-admin"), p.cfg.ControlTopic, since)
	if err != nil {
		return err
	}
	from := map[int32]kgo.Offset{}
	for part, sp := range spans {
		from[part] = kgo.NewOffset().At(sp.Start)
	}
	backlog := spans.Backlog()
	cons, err := kgo.NewClient(append(p.kafkaOpts("kjob-producer-requests"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.cfg.ControlTopic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		// Without fetch sessions: closing a client whose session fetch
		// was in flight raced with the embedded broker (kfake), and a
		// reader of one partition saves little with them.
		kgo.DisableFetchSessions())...)
	if err != nil {
		return err
	}
	defer cons.Close()
	answered := map[string]bool{}
	var pending []*specs.Request // the backlog's, sent once it is read
	send := func(q *specs.Request) bool {
		select {
		case out <- q:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var live []*specs.Request
		fs.EachRecord(func(r *kgo.Record) {
			backlog.See(r)
			if r.Attrs.IsControl() {
				return
			}
			switch specs.Kind(r) {
			case specs.KindResult:
				if s, err := specs.ParseResult(r); err == nil {
					answered[s.RequestID] = true
				}
			case specs.KindRequest:
				q, err := specs.ParseRequest(r)
				if err != nil {
					p.malformed(p.cfg.ControlTopic, err)
					return
				}
				if q.Namespace != p.cfg.Namespace {
					return
				}
				if !backlog.Read() {
					pending = append(pending, q)
				} else {
					live = append(live, q)
				}
			}
		})
		if backlog.Read() && pending != nil {
			for _, q := range pending {
				if !answered[q.ID] && !send(q) {
					return nil
				}
				answered[q.ID] = true
			}
			pending = pending[:0:0]
		}
		for _, q := range live {
			if answered[q.ID] {
				continue
			}
			answered[q.ID] = true
			if !send(q) {
				return nil
			}
		}
	}
}
