package producer_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// A schedule request written at any moment of a leader's start is
// answered: while it fences, reads the state, reads the schedules,
// commits the file's import, and while its request reader lists the
// control topic; also one written as a term fails at its start, or read
// by a term that fails before its answer commits (the next term answers
// both).
//
// "between the listing by time and the end listing" is issue 23's lost
// request: the reader had listed the control topic's end, found no
// request of the last RequestTTL (the topic is new), and kadm listed the
// end again to answer "the first offset after the time"; that second
// end, used as the reader's start, was past the request, so the request
// was never read and its writer got ErrNoLeader (docs/schedules.md).
func TestRequestWrittenAsTheLeaderStartsIsAnswered(t *testing.T) {
	d := names.Deployment{}.WithDefaults()
	any := func(kmsg.Request) bool { return true }
	listing := func(topic string, ts func(int64) bool) func(kmsg.Request) bool {
		return testenv.ListsOffsetsOf(topic, ts)
	}
	isEnd := func(ts int64) bool { return ts == -1 }
	byTime := func(ts int64) bool { return ts >= 0 }
	for _, tc := range []struct {
		name  string
		jobs  []*schedule.Job // the schedules file: its import commits before the reader starts
		key   kmsg.Key
		match func(kmsg.Request) bool // the request is written when the leader sends this
		// fail, if set, answers the first request of failKey that
		// failMatch accepts with an error: the term fails, and the next
		// one must answer.
		failKey   kmsg.Key
		failMatch func(kmsg.Request) bool
		fail      func(kmsg.Request) kmsg.Response
	}{
		{name: "fencing", key: kmsg.InitProducerID, match: func(r kmsg.Request) bool {
			return r.(*kmsg.InitProducerIDRequest).TransactionalID != nil
		}},
		{name: "reading the state", key: kmsg.ListOffsets, match: listing("kjob.windows.state", isEnd)},
		{name: "reading the schedules", key: kmsg.ListOffsets, match: listing(d.SchedulesTopic(), isEnd)},
		{name: "committing the file's import", jobs: jobs(t, everyTen), key: kmsg.EndTxn, match: any},
		{name: "the reader listing the end", key: kmsg.ListOffsets, match: listing(d.ControlTopic(), isEnd)},
		{name: "the reader listing by time", key: kmsg.ListOffsets, match: listing(d.ControlTopic(), byTime)},
		{name: "between the listing by time and the end listing"}, // the lost request
		{name: "a term failing at its start", key: kmsg.ListOffsets, match: listing(d.ControlTopic(), byTime),
			failKey: kmsg.ListOffsets, failMatch: listing(d.ControlTopic(), byTime), fail: func(r kmsg.Request) kmsg.Response {
				req := r.(*kmsg.ListOffsetsRequest)
				resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
				for _, t := range req.Topics {
					rt := kmsg.NewListOffsetsResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewListOffsetsResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p.Partition, kerr.UnknownServerError.Code
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
				return resp
			}},
		{name: "a term failing before its answer commits", key: kmsg.ListOffsets, match: listing(d.ControlTopic(), isEnd),
			failKey: kmsg.EndTxn, failMatch: any, fail: func(r kmsg.Request) kmsg.Response {
				resp := r.(*kmsg.EndTxnRequest).ResponseKind().(*kmsg.EndTxnResponse)
				resp.ErrorCode = kerr.UnknownServerError.Code
				return resp
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.Cluster(t)
			brokers := c.ListenAddrs()
			// No idempotent writes: the writer sends no InitProducerID
			// (the "fencing" case waits for the leader's).
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			req := &specs.Request{ID: "at-the-start", Namespace: d.Namespace, Actor: "test", Source: specs.Source{Kind: specs.SourceAPI},
				Edits: []specs.Edit{{Op: specs.OpPut, Job: "j", Spec: every("j", "1h")}}}
			var werr error
			write := func() {
				req.IssuedAt = time.Now()
				rec, err := req.Record(d.ControlTopic())
				if err == nil {
					err = cl.ProduceSync(context.Background(), rec).FirstErr()
				}
				werr = err
			}
			var written <-chan struct{}
			if tc.match == nil {
				written = testenv.WriteWhileListingSince(c, d.ControlTopic(), write)
			} else {
				written = testenv.RunAt(c, tc.key, tc.match, write)
			}
			if tc.fail != nil {
				failOnce(c, tc.failKey, tc.failMatch, tc.fail)
			}
			logs := testenv.NewLogBuffer(t)
			startProducer(t, brokers, clock.Real{}, tc.jobs, alwaysLeader{}, func(cfg *producer.Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			testenv.Recv(t, written, 30*time.Second, "the request written as the leader starts")
			if werr != nil {
				t.Fatal(werr)
			}
			var res *specs.Result
			testenv.Eventually(t, specs.DefaultWait, func() bool {
				for _, r := range testenv.ReadCommitted(t, brokers, d.ControlTopic()) {
					if specs.Kind(r) != specs.KindResult {
						continue
					}
					if x, err := specs.ParseResult(r); err == nil && x.RequestID == req.ID {
						res = x
					}
				}
				return res != nil
			}, "request %s, written as the leader started (%s), not answered within a client's default wait", req.ID, tc.name)
			if res.Refused != nil || len(res.Applied) != 1 || res.Applied[0].VersionAfter != 1 {
				t.Fatalf("the request's result: refused %+v, applied %+v; want j put at version 1", res.Refused, res.Applied)
			}
			if tc.fail != nil && !strings.Contains(logs.String(), "publishing term ended") {
				t.Fatal("the failure injected did not end a term")
			}
		})
	}
}

// failOnce answers the first request of key that match accepts with
// fail's response.
func failOnce(c *kfake.Cluster, key kmsg.Key, match func(kmsg.Request) bool, fail func(kmsg.Request) kmsg.Response) {
	var done atomic.Bool
	c.ControlKey(key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if done.Load() || !match(req) {
			return nil, nil, false
		}
		done.Store(true)
		return fail(req), nil, true
	})
}
