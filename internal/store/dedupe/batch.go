package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClaimBatch claims every window of ids for owner in one round trip: one
// script call per job (the keys of one call share a hash tag, so one Redis
// Cluster slot, whatever the client), pipelined; or, on a single Redis
// server, one script call for up to a thousand windows of any jobs (see
// Store.crossJob). Each claim is atomic on its own, the batch is not. Result i is the outcome for ids[i], as Claim
// would report it; the tokens of one job's claimed windows increase in the
// order of ids. An id repeated in ids reports Busy (held by owner) the
// second time. An invalid id fails the whole batch before Redis is
// contacted. Any other error means the outcome of every window is unknown:
// some may have been claimed, and those are Busy until their claims
// expire.
func (s *Store) ClaimBatch(ctx context.Context, ids []string, owner string) ([]Claim, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	groups, err := s.group(ids, true, nil)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	out := make([]Claim, len(ids))
	single := (len(groups) > 1 || s.fence.Load() != nil) && s.crossJob(ctx)
	fa, err := s.fenceArgs(single)
	if err != nil {
		return nil, fmt.Errorf("claim batch of %d: %w", len(ids), err)
	}
	if len(groups) > 1 && single {
		if groups, err = s.claimAcross(ctx, out, ids, owner, groups, fa); err != nil {
			return nil, fmt.Errorf("claim batch of %d: %w", len(ids), s.fenceError(err))
		}
		if len(groups) == 0 {
			return out, nil
		}
		fa[1] = "" // the server refused cross-slot calls: no marker check
	}
	args := []any{owner, s.claimMS, s.holdMS, fa[0], fa[1], fa[2]}
	cmds, err := s.pipeline(ctx, claimBatchScript, groups, func(*batchGroup) []any { return args })
	if err != nil {
		return nil, fmt.Errorf("claim batch of %d: %w", len(ids), s.fenceError(err))
	}
	for g, cmd := range cmds {
		if err := parseClaims(out, ids, groups[g].idx, owner, cmd.Val()); err != nil {
			return nil, fmt.Errorf("claim batch: %w", err)
		}
	}
	return out, nil
}

// Op is a state transition Settle applies to a window after it was
// published: every change that follows a claim, and the settlements
// without a run that overlap policies make.
type Op uint8

// The ops. Each is a compare-and-set on the window's record; see Settle.
const (
	// OpExtend keeps Token's live claim alive for another ClaimTTL (see
	// Extend).
	OpExtend Op = iota + 1
	// OpComplete marks the window done for Token (see Complete).
	OpComplete
	// OpRelease gives up Token's claim after a failed attempt, recording
	// Reason (see Release).
	OpRelease
	// OpDeadLetter settles the window as dead-lettered (see DeadLetter).
	OpDeadLetter
	// OpUnclaim gives back Token's claim of an attempt that never started
	// (see UnclaimBatch).
	OpUnclaim
	// OpSkip settles the window as StatusSkipped with Reason: its job's
	// overlap policy did not run it. With Token 0 it needs no live claim
	// on the window (ErrBusy otherwise); with a Token, that token's claim
	// (live, expired or released).
	OpSkip
	// OpSupersede settles the window as StatusSuperseded with Reason: a
	// newer window of its job replaced it. Token as for OpSkip.
	OpSupersede
)

// opCodes are the ops' letters in settleScript.
var opCodes = [...]byte{OpExtend: 'e', OpComplete: 'c', OpRelease: 'r', OpDeadLetter: 'd', OpUnclaim: 'u', OpSkip: 's', OpSupersede: 'p'}

