package producer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/topic"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// fillStateTxn writes txns transactions of perTxn state records each, as
// leaders do: one state record per job published, the jobs due at the
// same instant in one transaction with its commit marker. Job names
// cycle through jobs.
func fillStateTxn(tb testing.TB, brokers []string, stateTopic string, txns, perTxn, jobs int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("bench-fill"), kgo.ProducerLinger(0))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	if err := topic.Ensure(ctx, kadm.NewClient(cl), topic.Spec{Name: stateTopic, Partitions: 1, ReplicationFactor: 1, Compacted: true}); err != nil {
		tb.Fatal(err)
	}
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	n := 0
	for i := range txns {
		at := t0.Add(time.Duration(i) * time.Minute)
		recs := make([]*kgo.Record, 0, perTxn)
		for range perTxn {
			job := fmt.Sprintf("job-%06d", n%jobs)
			n++
			rec, err := jobmsg.StateRecord(stateTopic, jobmsg.State{Job: job, LastWindow: at, LastID: jobmsg.WindowID(job, at), PublishedAt: at})
			if err != nil {
				tb.Fatal(err)
			}
			recs = append(recs, rec)
		}
		if err := cl.BeginTransaction(); err != nil {
			tb.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			tb.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			tb.Fatal(err)
		}
	}
}

// logBytes is the size of topic's log on the broker (DescribeLogDirs).
func logBytes(tb testing.TB, brokers []string, name string) int64 {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == name {
				size += p.Size
			}
		})
	})
	return size
}

// BenchmarkStateTakeover measures, on the embedded broker (kfake), the
// part of a takeover that grows with the state topic: a new leader's
// InitProducerID (fencing) and its read of the whole state topic, against
// the topic's size in records and bytes. The topic is written as leaders
// write it: one state record per job and window, jobs due together in one
// transaction (with its commit marker). kfake does not compact during the
// run, which is what a real broker does to the active segment: every
// record written since the segment rolled is read.
//
//	go test -run '^$' -bench StateTakeover ./internal/exec/producer/
//
// "job-day" is one job every minute for a day (1,440 single-record
// transactions): its bytes are the state topic's growth per such job and
// day.
func BenchmarkStateTakeover(b *testing.B) {
	for _, tc := range []struct {
		name               string
		txns, perTxn, jobs int
	}{
		{"job-day", 1440, 1, 1},
		{"records=1k", 10, 100, 100},
		{"records=10k", 100, 100, 100},
		{"records=100k", 1000, 100, 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			brokers := testenv.Brokers(b)
			const stateTopic = "bench.state"
			fillStateTxn(b, brokers, stateTopic, tc.txns, tc.perTxn, tc.jobs)
			size := logBytes(b, brokers, stateTopic)
			p, _ := stateReader(b, brokers, StateReadStall)
			p.cfg.StateTopic = stateTopic
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			for range b.N {
				cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("bench-leader"))
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := cl.ProducerID(ctx); err != nil {
					b.Fatal(err)
				}
				state, err := p.readState(ctx, cl)
				cl.Close()
				if err != nil {
					b.Fatal(err)
				}
				if len(state) != tc.jobs {
					b.Fatalf("read %d jobs, want %d", len(state), tc.jobs)
				}
			}
			b.StopTimer()
			records := tc.txns * tc.perTxn
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(records), "state-records")
			b.ReportMetric(float64(size), "state-bytes")
			b.ReportMetric(float64(perOp.Microseconds())/1000, "ms/takeover")
			b.Logf("embedded broker (kfake): %d state records (%d jobs), %d bytes, takeover (fence + state read) %v",
				records, tc.jobs, size, perOp.Round(100*time.Microsecond))
		})
	}
}
