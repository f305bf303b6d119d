package dedupe

import (
	"context"
	"errors"
	"fmt"
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
	groups, err := s.group(ids, true)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	out := make([]Claim, len(ids))
	if len(groups) > 1 && s.crossJob(ctx) {
		if groups, err = s.claimAcross(ctx, out, ids, owner, groups); err != nil {
			return nil, fmt.Errorf("claim batch of %d: %w", len(ids), err)
		}
		if len(groups) == 0 {
			return out, nil
		}
	}
	args := []any{owner, s.claimMS, s.holdMS}
	cmds, err := s.pipeline(ctx, claimBatchScript, groups, func(*batchGroup) []any { return args })
	if err != nil {
		return nil, fmt.Errorf("claim batch of %d: %w", len(ids), err)
	}
	for g, cmd := range cmds {
		if err := parseClaims(out, ids, groups[g].idx, owner, cmd.Val()); err != nil {
			return nil, fmt.Errorf("claim batch: %w", err)
		}
	}
	return out, nil
}

// CompleteBatch completes ids[i] with tokens[i] for every i in one round
// trip, grouped like ClaimBatch. errs[i] is what Complete would return for
// ids[i]: nil, ErrAlreadyDone or ErrFenced (wrapped). The second result is
// an error for the batch as a whole (mismatched lengths, an invalid id,
// Redis unreachable): then no per-window result is known, and the caller
// may retry; windows completed by the failed call then report
// ErrAlreadyDone.
func (s *Store) CompleteBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error) {
	return s.casBatch(ctx, "complete", completeBatchScript, ids, tokens, s.retainMS)
}

// ExtendBatch extends the claims ids[i] holds with tokens[i], as Extend
// would, in one round trip: for a worker holding claims on windows it has
// not started yet. Results are reported as by CompleteBatch.
func (s *Store) ExtendBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error) {
	return s.casBatch(ctx, "extend", extendBatchScript, ids, tokens, s.claimMS, s.holdMS)
}

// UnclaimBatch gives back claims whose attempts never started (a worker
// that claimed a batch ahead and then lost its partition), in one round
// trip. Unlike Release it also takes back the attempt the claim counted, so
// the window's next claim reports the same attempt number again; a window
// claimed for the first time is left as if never claimed. The token counter
// is not rolled back: tokens stay unique. Results are reported as by
// CompleteBatch.
func (s *Store) UnclaimBatch(ctx context.Context, ids []string, tokens []int64) ([]error, error) {
	return s.casBatch(ctx, "unclaim", unclaimBatchScript, ids, tokens, s.retainMS)
}

