package dedupe

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ClaimBatch claims every window of ids for owner in one round trip: one
// script call per job (the keys of one call share a hash tag, so one Redis
// Cluster slot, whatever the client), pipelined. Each claim is atomic on
// its own, the batch is not. Result i is the outcome for ids[i], as Claim
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
	args := []any{owner, s.claimMS, s.holdMS}
	cmds, err := s.pipeline(ctx, claimBatchScript, groups, func(*batchGroup) []any { return args })
	if err != nil {
		return nil, fmt.Errorf("claim batch of %d: %w", len(ids), err)
	}
	out := make([]Claim, len(ids))
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
	cmds, err := s.pipeline(ctx, script, groups, func(g *batchGroup) []any {
		args := make([]any, 0, len(shared)+len(g.idx))
		args = append(args, shared...)
		for _, i := range g.idx {
			args = append(args, tokens[i])
		}
		return args
	})
	if err != nil {
		return nil, fmt.Errorf("%s batch of %d: %w", op, len(ids), err)
	}
	errs := make([]error, len(ids))
	for g, cmd := range cmds {
		res, err := cmd.Text()
		if err != nil || len(res) != len(groups[g].idx) {
			return nil, fmt.Errorf("%s batch: dedupe: unexpected reply %#v", op, cmd.Val())
		}
		for k, i := range groups[g].idx {
			errs[i] = casResult(op, ids[i], res[k])
		}
	}
	return errs, nil
}

// batchGroup is the windows of one job in a batch: the keys of one script
// call.
type batchGroup struct {
	idx  []int    // indexes into the batch's ids, in order
	keys []string // window hash keys in idx order, after the job's token key if asked for
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

// pipeline runs script once per group, with its keys and argsOf(group), in one pipeline of
// EVALSHA. Commands the server answered NOSCRIPT (script cache flushed, a
// new server, another Cluster node) did not run; they are sent again as
// EVAL, which also caches the script. It returns an error if any command
// failed otherwise.
func (s *Store) pipeline(ctx context.Context, script *redis.Script, groups []*batchGroup, argsOf func(*batchGroup) []any) ([]*redis.Cmd, error) {
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
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return nil, err
		}
	}
	return cmds, nil
}
