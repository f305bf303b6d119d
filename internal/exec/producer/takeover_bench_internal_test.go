package producer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
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

// fillSpecs writes n jobs' spec records to the schedules topic as a
// leader writes an import: MaxEdits records per transaction.
func fillSpecs(tb testing.TB, w *specWriter, ns string, n int) {
	tb.Helper()
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i += specs.MaxEdits {
		recs := make([]*kgo.Record, 0, specs.MaxEdits)
		for j := i; j < min(n, i+specs.MaxEdits); j++ {
			recs = append(recs, w.rec(ns, fmt.Sprintf("job-%06d", j), 1, "1m", "", t0))
		}
		w.txnOf(true, recs...)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSchedulesTakeover measures, on the embedded broker (kfake), the
// read of the schedules topic a new leader does after fencing, with
// 10,000 and 100,000 jobs in the topic (one spec record each, written
// 1,000 to a transaction as an import writes them):
//
//   - cold: a replica that read nothing before (catchUp of an empty view:
//     the whole topic, each spec validated), as every takeover did before
//     standbys followed the topic;
//   - warm-tail=N: a standby whose view is up to date but for N changes
//     committed after its last fetch (catchUp of the tail).
//
// It reports ms per read, the records read, the topic's bytes and the
// live heap of one view (the memory a replica keeps for the topic).
//
//	go test -run '^$' -bench SchedulesTakeover -benchtime 3x ./internal/exec/producer/
func BenchmarkSchedulesTakeover(b *testing.B) {
	for _, jobs := range []int{10_000, 100_000} {
		brokers := testenv.Brokers(b)
		p, err := New(Config{Brokers: brokers, Elector: noElector{}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		w := newSpecWriter(b, brokers, p.cfg.SchedulesTopic)
		fillSpecs(b, w, p.cfg.Namespace, jobs)
		size := logBytes(b, brokers, p.cfg.SchedulesTopic)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		b.Cleanup(cancel)

		b.Run(fmt.Sprintf("cold/jobs=%d", jobs), func(b *testing.B) {
			var read int
			for range b.N {
				b.StopTimer()
				base := heapInUse()
				b.StartTimer()
				v := newSpecView()
				n, err := p.catchUp(ctx, v)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if len(v.live) != jobs {
					b.Fatalf("read %d jobs, want %d", len(v.live), jobs)
				}
				read = n
				b.ReportMetric(float64(heapInUse()-base)/(1<<20), "view-MiB")
				runtime.KeepAlive(v)
				b.StartTimer()
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(read), "records")
			b.ReportMetric(float64(size), "topic-bytes")
			b.ReportMetric(float64(perOp.Microseconds())/1000, "ms/read")
			b.Logf("embedded broker (kfake): cold takeover read of %d jobs (%d records, %d bytes): %v", jobs, read, size, perOp.Round(100*time.Microsecond))
		})
		for _, tail := range []int{1, 1000} {
			b.Run(fmt.Sprintf("warm-tail=%d/jobs=%d", tail, jobs), func(b *testing.B) {
				b.StopTimer()
				v := newSpecView()
				if _, err := p.catchUp(ctx, v); err != nil { // the standby's view
					b.Fatal(err)
				}
				var read int
				for i := range b.N {
					recs := make([]*kgo.Record, 0, tail)
					for j := range tail {
						job := fmt.Sprintf("job-%06d", (i*tail+j)%jobs)
						recs = append(recs, w.rec(p.cfg.Namespace, job, v.live[job].version+1, "2m", "", time.Now()))
					}
					w.txnOf(true, recs...)
					b.StartTimer()
					n, err := p.catchUp(ctx, v)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					read = n
				}
				if read != tail {
					b.Fatalf("read %d records, want the %d committed since", read, tail)
				}
				perOp := b.Elapsed() / time.Duration(b.N)
				b.ReportMetric(float64(read), "records")
				b.ReportMetric(float64(perOp.Microseconds())/1000, "ms/read")
				b.Logf("embedded broker (kfake): warm takeover read, %d jobs, %d changes since the standby's last fetch: %v", jobs, tail, perOp.Round(100*time.Microsecond))
			})
		}
	}
}
