package dedupe

// Run history: every settlement of a window, kept per job in Redis.
//
// Storage: one sorted set per job, "kjob:{<ns>:<job>}:runs", under the
// job's hash tag, so it lives in the same Redis Cluster slot as the job's
// window records and token counter, and an append can travel in the same
// pipeline as the settlement it records. A member is a batch: the runs of
// one job settled together (at most runsPerMember of them), in a compact
// binary encoding (encodeRuns: about 25-35 bytes per run of a scheduled
// window without error text, the worker id written once per member); its
// score is the newest run's end in Unix milliseconds, so newer batches come
// first in ZREVRANGEBYSCORE and "since" is a score range. Packing a batch
// into one member makes an append one ZADD of one member per job however
// many runs it records, which is what keeps the cost per run low in a
// backlog (see BenchmarkHistoryAppendRuns).
//
// Bounds per job: HistoryBatches members (so the last HistoryBatches runs
// at least, runsPerMember times that at most) and no member whose newest
// run ended more than HistoryAge before the newest run appended; the key
// expires HistoryAge after the last trim, so the history of a job that
// stopped running goes away. The trims (ZREMRANGEBYRANK, ZREMRANGEBYSCORE,
// PEXPIRE) go with every append of fewer than 4 runs of a job (a job
// settled a window at a time pays little for them), and otherwise with an
// append whose runs' fencing tokens span a multiple of trimEvery (or that
// holds a run without token): tokens grow by one with every claim of the
// job, so the appends of a job's runs reach one every trimEvery claims, at
// most trimEvery/4 appends of 4 runs or more apart, and a busy job pays for
// its trims about once per trimEvery runs. Between trims a history holds at
// most about trimEvery/4 members more, and its key's expiry is renewed as
// often. Redis persistence (AOF) makes the history
// survive a Redis restart as it does the done markers; a worker restart
// does not touch it.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds of the run history.
const (
	// HistoryBatches is how many appends (batches of one job's runs
	// settled together) the history of one job keeps; older ones are
	// removed as new ones come. A job whose windows are settled one at a
	// time keeps its last HistoryBatches runs; in a backlog a batch holds
	// up to 16 runs, so a job keeps at most 16 times as many.
	HistoryBatches = 1000
	// MaxRunErrorBytes caps Run.Error as stored (cut at a UTF-8 boundary).
	MaxRunErrorBytes = 512
	// DefaultRunsLimit is RunQuery.Limit when it is zero.
	DefaultRunsLimit = 100
	// MaxRunsLimit is the largest RunQuery.Limit.
	MaxRunsLimit = 10000
)

// runsPerMember caps the runs packed into one member; trimEvery is how
// often (in fencing tokens) a busy job's history is trimmed.
const (
	runsPerMember = 16
	trimEvery     = 64
)

// HistoryAge returns how long a run is kept after it ended: the store's
// Retention (Config.Retention, default 7 days), the same horizon as the
// done markers, so the history reaches as far back as a replay can.
func (s *Store) HistoryAge() time.Duration { return s.cfg.Retention }

// Run outcomes: how one attempt at a window, or the window itself, was
// settled. They match the worker's execution outcomes.
const (
	// RunDone: the handler succeeded and the window was marked done.
	RunDone = "done"
	// RunFailed: the attempt failed; the window is retried.
	RunFailed = "failed"
	// RunDeadLettered: the window was dead-lettered (retries exhausted, a
	// permanent error, a poison record).
	RunDeadLettered = "dead-lettered"
	// RunSkipped: the window was not run because of the job's overlap
	// policy (an earlier window of the job was still running).
	RunSkipped = "skipped"
	// RunSuperseded: the window was settled without running because a
	// newer window of the job replaced it (overlap policy).
	RunSuperseded = "superseded"
	// RunFenced: the attempt lost its claim to a newer token; its result
	// was discarded.
	RunFenced = "fenced"
	// RunAbandoned: the attempt outlived its timeout and grace and was
	// left running; the window is retried.
	RunAbandoned = "abandoned"
	// RunSteppedDown: the worker gave the window up (partition revoked,
	// Redis unreachable) before the attempt ended; the next owner runs it.
	RunSteppedDown = "stepped-down"
	// RunSkippedReplay: the window was settled without running because an
	// operator's replay moved its partition's offsets past it (see
	// SkipForReplay); status and history show it as "skipped (replay)".
	RunSkippedReplay = "skipped-replay"
)

