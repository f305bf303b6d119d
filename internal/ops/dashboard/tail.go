package dashboard

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/jobmsg"
)

// tail follows the windows topic without joining a group and keeps the
// newest n records of each partition.
type tail struct {
	opts []kgo.Opt
	n    int

	mu   sync.Mutex
	recs map[int32][]tailRec // per partition, oldest first, at most n
}

type tailRec struct {
	exec Execution
}

func newTail(brokers []string, clientOpts []kgo.Opt, topic string, n int) *tail {
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, clientOpts...)
	opts = append(opts,
		kgo.ClientID("kjob-dashboard"),
		kgo.ConsumeTopics(topic),
		// Start a little before the end of each partition: every window
		// record is followed by a transaction marker, which takes an
		// offset too.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd().Relative(-int64(2*n+2))),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	return &tail{opts: opts, n: n, recs: map[int32][]tailRec{}}
}

// run consumes until ctx ends. A topic that does not exist yet is waited
// for (the producer creates it).
func (t *tail) run(ctx context.Context) error {
	cl, err := kgo.NewClient(t.opts...)
	if err != nil {
		return fmt.Errorf("dashboard: kafka client: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachRecord(t.add)
	}
}

func (t *tail) add(r *kgo.Record) {
	e := Execution{Partition: r.Partition, Offset: r.Offset}
	m, err := jobmsg.FromRecord(r)
	if err != nil {
		e.Invalid = err.Error()
		e.Job = string(r.Key)
		e.PublishedAt = r.Timestamp.UTC()
		e.Outcome = "invalid"
	} else {
		e.ID, e.Job, e.Trigger = m.ID, m.Job, string(m.Trigger)
		e.WindowStart, e.PublishedAt = m.Window.Start.UTC(), m.PublishedAt.UTC()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := append(t.recs[r.Partition], tailRec{exec: e})
	if len(rs) > t.n {
		rs = append(rs[:0:0], rs[len(rs)-t.n:]...)
	}
	t.recs[r.Partition] = rs
}

// newest returns the newest n records over all partitions (by publish
// time), in no particular order.
func (t *tail) newest() []tailRec {
	t.mu.Lock()
	var all []tailRec
	for _, rs := range t.recs {
		all = append(all, rs...)
	}
	t.mu.Unlock()
	if len(all) <= t.n {
		return all
	}
	// Keep the n newest by publish time.
	sortByPublished(all)
	return all[:t.n]
}

func sortByPublished(rs []tailRec) {
	slices.SortStableFunc(rs, func(a, b tailRec) int { return b.exec.PublishedAt.Compare(a.exec.PublishedAt) })
}
