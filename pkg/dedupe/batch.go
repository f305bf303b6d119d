package dedupe

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ClaimBatch claims every window of ids for owner in one round trip. Each
// claim is atomic on its own, the batch is not: on a single server or
// Sentinel the whole batch is one script call, on a Cluster one call per
// job (the keys of one call must share a slot), pipelined. Result i is the
// outcome for ids[i], as Claim would report it; an id repeated in ids
// reports Busy (held by owner) the second time. An invalid id fails the
// whole batch before Redis is contacted. Any other error means the outcome
// of every window is unknown: some may have been claimed, and those are
// Busy until their claims expire.
func (s *Store) ClaimBatch(ctx context.Context, ids []string, owner string) ([]Claim, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	groups, err := s.group(ids)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	for g, idx := range groups {
		for _, i := range idx {
			w, c, t, _ := s.keys(ids[i])
			keys[g] = append(keys[g], w, c, t)
		}
		args[g] = []any{owner, s.claimMS, s.retainMS}
	}
	cmds, err := s.pipeline(ctx, claimBatchScript, keys, args)
	if err != nil {
		return nil, fmt.Errorf("claim batch of %d: %w", len(ids), err)
	}
	out := make([]Claim, len(ids))
	for g, cmd := range cmds {
		replies, ok := cmd.Val().([]any)
		if !ok || len(replies) != len(groups[g]) {
			return nil, fmt.Errorf("claim batch: dedupe: unexpected reply %#v", cmd.Val())
		}
		for k, i := range groups[g] {
			c, err := parseClaim(ids[i], replies[k])
			if err != nil {
				return nil, fmt.Errorf("claim batch: claim %s: %w", ids[i], err)
			}
			out[i] = c
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
	return s.casBatch(ctx, "extend", extendBatchScript, ids, tokens, s.claimMS, s.retainMS)
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

// casBatch runs a batch compare-and-set script (see casScripts) over ids
// and tokens, with the shared arguments.
func (s *Store) casBatch(ctx context.Context, op string, script *redis.Script, ids []string, tokens []int64, shared ...any) ([]error, error) {
	if len(ids) != len(tokens) {
		return nil, fmt.Errorf("%s batch: %d ids but %d tokens; pass one token per id", op, len(ids), len(tokens))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	groups, err := s.group(ids)
	if err != nil {
		return nil, fmt.Errorf("%s batch: %w", op, err)
	}
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	for g, idx := range groups {
		args[g] = append([]any{len(idx)}, shared...)
		for _, i := range idx {
			w, c, _, _ := s.keys(ids[i])
			keys[g] = append(keys[g], w, c)
			args[g] = append(args[g], strconv.FormatInt(tokens[i], 10))
		}
	}
	cmds, err := s.pipeline(ctx, script, keys, args)
	if err != nil {
		return nil, fmt.Errorf("%s batch of %d: %w", op, len(ids), err)
	}
	errs := make([]error, len(ids))
	for g, cmd := range cmds {
		res, err := cmd.Int64Slice()
		if err != nil || len(res) != len(groups[g]) {
			return nil, fmt.Errorf("%s batch: dedupe: unexpected reply %#v", op, cmd.Val())
		}
		for k, i := range groups[g] {
			errs[i] = casResult(op, ids[i], res[k])
		}
	}
	return errs, nil
}

// group splits the indexes of ids into the groups whose keys one script
// call may touch: all of them on a single server or Sentinel, one group
// per job (hash tag) on a Cluster, where a script's keys must share a slot.
func (s *Store) group(ids []string) ([][]int, error) {
	_, cluster := s.rdb.(*redis.ClusterClient)
	var groups [][]int
	byTag := map[string]int{}
	for i, id := range ids {
		w, _, _, err := s.keys(id)
		if err != nil {
			return nil, err
		}
		tag := ""
		if cluster {
			tag = w[:strings.IndexByte(w, '}')]
		}
		g, ok := byTag[tag]
		if !ok {
			g = len(groups)
			byTag[tag] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups, nil
}

// pipeline runs script once per keys[i], args[i] in one pipeline of
// EVALSHA. Commands the server answered NOSCRIPT (script cache flushed, a
// new server, another Cluster node) did not run; they are sent again as
// EVAL, which also caches the script. It returns an error if any command
// failed otherwise.
func (s *Store) pipeline(ctx context.Context, script *redis.Script, keys [][]string, args [][]any) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(keys))
	pipe := s.rdb.Pipeline()
	for i := range keys {
		cmds[i] = script.EvalSha(ctx, pipe, keys[i], args[i]...)
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
			cmds[i] = script.Eval(ctx, pipe, keys[i], args[i]...)
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
