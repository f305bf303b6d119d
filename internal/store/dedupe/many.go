package dedupe

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// manyConcurrency bounds the calls States and ForgetAll have in flight. It
// stays below go-redis's default pool size (10 per CPU) on small machines.
const manyConcurrency = 16

// statesChunk is how many windows one States round trip reads.
const statesChunk = 1000

// States returns the records of many windows at once, for operators' tools
// (kjobctl backfill, replay, dlq) and the time-lag collector, which look at
// thousands of windows: one pipelined round trip of HMGET per thousand
// windows, with the server's TIME for the claims' remaining lifetimes.
// Windows without a record are left out of the map. An invalid id fails it
// with ErrInvalidID before anything is sent. It reads the fields State
// reads.
func (s *Store) States(ctx context.Context, ids []string) (map[string]State, error) {
	out := make(map[string]State, len(ids))
	keys := make([]string, len(ids))
	for i, id := range ids {
		w, _, err := s.key(id)
		if err != nil {
			return nil, fmt.Errorf("states: %w", err)
		}
		keys[i] = w
	}
	for from := 0; from < len(ids); from += statesChunk {
		to := min(len(ids), from+statesChunk)
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.SliceCmd, to-from)
		for i := from; i < to; i++ {
			cmds[i-from] = pipe.HMGet(ctx, keys[i], "status", "token", "attempts", "holder", "updated_ms", "last_error", "claim_until_ms")
		}
		now := pipe.Time(ctx)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("states of %d windows: %w", to-from, err)
		}
		nowMS := now.Val().UnixMilli()
		for i, c := range cmds {
			st, ok, err := stateOf(c.Val(), nowMS)
			if err != nil {
				return nil, fmt.Errorf("states: %s: %w", ids[from+i], err)
			}
			if ok {
				out[ids[from+i]] = st
			}
		}
	}
	return out, nil
}

// stateOf decodes an HMGET of a window's hash (the fields States asks
// for); ok is false when the window has no record.
func stateOf(v []any, nowMS int64) (State, bool, error) {
	if len(v) != 7 {
		return State{}, false, fmt.Errorf("dedupe: unexpected reply %#v", v)
	}
	str := func(x any) string { s, _ := x.(string); return s }
	status := str(v[0])
	if status == "" {
		return State{}, false, nil
	}
	num := func(x any) int64 {
		n, _ := strconv.ParseInt(str(x), 10, 64)
		return n
	}
	st := State{Status: status, Token: num(v[1]), Attempts: int(num(v[2])), Holder: str(v[3]),
		UpdatedAt: time.UnixMilli(num(v[4])), LastError: str(v[5])}
	if status == StatusRunning {
		if left := num(v[6]) - nowMS; left > 0 {
			st.ClaimTTL = time.Duration(left) * time.Millisecond
		}
	}
	return st, true, nil
}

// ForgetAll calls Forget for every id, with a bounded number of calls in
// flight, and fails on the first error (some ids may be forgotten by then;
// Forget is idempotent, so calling ForgetAll again is safe).
func (s *Store) ForgetAll(ctx context.Context, ids []string) error {
	return s.each(ctx, ids, s.Forget)
}

// each runs fn for every id on at most manyConcurrency goroutines and
// returns the first error; it stops starting new calls after one.
func (s *Store) each(ctx context.Context, ids []string, fn func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan string)
	for range min(manyConcurrency, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				if err := fn(ctx, id); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, id := range ids {
		select {
		case next <- id:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
