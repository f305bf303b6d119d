package worker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A partition whose oldest record cannot be settled (its dead letter is
// not taken by the broker) is reported stalled once StallAfter has
// passed: by Stalled and StallError (what /readyz answers) and in the
// store for kjobctl status; once the letter is written it is no longer.
func TestStalledPartitionIsReported(t *testing.T) {
	c := testenv.Cluster(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	brokers := c.ListenAddrs()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, testTopic); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, testDLQ); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, testDLQ)
	if err != nil {
		t.Fatal(err)
	}
	dlqID := td[testDLQ].ID
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		if !refuse.Load() || len(r.Topics) == 0 || (r.Topics[0].Topic != testDLQ && r.Topics[0].TopicID != dlqID) {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	r := testenv.NewRedis(t)
	s, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "test", ClaimTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, brokers: brokers, redis: r, store: &countingStore{Store: s, proofs: map[string]time.Time{}}, prod: prod}
	mux := handler.NewMux()
	mux.HandleFunc("ok", func(context.Context, *handler.Job) error { return nil })
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.StallAfter = 300 * time.Millisecond
	w, _ := start(t, cfg)
	e.produce(&kgo.Record{Topic: testTopic, Key: []byte("junk"), Value: []byte("not json")})

	testenv.Eventually(t, 20*time.Second, func() bool { return len(w.Stalled()) == 1 }, "the partition is reported stalled")
	st := w.Stalled()[0]
	if st.Partition != 0 || st.Offset != 0 || !strings.Contains(st.Reason, "dead letter") || st.Worker != "w1" {
		t.Errorf("stall %+v; want partition 0, offset 0, its dead letter, worker w1", st)
	}
	if err := w.StallError(); err == nil || !strings.Contains(err.Error(), "partition 0 cannot move") {
		t.Errorf("StallError = %v", err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		sts, err := s.Stalls(context.Background(), time.Now())
		return err == nil && len(sts) == 1 && sts[0].Worker == "w1"
	}, "the stall is in the store for kjobctl status")

	refuse.Store(false)
	testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDeadLettered) == 1 }, "the letter is written once the topic takes it")
	if st := w.Stalled(); len(st) != 0 {
		t.Errorf("still stalled after the letter was written: %+v", st)
	}
	if err := w.StallError(); err != nil {
		t.Errorf("StallError after the letter was written: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		sts, err := s.Stalls(context.Background(), time.Now())
		return err == nil && len(sts) == 0
	}, "the stall is cleared from the store")
}