// runOutcomes maps an outcome to its code in the encoding (index + 1).
var runOutcomes = []string{RunDone, RunFailed, RunDeadLettered, RunSkipped, RunSuperseded, RunFenced, RunAbandoned, RunSteppedDown, RunSkippedReplay}

// RunOutcomes returns every outcome a Run may have.
func RunOutcomes() []string { return slices.Clone(runOutcomes) }

// runTriggers maps a trigger to its code (index + 1); other triggers are
// stored as text.
var runTriggers = []string{"schedule", "catchup", "manual", "backfill"}

// ErrInvalidRun is returned by AppendRuns, before any call to Redis, for a
// run that cannot be stored (no job, an unknown outcome, a window id of
// another job).
var ErrInvalidRun = errors.New("dedupe: invalid run")

// Run is one settlement of a window: an attempt that ended (done, failed,
// fenced, abandoned, stepped down) or a window settled without an attempt
// (dead-lettered, skipped, superseded; Attempt is then 0 and Started
// equals Finished).
type Run struct {
	// WindowID is the window's id, "<job>@<window>".
	WindowID string `json:"window_id"`
	// Job is the job name (the part of WindowID before '@').
	Job string `json:"job"`
	// Trigger is the window's trigger: schedule, catchup, manual, backfill.
	Trigger string `json:"trigger,omitempty"`
	// Outcome is one of the Run* constants.
	Outcome string `json:"outcome"`
	// WindowStart is the window's scheduled start.
	WindowStart time.Time `json:"window_start"`
	// Started and Finished bound the attempt (stored to the microsecond).
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Attempt is the attempt number (1 for the first); 0 if none ran.
	Attempt int `json:"attempt"`
	// Token is the attempt's fencing token; 0 if none.
	Token int64 `json:"token,omitempty"`
	// Worker is the worker id that settled the window.
	Worker string `json:"worker,omitempty"`
	// Error is the attempt's error or the dead-letter reason, cut to
	// MaxRunErrorBytes.
	Error string `json:"error,omitempty"`
	// ScheduleVersion is the version of the job's spec that produced the
	// window (jobmsg.Message.ScheduleVersion); 0 when unknown: a window
	// without one, or a run recorded before runs carried it.
	ScheduleVersion int64 `json:"schedule_version,omitempty"`
}

// Duration is how long the attempt ran (Finished - Started); 0 when
// Started is not set (a window settled without an attempt).
func (r Run) Duration() time.Duration {
	if r.Started.IsZero() {
		return 0
	}
	return r.Finished.Sub(r.Started)
}

// RunQuery selects runs of one job for Runs.
type RunQuery struct {
	// Limit is the most runs returned. Default DefaultRunsLimit (100); at
	// most MaxRunsLimit.
	Limit int
	// Since keeps runs that finished at or after it; zero: all.
	Since time.Time
	// Outcomes keeps runs with one of these outcomes; empty: all.
	Outcomes []string
}

// historyKey is the run history key of job: "kjob:{<ns>:<job>}:runs".
func (s *Store) historyKey(job string) string { return s.names.JobKey(job, "runs") }

// AppendRuns records runs in the history of their jobs, in one pipeline
// (see appendRuns). Invalid runs are refused (ErrInvalidRun) before
// anything is sent. Append each settlement once: the history is a log, not
// a set.
func (s *Store) AppendRuns(ctx context.Context, runs []Run) error {
	if len(runs) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	if err := s.appendRuns(ctx, pipe, runs); err != nil {
		return err
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		for _, c := range cmds {
			if c.Err() != nil {
				return fmt.Errorf("append runs: %s: %w", c.Name(), c.Err())
			}
		}
		return fmt.Errorf("append runs: %w", err)
	}
	return nil
}

