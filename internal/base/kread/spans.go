package kread

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Span is the offsets [Start, End) of one partition that a read covers.
// End is the partition's high watermark when it was listed: offset End-1
// is the last record or transaction marker written before the listing.
// Start is at most End.
type Span struct{ Start, End int64 }

// Spans maps each partition of a topic to its Span.
type Spans map[int32]Span

// ListSpans lists what a read of every partition of topic from its start
// up to now covers: Start is the log start offset, End the high
// watermark. opts are the client options (seed brokers, TLS, SASL). A
// topic that does not exist is an error that errors.Is
// kerr.UnknownTopicOrPartition.
func ListSpans(ctx context.Context, opts []kgo.Opt, topic string) (Spans, error) {
	return listSpans(ctx, opts, topic, func(adm *kadm.Client) (kadm.ListedOffsets, error) {
		return adm.ListStartOffsets(ctx, topic)
	})
}

// ListSpansSince is ListSpans with each Start the offset of the first
// record whose timestamp is at or after since, or End if no record is.
//
// Every record written after the listing is at End or after it, so a
// reader that starts at Start and goes on past End misses none of them.
// That holds because End is listed first and Start is never past it: when
// no record is at or after since, a broker answers -1 and kadm lists the
// end offset again, later, and a record written between the two listings
// would be before that second end. (Used as the start, it was: a schedule
// request written as a producer leader started its term was never read,
// docs/schedules.md.)
func ListSpansSince(ctx context.Context, opts []kgo.Opt, topic string, since time.Time) (Spans, error) {
	return listSpans(ctx, opts, topic, func(adm *kadm.Client) (kadm.ListedOffsets, error) {
		return adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topic)
	})
}

// listSpans lists topic's end offsets, then its start offsets with
// listStarts, and clamps each start to its end.
func listSpans(ctx context.Context, opts []kgo.Opt, topic string, listStarts func(*kadm.Client) (kadm.ListedOffsets, error)) (Spans, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	starts, err := listStarts(adm)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	out := Spans{}
	ends.Each(func(e kadm.ListedOffset) {
		s := e.Offset
		if o, ok := starts.Lookup(topic, e.Partition); ok && o.Offset >= 0 && o.Offset < s {
			s = o.Offset
		}
		out[e.Partition] = Span{Start: s, End: e.Offset}
	})
	return out, nil
}

// Partitions returns the partitions of s in order.
func (s Spans) Partitions() []int32 {
	out := make([]int32, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Backlog returns the partitions of s that have records to read (Start
// below End) with their End, for a reader that starts at the Starts.
func (s Spans) Backlog() Backlog {
	b := Backlog{}
	for p, sp := range s {
		if sp.Start < sp.End {
			b[p] = sp.End
		}
	}
	return b
}

// Backlog tracks the partitions a reader has not yet read up to the End
// of their Span. The reader must be read committed and keep control
// records (kgo.KeepControlRecords), and pass every record it gets to See.
//
// A partition is read once the reader gets offset End-1 or a later one.
// End-1 is a record or a transaction marker (a marker is kept), never a
// record of an aborted transaction (its abort marker comes after it).
// If a transaction was open at the listing, End-1 may be one of its
// records: a read-committed reader gets it, or the marker after it, once
// the transaction ends, so the partition is read then.
type Backlog map[int32]int64

// See records that the reader got r.
func (b Backlog) See(r *kgo.Record) {
	if end, ok := b[r.Partition]; ok && reached(r, end) {
		delete(b, r.Partition)
	}
}

// reached reports whether a read-committed reader that keeps control
// records and got r has read its partition up to end (see Backlog).
func reached(r *kgo.Record, end int64) bool { return r.Offset >= end-1 }

// Read reports whether every partition has been read up to its End.
func (b Backlog) Read() bool { return len(b) == 0 }

// ReadSpans calls fn for every record of topic in spans, read committed
// (as Each), partition by partition in order. It stops at fn's first
// error and returns it.
func ReadSpans(ctx context.Context, opts []kgo.Opt, topic string, spans Spans, fn func(*kgo.Record) error) error {
	for _, p := range spans.Partitions() {
		sp := spans[p]
		if err := Each(ctx, opts, topic, p, sp.Start, sp.End, fn); err != nil {
			return err
		}
	}
	return nil
}