// String returns the op's name, as used in error messages.
func (o Op) String() string {
	switch o {
	case OpExtend:
		return "extend"
	case OpComplete:
		return "complete"
	case OpRelease:
		return "release"
	case OpDeadLetter:
		return "dead-letter"
	case OpUnclaim:
		return "unclaim"
	case OpSkip:
		return "skip"
	case OpSupersede:
		return "supersede"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// takesReason reports whether the op records a reason.
func (o Op) takesReason() bool {
	return o == OpRelease || o == OpDeadLetter || o == OpSkip || o == OpSupersede
}

// Settlement is one window's transition in a Settle batch.
type Settlement struct {
	// ID is the window id.
	ID string
	// Op is the transition.
	Op Op
	// Token is the fencing token of the caller's claim; 0 for a skip or
	// supersede of a window the caller holds no claim on.
	Token int64
	// Reason is recorded by release, dead-letter, skip and supersede as
	// the window's last error (truncated to 4 KiB).
	Reason string
	// Next, with OpComplete only, is a window of the same job to claim
	// for Owner in the same atomic step if, and only if, the completion
	// succeeds: a queue lane's next window, which may start the moment
	// its predecessor is done, one round trip after the predecessor's
	// handler returned. Its claim is Result.Next, decided as ClaimBatch
	// decides one window.
	Next string
	// Owner claims Next (as ClaimBatch's owner); it is required with Next.
	Owner string
}

// Result is what Settle did with one Settlement.
type Result struct {
	// Err is nil, or wraps ErrAlreadyDone (the window is settled already:
	// done, dead, skipped or superseded), ErrFenced (Token is not the
	// window's current claim) or ErrBusy (a token-less skip or supersede
	// found a live claim).
	Err error
	// Next is the claim of Settlement.Next when the settlement had one
	// and succeeded: Claimed, AlreadyDone or Busy. Otherwise Next was not
	// claimed, and Next is the zero Claim (its WindowID is empty).
	Next Claim
}

// Settle applies ss[i] to window ss[i].ID for every i in one round trip:
// one script call per job (or, on a single Redis server, one call for up
// to a thousand windows of any jobs), pipelined, each window's transition
// atomic on its own (with the claim of its Next, if any). res[i] reports
// ss[i] (see Result). The second result is an error for the batch as a
// whole (an unknown op, an invalid id, a Next of another job or without
// an Owner, Redis unreachable): then no per-window result is known, and
// the caller may retry; windows settled by the failed call then report
// ErrAlreadyDone (a repeated extend or release succeeds), and a Next it
// claimed is Busy until its claim expires.
//
// runs, if any, are appended to their jobs' run history (AppendRuns) in
// the same round trip, after the settlements: a worker records the
// settlements of its last call with its next one, so the history costs no
// round trip of its own. Appending is best effort: its errors are not
// reported (a history lost to an outage is not a settlement lost), but an
// invalid run fails the call before anything is sent.
func (s *Store) Settle(ctx context.Context, ss []Settlement, runs ...Run) ([]Result, error) {
	return s.settle(ctx, ss, runs, "settle batch", "settle batch of "+strconv.Itoa(len(ss)))
}

// settle is Settle, with what naming the call in batch-wide errors and
// invalid in errors about invalid window ids.
func (s *Store) settle(ctx context.Context, ss []Settlement, runs []Run, invalid, what string) ([]Result, error) {
	var history []func(redis.Pipeliner)
	if len(runs) > 0 {
		for i := range runs {
			if _, err := runJob(&runs[i]); err != nil {
				return nil, fmt.Errorf("%s: run %d: %w", what, i, err)
			}
		}
		history = append(history, func(pipe redis.Pipeliner) { _ = s.appendRuns(ctx, pipe, runs) })
	}
	if len(ss) == 0 {
		if len(runs) > 0 {
			pipe := s.rdb.Pipeline()
			history[0](pipe)
			_, _ = pipe.Exec(ctx)
		}
		return nil, nil
	}
	ids := make([]string, len(ss))
	var next []string
	for i, st := range ss {
		if st.Op < OpExtend || st.Op > OpSupersede {
			return nil, fmt.Errorf("%s: window %s: unknown op %d", what, st.ID, st.Op)
		}
		ids[i] = st.ID
		if st.Next == "" {
			continue
		}
		switch {
		case st.Op != OpComplete:
			return nil, fmt.Errorf("%s: window %s: Next %s with op %s; only a complete claims a next window", what, st.ID, st.Next, st.Op)
		case st.Owner == "":
			return nil, fmt.Errorf("%s: window %s: Next %s without an Owner; set the owner that claims it", what, st.ID, st.Next)
		}
		if next == nil {
			next = make([]string, len(ss))
		}
		next[i] = st.Next
	}
	groups, err := s.group(ids, false, next)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", invalid, err)
	}
	res := make([]Result, len(ss))
	// Chained claims take tokens: above the epoch's floor, and only while
	// the epoch is proven (an unproven store leaves every Next unclaimed).
	fence := [3]any{"0", "", ""}
	if next != nil && s.fence.Load() != nil {
		fa, err := s.fenceArgs(s.crossJob(ctx))
		if err != nil {
			fa = [3]any{"0", "", fenceRefuse}
		}
		fence = fa
	}
	args := func(g *batchGroup) []any { return s.settleArgs(ss, g, fence) }
	results := func(call *batchGroup, cmd *redis.Cmd) error { return settleResults(ss, call.idx, cmd, res) }
	if len(groups) > 1 && s.crossJob(ctx) {
		if groups, err = s.across(ctx, settleScript, groups, args, results, history...); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if len(groups) == 0 {
			return res, nil
		}
		history = nil // sent with the calls above
	}
	cmds, err := s.pipeline(ctx, settleScript, groups, args, history...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for g, cmd := range cmds {
		if err := results(groups[g], cmd); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// settleArgs returns the arguments of a settleScript call over g. The
// windows' op letters and tokens are written into one string and passed,
// as the owners are, by pointer: boxing a pointer into an interface costs
// no allocation, boxing a string one each (the no-op burst row, test/perf
// BenchmarkBurst).
func (s *Store) settleArgs(ss []Settlement, g *batchGroup, fence [3]any) []any {
	var buf strings.Builder
	buf.Grow(21 * len(g.idx))
	ends := make([]int, len(g.idx))
	n := 0
	for k, i := range g.idx {
		st := &ss[i]
		c := opCodes[st.Op]
		if st.Next != "" {
			c = opChain
			n++
		}
		var spec [21]byte
		spec[0] = c
		buf.Write(strconv.AppendInt(spec[:1], st.Token, 10))
		ends[k] = buf.Len()
	}
	all := buf.String()
	specs := make([]string, len(g.idx))
	args := make([]any, 0, 6+len(g.idx)+n)
	args = append(args, s.claimMS, s.holdMS, s.retainMS, fence[0], fence[1], fence[2])
	from := 0
	for k, i := range g.idx {
		st := &ss[i]
		specs[k] = all[from:ends[k]]
		from = ends[k]
		args = append(args, &specs[k])
		if st.Op.takesReason() {
			args = append(args, truncate(st.Reason, maxReasonBytes))
		}
		if st.Next != "" {
			args = append(args, &st.Owner)
		}
	}
	return args
}

// opChain is settleScript's letter for a complete that chains the claim
// of its Settlement.Next.
const opChain = 'C'

// settleResults records in res the result of each window of a settle
// call (idx its windows' indexes into ss).
func settleResults(ss []Settlement, idx []int, cmd *redis.Cmd, res []Result) error {
	var (
		digits string
		nexts  []any // two values per chained complete (settleScript)
	)
	switch v := cmd.Val().(type) {
	case string:
		digits = v
	case []any:
		if len(v) > 0 {
			digits, _ = v[0].(string)
			nexts = v[1:]
		}
	}
	if len(digits) != len(idx) {
		return fmt.Errorf("settle batch: dedupe: unexpected reply %#v", cmd.Val())
	}
	for k, i := range idx {
		st := ss[i]
		switch digits[k] {
		case resOK:
			res[i].Err = nil
		case resDone:
			res[i].Err = fmt.Errorf("%s %s: %w", st.Op, st.ID, ErrAlreadyDone)
		case resFenced:
			res[i].Err = fmt.Errorf("%s %s: %w", st.Op, st.ID, ErrFenced)
		case resBusy:
			res[i].Err = fmt.Errorf("%s %s: %w", st.Op, st.ID, ErrBusy)
		default:
			return fmt.Errorf("%s %s: dedupe: unexpected reply %q", st.Op, st.ID, digits)
		}
		if st.Next == "" {
			continue
		}
		if len(nexts) < 2 {
			return fmt.Errorf("settle batch: dedupe: unexpected reply %#v", cmd.Val())
		}
		pair := nexts[:2]
		nexts = nexts[2:]
		if t, ok := pair[0].(int64); ok && t == 0 {
			if c, ok := pair[1].(int64); ok && c == 0 {
				continue // the completion failed: Next was left alone
			}
		}
		var c [1]Claim
		if err := parseClaimList(c[:], []string{st.Next}, []int{0}, st.Owner, pair); err != nil {
			return fmt.Errorf("settle batch: next window of %s: %w", st.ID, err)
		}
		res[i].Next = c[0]
	}
	if len(nexts) != 0 {
		return fmt.Errorf("settle batch: dedupe: unexpected reply %#v", cmd.Val())
	}
	return nil
}

// CompleteBatch completes ids[i] with tokens[i] for every i in one round
// trip, as Settle with OpComplete. errs[i] is what Complete would return
// for ids[i]: nil, ErrAlreadyDone or ErrFenced (wrapped). The second
// result is an error for the batch as a whole (mismatched lengths, an
// invalid id, Redis unreachable): then no per-window result is known, and
// the caller may retry; windows completed by the failed call then report
// ErrAlreadyDone.
func (s *Store) CompleteBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error) {
	return s.settleAll(ctx, OpComplete, ids, tokens)
}

// ExtendBatch extends the claims ids[i] holds with tokens[i], as Extend
// would, in one round trip. Results are reported as by CompleteBatch.
func (s *Store) ExtendBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error) {
	return s.settleAll(ctx, OpExtend, ids, tokens)
}

// UnclaimBatch gives back claims whose attempts never started (a worker
// that claimed a window and then lost its partition before starting it),
// in one round trip. Unlike Release it also takes back the attempt the
// claim counted, so the window's next claim reports the same attempt
// number again; a window claimed for the first time is left as if never
// claimed. The token counter is not rolled back: tokens stay unique.
// Results are reported as by CompleteBatch.
func (s *Store) UnclaimBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error) {
	return s.settleAll(ctx, OpUnclaim, ids, tokens)
}

// settleAll settles ids[i] with op and tokens[i].
func (s *Store) settleAll(ctx context.Context, op Op, ids []string, tokens []int64) ([]error, error) {
	if len(ids) != len(tokens) {
		return nil, fmt.Errorf("%s batch: %d ids but %d tokens; pass one token per id", op, len(ids), len(tokens))
	}
	ss := make([]Settlement, len(ids))
	for i, id := range ids {
		ss[i] = Settlement{ID: id, Op: op, Token: tokens[i]}
	}
	res, err := s.settle(ctx, ss, nil, op.String()+" batch", op.String()+" batch of "+strconv.Itoa(len(ss)))
	if err != nil || res == nil {
		return nil, err
	}
	errs := make([]error, len(res))
	for i, r := range res {
		errs[i] = r.Err
	}
	return errs, nil
}

// batchGroup is the windows of one job in a batch: the keys of one script
// call. A cross-job call (merge) is a batchGroup too, made of groups.
type batchGroup struct {
	idx  []int    // indexes into the batch's ids, in order
	keys []string // window hash keys in idx order, after the job's token key if asked for

	groups []*batchGroup // the jobs' groups a cross-job call is made of, in order

	// The groups of one batch are laid out one after the other in two
	// shared arrays (group), so that a cross-job call of consecutive
	// groups is a slice of them rather than a copy: at is this group's
	// offset into them, of the shared arrays all.
	at  batchAt
	all *batchArrays
}

type batchAt struct{ idx, keys int }

type batchArrays struct {
	idx  []int
	keys []string
}

// group splits the indexes of ids by job (hash tag), in order of first
// appearance, and computes each window's key once. A script call's keys
// must share one slot on Redis Cluster; grouping whatever the client (a
// proxy or a client wrapper may front a cluster too) keeps every script
// within one slot. withToken puts the job's token counter key first.
//
// It allocates per call, not per group: the groups' indexes and keys are
// laid out, group after group, in two shared arrays.
//
// next, if not nil, holds for each id the window a settlement chains a
// claim to (Settlement.Next), or "": the key of such an id is followed by
// the next window's key and its job's token counter key. A next window of
// another job than its id's is an error (ErrInvalidID).
func (s *Store) group(ids []string, withToken bool, next []string) ([]*batchGroup, error) {
	// A batch's keys are written one after the other into one string and
	// sliced from it: an allocation per call rather than one per key (the
	// window's, its Next's, its job's token counter's). That and the keys
	// passed by pointer (batchScript.cmd) serve the no-op burst row
	// (test/perf BenchmarkBurst; TestSettleAllocatesPerCall).
	type span struct{ from, to int } // of a key in the call's keys string
	type job struct {
		name     string
		n, keys  int  // windows, keys
		token    bool // has a token key: withToken, or a chained window
		tokenKey span
	}
	var (
		jobs   []job
		byName map[string]int32
		last   int32 = -1
		size   int
	)
	grp := make([]int32, len(ids))
	winKey := len(s.keyPrefix) + len("}:w:")
	for i, id := range ids {
		name, err := s.jobOf(id)
		if err != nil {
			return nil, err
		}
		g := last
		if last < 0 || name != jobs[last].name { // runs of one job skip the map
			if byName == nil {
				byName = make(map[string]int32, min(len(ids), 64))
			}
			var ok bool
			if g, ok = byName[name]; !ok {
				g = int32(len(jobs))
				byName[name] = g
				jobs = append(jobs, job{name: name, token: withToken})
				if withToken {
					jobs[g].keys++
				}
			}
			last = g
		}
		grp[i] = g
		jobs[g].n++
		jobs[g].keys++
		size += winKey + len(name) + len(id)
		if next != nil && next[i] != "" {
			nname, err := s.jobOf(next[i])
			if err != nil {
				return nil, fmt.Errorf("next window of %s: %w", id, err)
			}
			if nname != name {
				return nil, fmt.Errorf("%w %q: the next window of %s must be of the same job", ErrInvalidID, next[i], id)
			}
			size += winKey + len(name) + len(next[i])
			jobs[g].keys += 2
			jobs[g].token = true
		}
	}
	for g := range jobs {
		if jobs[g].token {
			size += len(s.keyPrefix) + len(jobs[g].name) + len("}:token")
		}
	}
	var buf strings.Builder // String() does not copy
	buf.Grow(size)
	put := func(parts ...string) span {
		from := buf.Len()
		for _, p := range parts {
			buf.WriteString(p)
		}
		return span{from, buf.Len()}
	}
	for g := range jobs {
		if j := &jobs[g]; j.token {
			j.tokenKey = put(s.keyPrefix, j.name, "}:token")
		}
	}
	keyOf := make([]span, len(ids))
	var nextOf []span
	if next != nil {
		nextOf = make([]span, len(ids))
	}
	for i, id := range ids {
		name := jobs[grp[i]].name
		keyOf[i] = put(s.keyPrefix, name, "}:w:", id)
		if next != nil && next[i] != "" {
			nextOf[i] = put(s.keyPrefix, name, "}:w:", next[i])
		}
	}
	arena := buf.String()
	key := func(sp span) string { return arena[sp.from:sp.to] }

	nkeys := 0
	for _, j := range jobs {
		nkeys += j.keys
	}
	all := &batchArrays{idx: make([]int, len(ids)), keys: make([]string, nkeys)}
	groups := make([]batchGroup, len(jobs))
	ptrs := make([]*batchGroup, len(jobs))
	pos := batchAt{}
	for g, j := range jobs {
		bg := &groups[g]
		bg.at, bg.all = pos, all
		bg.idx = all.idx[pos.idx : pos.idx : pos.idx+j.n]
		bg.keys = all.keys[pos.keys : pos.keys : pos.keys+j.keys]
		if withToken {
			bg.keys = append(bg.keys, key(j.tokenKey))
		}
		pos.idx += j.n
		pos.keys += j.keys
		ptrs[g] = bg
	}
	for i := range ids {
		g := &groups[grp[i]]
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, key(keyOf[i]))
		if next != nil && next[i] != "" {
			g.keys = append(g.keys, key(nextOf[i]), key(jobs[grp[i]].tokenKey))
		}
	}
	return ptrs, nil
}