// appendRuns adds to pipe, for each job of runs, the commands that record
// its runs: one ZADD of its runs packed into members of at most
// runsPerMember runs, and (see the file comment for when) ZREMRANGEBYRANK
// to HistoryBatches members, ZREMRANGEBYSCORE of the members whose newest
// run ended more than HistoryAge before the newest run of the append, and
// PEXPIRE HistoryAge. Each job's commands touch only the job's key, so on a
// Cluster they go to the node of the job's slot, like its settlement
// scripts. It validates every run first and adds nothing if one is
// invalid.
//
// A worker's settle step calls it with the pipeline of its settlement
// calls, so recording the history costs no round trip of its own.
func (s *Store) appendRuns(ctx context.Context, pipe redis.Pipeliner, runs []Run) error {
	type jobRuns struct {
		idx            []int
		newest         time.Time
		minTok, maxTok int64
		noToken        bool
	}
	var order []string
	byJob := map[string]*jobRuns{}
	for i := range runs {
		job, err := runJob(&runs[i])
		if err != nil {
			return fmt.Errorf("append runs: run %d: %w", i, err)
		}
		jr := byJob[job]
		if jr == nil {
			jr = &jobRuns{}
			byJob[job] = jr
			order = append(order, job)
		}
		jr.idx = append(jr.idx, i)
		if f := runs[i].Finished; f.After(jr.newest) {
			jr.newest = f
		}
		switch t := runs[i].Token; {
		case t == 0:
			jr.noToken = true
		case len(jr.idx) == 1 || jr.minTok == 0:
			jr.minTok, jr.maxTok = t, t
		default:
			jr.minTok, jr.maxTok = min(jr.minTok, t), max(jr.maxTok, t)
		}
	}
	age := s.HistoryAge()
	buf := make([]byte, 0, 40*len(runs)+64*len(order))
	for _, job := range order {
		jr := byJob[job]
		key := s.historyKey(job)
		members := make([]redis.Z, 0, (len(jr.idx)+runsPerMember-1)/runsPerMember)
		for from := 0; from < len(jr.idx); from += runsPerMember {
			part := jr.idx[from:min(from+runsPerMember, len(jr.idx))]
			start := len(buf)
			var newest time.Time
			buf = encodeRuns(buf, job, runs, part)
			for _, i := range part {
				if f := runs[i].Finished; f.After(newest) {
					newest = f
				}
			}
			// The member aliases buf up to its own end: later appends
			// write past it, or to a new array if buf grows.
			members = append(members, redis.Z{Score: float64(newest.UnixMilli()), Member: buf[start:len(buf):len(buf)]})
		}
		pipe.ZAdd(ctx, key, members...)
		// Trim when the append's tokens reach a multiple of trimEvery (see
		// the file comment).
		crosses := jr.minTok > 0 && jr.maxTok/trimEvery != (jr.minTok-1)/trimEvery
		if len(jr.idx) < 4 || jr.noToken || crosses {
			pipe.ZRemRangeByRank(ctx, key, 0, -HistoryBatches-1)
			pipe.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(jr.newest.Add(-age).UnixMilli(), 10))
			pipe.PExpire(ctx, key, age)
		}
	}
	return nil
}

// runJob validates r and returns its job.
func runJob(r *Run) (string, error) {
	idJob, _, ok := strings.Cut(r.WindowID, "@")
	switch {
	case !ok || idJob == "":
		return "", fmt.Errorf(`%w: WindowID %q is not "<job>@<window>"`, ErrInvalidRun, r.WindowID)
	case r.Job != "" && r.Job != idJob:
		return "", fmt.Errorf("%w: Job %q but WindowID %q is a window of %q", ErrInvalidRun, r.Job, r.WindowID, idJob)
	case !slices.Contains(runOutcomes, r.Outcome):
		return "", fmt.Errorf("%w: Outcome %q of %s; want one of %s", ErrInvalidRun, r.Outcome, r.WindowID, strings.Join(runOutcomes, ", "))
	case r.Finished.IsZero():
		return "", fmt.Errorf("%w: Finished of %s is zero; set it to when the run was settled", ErrInvalidRun, r.WindowID)
	case r.Attempt < 0 || r.Token < 0 || r.ScheduleVersion < 0:
		return "", fmt.Errorf("%w: Attempt %d, Token %d, ScheduleVersion %d of %s: want >= 0", ErrInvalidRun, r.Attempt, r.Token, r.ScheduleVersion, r.WindowID)
	}
	return idJob, nil
}

