package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted reads every partition of topic from the start to its current
// end, read-committed, and returns the data records (transaction markers
// are consumed but not returned; aborted records are never returned).
func ReadCommitted(tb testing.TB, brokers []string, topic string) []*kgo.Record {
	tb.Helper()
	return ReadTopic(tb, brokers, topic).Records
}

// TopicRead is what ReadTopic read: the data records and, per partition,
// the end offset listed before reading and the offset the reader got to,
// so a caller can prove the topic was read to its end.
type TopicRead struct {
	// Records are the committed data records, partition by partition in
	// offset order.
	Records []*kgo.Record
	// Ends are the partitions' end offsets when the read began; every
	// partition of the topic is listed.
	Ends map[int32]int64
	// ReadTo is, per partition, one past the offset of the last record or
	// transaction marker consumed (0 for an empty partition).
	ReadTo map[int32]int64
}

// ReadTopic is ReadCommitted that also reports the end offsets and how far
// each partition was read. It fails tb if a partition is not read to its
// end within 20s.
func ReadTopic(tb testing.TB, brokers []string, topic string) TopicRead {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		tb.Fatalf("testenv: client: %v", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		tb.Fatalf("testenv: end offsets of %s: %v", topic, err)
	}
	out := TopicRead{Ends: map[int32]int64{}, ReadTo: map[int32]int64{}}
	want := map[int32]int64{}
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			listErr = o.Err
			return
		}
		out.Ends[o.Partition], out.ReadTo[o.Partition] = o.Offset, 0
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if listErr != nil {
		tb.Fatalf("testenv: end offsets of %s: %v", topic, listErr)
	}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("testenv: reading %s: partitions not read to their end within 20s: %v", topic, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 > out.ReadTo[r.Partition] {
				out.ReadTo[r.Partition] = r.Offset + 1
			}
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
			if !r.Attrs.IsControl() {
				out.Records = append(out.Records, r)
			}
		})
	}
	return out
}
