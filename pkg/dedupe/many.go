package dedupe

import (
	"context"
	"errors"
	"sync"
)

// manyConcurrency bounds the calls States and ForgetAll have in flight. It
// stays below go-redis's default pool size (10 per CPU) on small machines.
const manyConcurrency = 16

// States returns the records of many windows at once, for operators'
// tools (kjobctl backfill, replay, dlq) that look at thousands of windows:
// it calls State for each id with a bounded number of calls in flight.
// Windows without a record are left out of the map. It fails on the first
// error other than ErrNotFound (an invalid id gives ErrInvalidID). It uses
// only State, so it reads exactly what State reads.
func (s *Store) States(ctx context.Context, ids []string) (map[string]State, error) {
	out := make(map[string]State, len(ids))
	var mu sync.Mutex
	err := s.each(ctx, ids, func(ctx context.Context, id string) error {
		st, err := s.State(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		mu.Lock()
		out[id] = st
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