// The binary encoding is kept (issue 24, docs/performance.md "Fast paths
// (issue 24)"), measured on 2026-11-28 on the shared 2-vCPU machine,
// embedded broker (kfake), load average 6-16, alternated 3 rounds with
// each member as a JSON array of Runs: BenchmarkHistoryEncode 126-154 ns
// and 15.5 bytes per run, no allocation, against 4.4-7.4 µs, 256 bytes
// and 3.3 allocations; BenchmarkHistoryAppendRuns (1,000 runs of 100
// jobs) 28 against 316 bytes per run in Redis, 0.32-0.86 against
// 1.23-1.49 µs of Redis CPU per run; the no-op burst (1 partition, 100k
// windows) 15.5k / 20.6k / 19.7k windows/s against 10.6k / 19.3k / 10.7k
// with JSON, worker CPU 26.9-36.5 against 30.4-51.6 µs per window. The
// row misses its target (>= 70k/s) without it, so it stays.
//
// Encoding of a member (version 1): the runs of one job, integers as
// varints, strings as a uvarint length and the bytes:
//
//	byte     version (1)
//	uvarint  number of runs
//	string   worker id of the first run (the usual worker of the others)
//	per run:
//	  byte     outcome code (index in runOutcomes + 1)
//	  byte     trigger code (index in runTriggers + 1; 0 none; 255: text follows)
//	  [string  trigger text]
//	  varint   window start, Unix seconds, minus the previous run's (0 before the first)
//	  uvarint  window start, nanoseconds
//	  byte     flags: 1 WindowID is "<job>@<start in RFC 3339>" (else its
//	           part after '@' follows); 2 another worker (its id follows);
//	           4 another schedule version (it follows)
//	  [string  WindowID after "<job>@"]
//	  [string  worker id]
//	  [uvarint schedule version]
//	  varint   Started - WindowStart, µs
//	  uvarint  Finished - Started, µs (0 if negative)
//	  uvarint  attempt
//	  uvarint  token
//	  string   error (at most MaxRunErrorBytes)
//
// Flag 4 came with schedule versions (issue 23): a run's schedule version
// is written only when it differs from the previous run's in the member
// (0 before the first), so a member of runs of one version carries it
// once, and a member of runs without one is byte for byte what kjob wrote
// before; a member written before decodes with version 0. A reader from
// before refuses a member with flag 4, as it refuses any unknown flag.
const runEncodingV1 = 1

// encodeRuns appends the member of runs[i], i in idx, all of job, to b.
func encodeRuns(b []byte, job string, runs []Run, idx []int) []byte {
	worker := runs[idx[0]].Worker
	b = append(b, runEncodingV1)
	b = binary.AppendUvarint(b, uint64(len(idx)))
	b = appendString(b, worker)
	var prevSec, prevVer int64
	var tmp [64]byte
	for k, i := range idx {
		r := &runs[i]
		b = append(b, byte(slices.Index(runOutcomes, r.Outcome)+1))
		switch t := slices.Index(runTriggers, r.Trigger); {
		case r.Trigger == "":
			b = append(b, 0)
		case t >= 0:
			b = append(b, byte(t+1))
		default:
			b = append(b, 255)
			b = appendString(b, r.Trigger)
		}
		start := r.WindowStart.UTC()
		sec := start.Unix()
		if k == 0 {
			prevSec = 0
		}
		b = binary.AppendVarint(b, sec-prevSec)
		prevSec = sec
		b = binary.AppendUvarint(b, uint64(start.Nanosecond()))
		suffix := r.WindowID[len(job)+1:]
		var flags byte
		if !start.IsZero() && suffix == string(appendRFC3339(tmp[:0], start)) {
			flags |= 1
		}
		if r.Worker != worker {
			flags |= 2
		}
		if r.ScheduleVersion != prevVer {
			flags |= 4
		}
		b = append(b, flags)
		if flags&1 == 0 {
			b = appendString(b, suffix)
		}
		if flags&2 != 0 {
			b = appendString(b, r.Worker)
		}
		if flags&4 != 0 {
			b = binary.AppendUvarint(b, uint64(r.ScheduleVersion))
			prevVer = r.ScheduleVersion
		}
		started := r.Started
		if started.IsZero() {
			started = r.Finished
		}
		// Times to the microsecond, relative to the start so they stay
		// small.
		startedUS := started.UnixMicro()
		b = binary.AppendVarint(b, startedUS-start.UnixMicro())
		b = binary.AppendUvarint(b, uint64(max(r.Finished.UnixMicro()-startedUS, 0)))
		b = binary.AppendUvarint(b, uint64(r.Attempt))
		b = binary.AppendUvarint(b, uint64(r.Token))
		b = appendString(b, truncate(r.Error, MaxRunErrorBytes))
	}
	return b
}