// casBatch runs a compare-and-set batch script (see casScript) over ids
// and tokens, with the shared arguments.
func (s *Store) casBatch(ctx context.Context, op string, script *redis.Script, ids []string, tokens []int64, shared ...any) ([]error, error) {
	if len(ids) != len(tokens) {
		return nil, fmt.Errorf("%s batch: %d ids but %d tokens; pass one token per id", op, len(ids), len(tokens))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	groups, err := s.group(ids, false)
	if err != nil {
		return nil, fmt.Errorf("%s batch: %w", op, err)
	}
	if len(groups) > 1 && s.crossJob(ctx) {
		// The compare-and-set scripts take windows of any jobs: one call
		// per run of groups, each group's windows in order.
		errs := make([]error, len(ids))
		left, err := s.across(ctx, script, groups, func(g *batchGroup) []any { return casArgs(shared, tokens, g) },
			func(call *batchGroup, cmd *redis.Cmd) error { return casResults(op, ids, call.idx, cmd, errs) })
		if err != nil {
			return nil, fmt.Errorf("%s batch of %d: %w", op, len(ids), err)
		}
		if len(left) == 0 {
			return errs, nil
		}
		cmds, err := s.pipeline(ctx, script, left, func(g *batchGroup) []any { return casArgs(shared, tokens, g) })
		if err != nil {
			return nil, fmt.Errorf("%s batch of %d: %w", op, len(ids), err)
		}
		for g, cmd := range cmds {
			if err := casResults(op, ids, left[g].idx, cmd, errs); err != nil {
				return nil, err
			}
		}
		return errs, nil
	}
	cmds, err := s.pipeline(ctx, script, groups, func(g *batchGroup) []any { return casArgs(shared, tokens, g) })
	if err != nil {
		return nil, fmt.Errorf("%s batch of %d: %w", op, len(ids), err)
	}
	errs := make([]error, len(ids))
	for g, cmd := range cmds {
		if err := casResults(op, ids, groups[g].idx, cmd, errs); err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// casArgs returns the arguments of a compare-and-set call over g: the
// shared ones, then the token of each of g's windows.
func casArgs(shared []any, tokens []int64, g *batchGroup) []any {
	args := make([]any, 0, len(shared)+len(g.idx))
	args = append(args, shared...)
	for _, i := range g.idx {
		args = append(args, tokens[i])
	}
	return args
}

// casResults records in errs the result of each window of a
// compare-and-set call (idx its windows' indexes into ids).
func casResults(op string, ids []string, idx []int, cmd *redis.Cmd, errs []error) error {
	res, err := cmd.Text()
	if err != nil || len(res) != len(idx) {
		return fmt.Errorf("%s batch: dedupe: unexpected reply %#v", op, cmd.Val())
	}
	for k, i := range idx {
		errs[i] = casResult(op, ids[i], res[k])
	}
	return nil
}

// batchGroup is the windows of one job in a batch: the keys of one script
// call. A cross-job call (merge) is a batchGroup too, made of groups.
type batchGroup struct {
	idx  []int    // indexes into the batch's ids, in order
	keys []string // window hash keys in idx order, after the job's token key if asked for

	groups []*batchGroup // the jobs' groups a cross-job call is made of, in order
}

// group splits the indexes of ids by job (hash tag), in order of first
// appearance, and computes each window's key once. A script call's keys
// must share one slot on Redis Cluster; grouping whatever the client (a
// proxy or a client wrapper may front a cluster too) keeps every script
// within one slot. withToken puts the job's token counter key first.
func (s *Store) group(ids []string, withToken bool) ([]*batchGroup, error) {
	var groups []*batchGroup
	var last *batchGroup
	lastTag := ""
	byTag := map[string]*batchGroup{}
	for i, id := range ids {
		w, tag, err := s.key(id)
		if err != nil {
			return nil, err
		}
		g := last
		if w[:tag] != lastTag { // runs of one job skip the map
			g = byTag[w[:tag]]
			if g == nil {
				g = &batchGroup{}
				if withToken {
					g.keys = append(g.keys, tokenKey(w, tag))
				}
				byTag[w[:tag]] = g
				groups = append(groups, g)
			}
			last, lastTag = g, w[:tag]
		}
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, w)
	}
	return groups, nil
}

// pipeline runs script once per group; see pipelineCmds. It returns an
// error if any command failed.
func (s *Store) pipeline(ctx context.Context, script *redis.Script, groups []*batchGroup, argsOf func(*batchGroup) []any) ([]*redis.Cmd, error) {
	cmds := s.pipelineCmds(ctx, script, groups, argsOf)
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
// error.
func (s *Store) pipelineCmds(ctx context.Context, script *redis.Script, groups []*batchGroup, argsOf func(*batchGroup) []any) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(groups))
	args := make([][]any, len(groups))
	pipe := s.rdb.Pipeline()
	for i, g := range groups {
		args[i] = argsOf(g)
		cmds[i] = script.EvalSha(ctx, pipe, g.keys, args[i]...)
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
			cmds[i] = script.Eval(ctx, pipe, groups[i].keys, args[i]...)
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
// one group after the other.
func merge(run []*batchGroup) *batchGroup {
	if len(run) == 1 {
		return &batchGroup{idx: run[0].idx, keys: run[0].keys, groups: run}
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
func (s *Store) claimAcross(ctx context.Context, out []Claim, ids []string, owner string, groups []*batchGroup) ([]*batchGroup, error) {
	args := func(m *batchGroup) []any {
		args := make([]any, 0, 3+len(m.groups))
		args = append(args, owner, s.claimMS, s.holdMS)
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
func (s *Store) across(ctx context.Context, script *redis.Script, groups []*batchGroup, argsOf func(*batchGroup) []any, use func(call *batchGroup, cmd *redis.Cmd) error) ([]*batchGroup, error) {
	calls := make([]*batchGroup, 0, 1)
	for _, run := range bundle(groups) {
		calls = append(calls, merge(run))
	}
	cmds := s.pipelineCmds(ctx, script, calls, argsOf)
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
