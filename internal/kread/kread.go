// Package kread reads a bounded range of a Kafka partition, for operator
// tools that look at records without joining a consumer group.
package kread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Range returns the records of topic[partition] at offsets [from, to), read
// committed: records of aborted transactions and transaction markers are
// left out. opts are the client options (seed brokers, TLS, SASL). It reads
// until it has seen offset to-1 (which must be a record or a marker, as the
// end offset and every committed offset of kjob's topics are), or fails
// when ctx ends.
func Range(ctx context.Context, opts []kgo.Opt, topic string, partition int32, from, to int64) ([]*kgo.Record, error) {
	if from >= to {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, fmt.Errorf("read %s[%d]: %w", topic, partition, err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s[%d] offsets %d-%d: %w", topic, partition, from, to-1, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("read %s[%d]: %w", t, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done || r.Offset >= to {
				done = true
				return
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset >= to-1 {
				done = true
			}
		})
		if done {
			return out, nil
		}
	}
}