// pipeline runs script once per group; see pipelineCmds. It returns an
// error if any command failed.
func (s *Store) pipeline(ctx context.Context, script *batchScript, groups []*batchGroup, argsOf func(*batchGroup) []any, extra ...func(redis.Pipeliner)) ([]*redis.Cmd, error) {
	cmds := s.pipelineCmds(ctx, script, groups, argsOf, extra...)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return nil, err
		}
	}
	return cmds, nil
}

// pipelineCmds runs script once per group, with its keys and argsOf(group), in one pipeline of
// EVALSHA. Commands the server answered NOSCRIPT (script cache flushed, a
// new server, another Cluster node) did not run; they are sent again as
// EVAL, which also caches the script. The caller checks each command's
// error. extra adds commands of the caller's own to the same pipeline,
// after the scripts (sent once: not again with the EVALs).
func (s *Store) pipelineCmds(ctx context.Context, script *batchScript, groups []*batchGroup, argsOf func(*batchGroup) []any, extra ...func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(groups))
	args := make([][]any, len(groups))
	pipe := s.rdb.Pipeline()
	for i, g := range groups {
		args[i] = argsOf(g)
		cmds[i] = script.cmd(ctx, pipe, true, g.keys, args[i])
	}
	for _, add := range extra {
		add(pipe)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below

	var retry []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pipe := s.rdb.Pipeline()
		for _, i := range retry {
			cmds[i] = script.cmd(ctx, pipe, false, groups[i].keys, args[i])
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}

// maxCrossJobKeys caps the keys of one cross-job script call: a script
// holds the server while it runs (about 10µs per window), so a large batch
// is cut into calls of at most this many keys, pipelined.
const maxCrossJobKeys = 1000

// bundle cuts groups, in order, into runs whose keys add up to at most
// maxCrossJobKeys (a larger group is a run of its own).
func bundle(groups []*batchGroup) [][]*batchGroup {
	var runs [][]*batchGroup
	from, keys := 0, 0
	for i, g := range groups {
		if i > from && keys+len(g.keys) > maxCrossJobKeys {
			runs = append(runs, groups[from:i])
			from, keys = i, 0
		}
		keys += len(g.keys)
	}
	return append(runs, groups[from:])
}

// merge makes one cross-job call of run: its groups' keys and indexes,
// one group after the other (a slice of the batch's shared arrays when
// the groups lie next to each other there, as group lays them out).
func merge(run []*batchGroup) *batchGroup {
	if len(run) == 1 {
		return &batchGroup{idx: run[0].idx, keys: run[0].keys, groups: run}
	}
	first, last := run[0], run[len(run)-1]
	adjacent := first.all != nil
	for i := 1; adjacent && i < len(run); i++ {
		prev, g := run[i-1], run[i]
		adjacent = g.all == first.all && g.at.idx == prev.at.idx+len(prev.idx) && g.at.keys == prev.at.keys+len(prev.keys)
	}
	if adjacent {
		end := batchAt{idx: last.at.idx + len(last.idx), keys: last.at.keys + len(last.keys)}
		return &batchGroup{idx: first.all.idx[first.at.idx:end.idx], keys: first.all.keys[first.at.keys:end.keys], groups: run}
	}
	m := &batchGroup{groups: run}
	for _, g := range run {
		m.idx = append(m.idx, g.idx...)
		m.keys = append(m.keys, g.keys...)
	}
	return m
}

// claimAcross claims the windows of groups (of several jobs) with
// claimJobsScript, filling out, and returns the groups left to claim one
// job per call (see across).
func (s *Store) claimAcross(ctx context.Context, out []Claim, ids []string, owner string, groups []*batchGroup, fa [3]any) ([]*batchGroup, error) {
	args := func(m *batchGroup) []any {
		args := make([]any, 0, 6+len(m.groups))
		args = append(args, owner, s.claimMS, s.holdMS, fa[0], fa[1], fa[2])
		for _, g := range m.groups {
			args = append(args, len(g.idx))
		}
		return args
	}
	return s.across(ctx, claimJobsScript, groups, args, func(call *batchGroup, cmd *redis.Cmd) error {
		a, ok := cmd.Val().([]any)
		if !ok {
			return fmt.Errorf("dedupe: unexpected reply %#v", cmd.Val())
		}
		off := 0
		for _, g := range call.groups {
			n := len(g.idx) + 1
			if off+n > len(a) {
				return fmt.Errorf("dedupe: unexpected reply %#v", cmd.Val())
			}
			if err := parseClaims(out, ids, g.idx, owner, a[off:off+n]); err != nil {
				return err
			}
			off += n
		}
		if off != len(a) {
			return fmt.Errorf("dedupe: unexpected reply %#v", cmd.Val())
		}
		return nil
	})
}

// across runs script over groups of several jobs, one call per run of
// groups (bundle), with the arguments argsOf gives, and hands each call's
// reply to use. It returns the groups of the calls the server refused
// because their keys span hash slots (a cluster behind a proxy that
// reported itself standalone): those did not run, and the caller runs them
// one job per call; from then on the store makes only such calls.
func (s *Store) across(ctx context.Context, script *batchScript, groups []*batchGroup, argsOf func(*batchGroup) []any, use func(call *batchGroup, cmd *redis.Cmd) error, extra ...func(redis.Pipeliner)) ([]*batchGroup, error) {
	calls := make([]*batchGroup, 0, 1)
	for _, run := range bundle(groups) {
		calls = append(calls, merge(run))
	}
	cmds := s.pipelineCmds(ctx, script, calls, argsOf, extra...)
	var left []*batchGroup
	for c, cmd := range cmds {
		if slotError(cmd.Err()) {
			s.scripts.Store(scriptsPerJob)
			left = append(left, calls[c].groups...)
			continue
		}
		if err := cmd.Err(); err != nil {
			return nil, err
		}
		if err := use(calls[c], cmd); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// slotError reports whether err is a server's refusal of a call whose keys
// are not all in one of its hash slots: the call did not run.
func slotError(err error) bool {
	return redis.HasErrorPrefix(err, "CROSSSLOT") || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}

// Modes of Store.scripts: whether batches may use cross-job script calls.
const (
	scriptsUnknown  = iota // not asked yet
	scriptsPerJob          // one job per script call
	scriptsCrossJob        // a single server: calls may span jobs
)

// crossJob reports whether a batch may put windows of several jobs into
// one script call. Their keys are in different hash slots, which only a
// single Redis server (standalone, or the master a Sentinel client
// follows) takes: so only with a *redis.Client whose server answers HELLO
// with mode "standalone". Cluster and Ring clients, other wrappers, and
// servers or proxies that do not answer HELLO (or report another mode) get
// one script call per job, as does a server that refuses a cross-job call
// as spanning slots (across). The answer is asked once; if the server
// cannot be reached, this batch goes one job per call and the next batch
// after a minute asks again.
func (s *Store) crossJob(ctx context.Context) bool {
	switch s.scripts.Load() {
	case scriptsPerJob:
		return false
	case scriptsCrossJob:
		return true
	}
	c, ok := s.rdb.(*redis.Client)
	if !ok {
		s.scripts.Store(scriptsPerJob)
		return false
	}
	now := time.Now().UnixNano()
	if next := s.helloAfter.Load(); now < next {
		return false
	}
	v, err := c.Do(ctx, "HELLO").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			s.scripts.Store(scriptsPerJob) // the server answered: no HELLO
		} else {
			s.helloAfter.Store(now + int64(time.Minute))
		}
		return false
	}
	if helloMode(v) == "standalone" {
		s.scripts.Store(scriptsCrossJob)
		return true
	}
	s.scripts.Store(scriptsPerJob)
	return false
}

// helloMode returns the "mode" field of a HELLO reply (a map in RESP3, a
// flat list of fields and values in RESP2), or "".
func helloMode(v any) string {
	switch r := v.(type) {
	case map[any]any:
		m, _ := r["mode"].(string)
		return m
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			if k, _ := r[i].(string); k == "mode" {
				m, _ := r[i+1].(string)
				return m
			}
		}
	}
	return ""
}
