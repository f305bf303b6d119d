package dedupe

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Stall is a partition whose commit point a worker cannot move: settling
// its oldest unsettled record keeps failing (a dead letter the broker does
// not take, the idempotency store not answering), as opposed to a handler
// that simply runs long. Workers record their stalls here so that operators'
// tools (kjobctl status, the dashboard) see them without scraping every
// worker.
type Stall struct {
	// Worker is the worker that owns the partition.
	Worker string `json:"worker"`
	// Partition is the stalled partition of the windows topic.
	Partition int32 `json:"partition"`
	// Offset is the record the partition is stuck on.
	Offset int64 `json:"offset"`
	// Window is that record's window id, if it has one.
	Window string `json:"window,omitempty"`
	// Reason says what keeps failing.
	Reason string `json:"reason"`
	// Since is when it started failing.
	Since time.Time `json:"since"`
	// Until is when the record lapses unless its worker writes it again:
	// a worker that died leaves no stale stall behind.
	Until time.Time `json:"until"`
}

// stallsKey is the hash of every worker's stalls,
// "kjob:{<ns>:_stalls}": inside the workers' key pattern (kjob:{<ns>:*),
// under a hash tag no job can have (job names have no '_').
func (s *Store) stallsKey() string { return s.names.StallsKey() }

// ReportStalls replaces worker's stalls with stalls (none: it has none),
// each kept until its Until.
func (s *Store) ReportStalls(ctx context.Context, worker string, stalls []Stall) error {
	key := s.stallsKey()
	prefix := worker + "/"
	fields, err := s.rdb.HKeys(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("report stalls: %w", err)
	}
	keep := map[string]bool{}
	pipe := s.rdb.Pipeline()
	for _, st := range stalls {
		st.Worker = worker
		b, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("report stalls: %w", err)
		}
		f := prefix + strconv.FormatInt(int64(st.Partition), 10)
		keep[f] = true
		pipe.HSet(ctx, key, f, b)
	}
	for _, f := range fields {
		if len(f) > len(prefix) && f[:len(prefix)] == prefix && !keep[f] {
			pipe.HDel(ctx, key, f)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("report stalls: %w", err)
	}
	return nil
}

// Stalls returns the stalls workers reported that have not lapsed, by
// partition then worker. Lapsed records are left for their workers (or
// the next report) to remove.
func (s *Store) Stalls(ctx context.Context, now time.Time) ([]Stall, error) {
	vals, err := s.rdb.HGetAll(ctx, s.stallsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("stalls: %w", err)
	}
	var out []Stall
	for f, v := range vals {
		var st Stall
		if err := json.Unmarshal([]byte(v), &st); err != nil {
			return nil, fmt.Errorf("stalls: field %q: %w", f, err)
		}
		if st.Until.After(now) {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Worker < out[j].Worker
	})
	return out, nil
}