// appendRFC3339 appends t (UTC) as time.RFC3339Nano formats it, quickly
// for the usual whole second of a scheduled window.
func appendRFC3339(b []byte, t time.Time) []byte {
	y, mo, d := t.Date()
	if t.Nanosecond() != 0 || y < 1000 || y > 9999 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	h, mi, sec := t.Clock()
	two := func(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }
	b = two(two(b, y/100), y%100)
	b = two(append(b, '-'), int(mo))
	b = two(append(b, '-'), d)
	b = two(append(b, 'T'), h)
	b = two(append(b, ':'), mi)
	b = two(append(b, ':'), sec)
	return append(b, 'Z')
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errBadRun is the cause of a member that does not decode.
var errBadRun = errors.New("not a batch of runs in a known encoding")

// decodeRuns decodes a member of job's history, its runs in the order
// they were appended.
func decodeRuns(job string, m string) ([]Run, error) {
	d := runDecoder{s: m}
	if d.byte() != runEncodingV1 {
		return nil, errBadRun
	}
	n := d.uvarint()
	if n == 0 || n > runsPerMember*4 {
		return nil, errBadRun
	}
	worker := d.string()
	out := make([]Run, 0, n)
	var prevSec, prevVer int64
	for range n {
		r := Run{Job: job, Worker: worker}
		if o := int(d.byte()); o >= 1 && o <= len(runOutcomes) {
			r.Outcome = runOutcomes[o-1]
		} else {
			d.bad = true
		}
		switch t := int(d.byte()); {
		case t == 255:
			r.Trigger = d.string()
		case t >= 1 && t <= len(runTriggers):
			r.Trigger = runTriggers[t-1]
		case t != 0:
			d.bad = true
		}
		sec := prevSec + d.varint()
		prevSec = sec
		nsec := d.uvarint()
		if nsec >= 1e9 {
			d.bad = true
		}
		r.WindowStart = time.Unix(sec, int64(nsec)).UTC()
		flags := d.byte()
		if flags&^7 != 0 {
			d.bad = true
		}
		if flags&1 != 0 {
			r.WindowID = job + "@" + r.WindowStart.Format(time.RFC3339Nano)
		} else {
			r.WindowID = job + "@" + d.string()
		}
		if flags&2 != 0 {
			r.Worker = d.string()
		}
		if flags&4 != 0 {
			v := d.uvarint()
			if v > math.MaxInt64 {
				d.bad = true
			}
			prevVer = int64(v)
		}
		r.ScheduleVersion = prevVer
		startedUS := d.add(r.WindowStart.UnixMicro(), d.varint())
		r.Started = time.UnixMicro(startedUS).UTC()
		if r.Started.IsZero() {
			// The encoder writes a zero Started as Finished, so this
			// member did not come from it (found by FuzzHistoryDecode).
			d.bad = true
		}
		r.Finished = time.UnixMicro(d.add(startedUS, int64(min(d.uvarint(), math.MaxInt64)))).UTC()
		r.Attempt = int(d.uvarint())
		r.Token = int64(d.uvarint())
		r.Error = d.string()
		if d.bad {
			return nil, errBadRun
		}
		out = append(out, r)
	}
	if d.s != "" {
		return nil, errBadRun
	}
	return out, nil
}

// runDecoder reads an encoded member; any malformed field sets bad.
type runDecoder struct {
	s   string
	bad bool
}

func (d *runDecoder) byte() byte {
	if d.s == "" {
		d.bad = true
		return 0
	}
	c := d.s[0]
	d.s = d.s[1:]
	return c
}

func (d *runDecoder) uvarint() uint64 {
	var v uint64
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			break
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.s = d.s[i+1:]
			return v
		}
	}
	d.bad = true
	d.s = ""
	return 0
}

func (d *runDecoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// add returns a+b; a sum that overflows is malformed.
func (d *runDecoder) add(a, b int64) int64 {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		d.bad = true
		return 0
	}
	return c
}

func (d *runDecoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.s)) {
		d.bad = true
		d.s = ""
		return ""
	}
	v := d.s[:n]
	d.s = d.s[n:]
	return v
}

