package test

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaFaults injects Kafka errors into an in-process kfake cluster through
// its control hooks (kfake's fault injection): while a kind is on, every
// request of that kind is answered with a retriable error instead of being
// served.
type kafkaFaults struct {
	commit, produce, coordinator atomic.Bool
	// Hits count the requests answered with an error, per kind (a commit
	// refused as NOT_COORDINATOR counts for the coordinator fault).
	commitHits, produceHits, coordinatorHits atomic.Int64
}

// Kinds of injected Kafka errors, as reported in the run's summary.
const (
	faultKafkaCommit      = "kafka: offset commits fail (COORDINATOR_NOT_AVAILABLE)"
	faultKafkaProduce     = "kafka: produce errors (NOT_LEADER_FOR_PARTITION)"
	faultKafkaCoordinator = "kafka: coordinator lost (commits answered NOT_COORDINATOR, FindCoordinator refused)"
)

// install adds the control hooks to c; they stay for the cluster's life and
// only act while their kind is on. A hook must return at once: kfake's one
// request loop waits for a hook's answer and serves no other client
// meanwhile, so a hook that blocks (or sleeps without SleepControl) times
// out every client's requests together.
func (f *kafkaFaults) install(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		code := kerr.CoordinatorNotAvailable.Code
		switch {
		case f.commit.Load():
			f.commitHits.Add(1)
		case f.coordinator.Load():
			// The coordinator fault reached this client: it now looks
			// its coordinator up again (FindCoordinator, refused too
			// while the fault lasts). A burst during which no client
			// committed and none looked a coordinator up found no
			// target.
			code = kerr.NotCoordinator.Code
			f.coordinatorHits.Add(1)
		default:
			return nil, nil, false
		}
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !f.produce.Load() {
			return nil, nil, false
		}
		f.produceHits.Add(1)
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.NotLeaderForPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !f.coordinator.Load() {
			return nil, nil, false
		}
		f.coordinatorHits.Add(1)
		r := req.(*kmsg.FindCoordinatorRequest)
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		keys := r.CoordinatorKeys
		if len(keys) == 0 {
			keys = []string{r.CoordinatorKey}
		}
		for _, k := range keys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.NodeID, rc.ErrorCode = k, -1, kerr.CoordinatorNotAvailable.Code
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		return resp, nil, true
	})
}
