// Package kread reads a bounded range of a Kafka partition, for operator
// tools and readers that look at records without joining a consumer
// group: it lists the offsets a read covers (ListSpans, ListSpansSince),
// reads up to them (Each, ReadSpans) or tells a reader that goes on when
// it has (Backlog), and bounds a read by its progress (StallContext)
// rather than by its length.
package kread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readFetchBytes bounds one fetch of a read (kgo's default is 50 MB).
const readFetchBytes = 1 << 20

// Range returns the records of topic[partition] at offsets [from, to), read
// committed: records of aborted transactions and transaction markers are
// left out. opts are the client options (seed brokers, TLS, SASL). It reads
// until it has seen offset to-1 or a later one (see Backlog: to is an end
// offset as ListSpans lists it, or an offset a committed read reached), or
// fails when ctx ends. It holds every record in memory: use Each for ranges that
// may be large.
func Range(ctx context.Context, opts []kgo.Opt, topic string, partition int32, from, to int64) ([]*kgo.Record, error) {
	var out []*kgo.Record
	err := Each(ctx, opts, topic, partition, from, to, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each calls fn for every record of topic[partition] at offsets [from, to)
// in offset order, read committed like Range, without keeping them: memory
// stays bounded by one fetch whatever the size of the range. It stops at
// fn's first error and returns it.
func Each(ctx context.Context, opts []kgo.Opt, topic string, partition int32, from, to int64, fn func(*kgo.Record) error) error {
	if from >= to {
		return nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		// One bounded fetch in flight: the client would otherwise buffer up
		// to 50 MB per broker ahead of what is read, a cost a worker's
		// time-lag collector paid every few seconds.
		kgo.FetchMaxBytes(readFetchBytes), kgo.FetchMaxPartitionBytes(readFetchBytes), kgo.MaxConcurrentFetches(1),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("read %s[%d]: %w", topic, partition, err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s[%d] offsets %d-%d: %w", topic, partition, from, to-1, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("read %s[%d]: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		done := false
		var fnErr error
		fs.EachRecord(func(r *kgo.Record) {
			if done || fnErr != nil || r.Offset >= to {
				done = true
				return
			}
			if !r.Attrs.IsControl() {
				fnErr = fn(r)
			}
			if reached(r, to) {
				done = true
			}
		})
		if fnErr != nil {
			return fnErr
		}
		if done {
			return nil
		}
	}
}
