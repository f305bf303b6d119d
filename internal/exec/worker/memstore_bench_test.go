package worker

import (
	"context"
	"sync"
	"time"

	"github.com/kjob/kjob/internal/store/dedupe"
)

// memStore is an in-memory Store for measuring the worker alone
// (BenchmarkBacklog with KJOB_BENCH_MEMSTORE=1): claims, completions and
// chained claims, without fencing details a benchmark never meets.
type memStore struct {
	mu  sync.Mutex
	tok int64
	st  map[string]*memWin
}

type memWin struct {
	status string
	token  int64
	att    int
}

func (m *memStore) ClaimBatch(ctx context.Context, ids []string, owner string) ([]dedupe.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]dedupe.Claim, len(ids))
	for i, id := range ids {
		w := m.st[id]
		if w == nil {
			w = &memWin{}
			m.st[id] = w
		}
		if w.status == "done" {
			out[i] = dedupe.Claim{WindowID: id, Outcome: dedupe.AlreadyDone, Token: w.token}
			continue
		}
		m.tok++
		w.status, w.token, w.att = "running", m.tok, w.att+1
		out[i] = dedupe.Claim{WindowID: id, Outcome: dedupe.Claimed, Token: w.token, Attempt: w.att, Holder: owner}
	}
	return out, nil
}

func (m *memStore) Settle(ctx context.Context, ss []dedupe.Settlement, runs ...dedupe.Run) ([]dedupe.Result, error) {
	errs := make([]dedupe.Result, len(ss))
	for i, s := range ss {
		m.mu.Lock()
		w := m.st[s.ID]
		if w == nil || w.token != s.Token {
			errs[i].Err = dedupe.ErrFenced
			m.mu.Unlock()
			continue
		}
		switch s.Op {
		case dedupe.OpComplete:
			w.status = "done"
		case dedupe.OpRelease:
			w.status = "failed"
		}
		m.mu.Unlock()
		if s.Next != "" {
			cs, _ := m.ClaimBatch(ctx, []string{s.Next}, s.Owner)
			errs[i].Next = cs[0]
		}
	}
	return errs, nil
}

func (m *memStore) ClaimTTL() time.Duration  { return 6 * time.Second }
func (m *memStore) Retention() time.Duration { return 7 * 24 * time.Hour }