// Runs returns runs of job from its history, newest first (by when they
// finished): at most q.Limit, finished at or after q.Since, with an outcome
// in q.Outcomes. An unknown job has an empty history.
func (s *Store) Runs(ctx context.Context, job string, q RunQuery) ([]Run, error) {
	if job == "" || strings.ContainsAny(job, "@{}") {
		return nil, fmt.Errorf("runs: job %q: want a job name (no '@', '{' or '}')", job)
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultRunsLimit
	case q.Limit < 0 || q.Limit > MaxRunsLimit:
		return nil, fmt.Errorf("runs: RunQuery.Limit = %d: want 1 to %d, or 0 for %d", q.Limit, MaxRunsLimit, DefaultRunsLimit)
	}
	for _, o := range q.Outcomes {
		if !slices.Contains(runOutcomes, o) {
			return nil, fmt.Errorf("runs: outcome %q: want one of %s", o, strings.Join(runOutcomes, ", "))
		}
	}
	lo := "-inf"
	if !q.Since.IsZero() {
		lo = strconv.FormatInt(q.Since.UnixMilli(), 10)
	}
	key := s.historyKey(job)
	// Members hold one or more runs: read pages of members, newest first,
	// until the limit is met or the history (at most HistoryBatches
	// members, give or take trimEvery) ends.
	const page = 100
	out := make([]Run, 0, min(q.Limit, 1000))
	for off := int64(0); ; off += page {
		ms, err := s.rdb.ZRevRangeByScore(ctx, key, &redis.ZRangeBy{Min: lo, Max: "+inf", Offset: off, Count: page}).Result()
		if err != nil {
			return nil, fmt.Errorf("runs of %s: %w", job, err)
		}
		var got []Run
		for _, m := range ms {
			rs, err := decodeRuns(job, m)
			if err != nil {
				return nil, fmt.Errorf("runs of %s: a member of %s: %w", job, key, err)
			}
			for _, r := range rs {
				if len(q.Outcomes) > 0 && !slices.Contains(q.Outcomes, r.Outcome) || r.Finished.Before(q.Since) {
					continue
				}
				got = append(got, r)
			}
		}
		// Newest first within the page (a batch lists its runs in the
		// order they were settled).
		slices.SortStableFunc(got, func(a, b Run) int { return b.Finished.Compare(a.Finished) })
		for _, r := range got {
			out = append(out, r)
			if len(out) == q.Limit {
				return out, nil
			}
		}
		if len(ms) < page {
			return out, nil
		}
	}
}

// RunStats summarises runs, for a job's history page and kjobctl history.
type RunStats struct {
	// Runs counts the runs, ByOutcome per outcome.
	Runs      int            `json:"runs"`
	ByOutcome map[string]int `json:"by_outcome"`
	// Attempts counts the runs that are a verdict on the handler: done,
	// failed, dead-lettered and abandoned (not fenced or stepped-down
	// attempts, whose results were discarded for reasons of the worker,
	// nor skipped or superseded windows, which did not run).
	Attempts int `json:"attempts"`
	// SuccessRate is done / Attempts; 0 when Attempts is 0.
	SuccessRate float64 `json:"success_rate"`
	// P50 and P95 are the median and 95th percentile duration of the done
	// runs (nearest rank); 0 without one.
	P50 time.Duration `json:"p50_ns"`
	P95 time.Duration `json:"p95_ns"`
}

// SummarizeRuns computes the RunStats of runs.
func SummarizeRuns(runs []Run) RunStats {
	st := RunStats{Runs: len(runs), ByOutcome: map[string]int{}}
	var done []time.Duration
	for _, r := range runs {
		st.ByOutcome[r.Outcome]++
		switch r.Outcome {
		case RunDone:
			done = append(done, r.Duration())
			st.Attempts++
		case RunFailed, RunDeadLettered, RunAbandoned:
			st.Attempts++
		}
	}
	if st.Attempts > 0 {
		st.SuccessRate = float64(st.ByOutcome[RunDone]) / float64(st.Attempts)
	}
	if len(done) > 0 {
		slices.Sort(done)
		rank := func(q float64) time.Duration { return done[max(int(math.Ceil(q*float64(len(done))))-1, 0)] }
		st.P50, st.P95 = rank(0.50), rank(0.95)
	}
	return st
}
