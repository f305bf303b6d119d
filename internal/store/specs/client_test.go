package specs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// fakeLeader answers every request on the control topic: it refuses an
// edit that expects version 0 of "taken" and applies the rest.
func fakeLeader(ctx context.Context, t *testing.T, brokers []string, topic string) <-chan struct{} {
	done := make(chan struct{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				if specs.Kind(r) != specs.KindRequest {
					return
				}
				q, err := specs.ParseRequest(r)
				if err != nil {
					return
				}
				res := &specs.Result{Namespace: q.Namespace, RequestID: q.ID, Leader: "fake", At: time.Now()}
				for i, e := range q.Edits {
					if e.Job == "taken" && e.ExpectVersion != nil && *e.ExpectVersion == 0 {
						res.Applied = nil
						res.Refused = &specs.Refusal{Kind: specs.RefusedConflict, Edit: i, Job: e.Job, Current: 2, SetBy: "bob"}
						break
					}
					res.Applied = append(res.Applied, specs.Applied{Job: e.Job, Op: e.Op, VersionAfter: 1})
				}
				rec, _ := res.Record(topic)
				cl.Produce(ctx, rec, nil)
			})
		}
	}()
	return done
}

func TestClientSubmitWaitsForTheLeadersResult(t *testing.T) {
	brokers := testenv.Brokers(t)
	d := names.Deployment{Namespace: "prod"}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admc, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admc).CreateTopic(ctx, 1, 1, nil, d.ControlTopic()); err != nil {
		t.Fatal(err)
	}
	admc.Close()
	c, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Deployment: d, Actor: "alice", Wait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	// No leader: a clear error after the bounded wait.
	start := time.Now()
	_, err = c.Submit(ctx, []specs.Edit{{Op: specs.OpDelete, Job: "a"}}, "")
	if !errors.Is(err, specs.ErrNoLeader) || !strings.Contains(err.Error(), `namespace "prod"`) {
		t.Fatalf("without a leader: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("waited %v, want about the 3s wait", el)
	}

	lctx, lcancel := context.WithCancel(ctx)
	done := fakeLeader(lctx, t, brokers, d.ControlTopic())
	defer func() { lcancel(); <-done }()
	res, err := c.Submit(ctx, []specs.Edit{{Op: specs.OpDelete, Job: "a"}}, "note")
	if err != nil || len(res.Applied) != 1 || res.Leader != "fake" {
		t.Fatalf("applied: %+v %v", res, err)
	}
	zero := int64(0)
	_, err = c.Submit(ctx, []specs.Edit{{Op: specs.OpCreate, Job: "taken", ExpectVersion: &zero}}, "")
	if !errors.Is(err, specs.ErrConflict) || !strings.Contains(err.Error(), "bob") {
		t.Fatalf("conflict: %v", err)
	}

	// SubmitAll splits a large apply into requests within the limits.
	edits := make([]specs.Edit, specs.MaxEdits*2+5)
	for i := range edits {
		edits[i] = specs.Edit{Op: specs.OpDelete, Job: "j"}
	}
	if _, err := c.Submit(ctx, edits, ""); !errors.Is(err, specs.ErrTooLarge) {
		t.Fatalf("one request of %d edits: %v", len(edits), err)
	}
	rs, err := c.SubmitAll(ctx, edits, "")
	if err != nil || len(rs) != 3 {
		t.Fatalf("SubmitAll: %d results, %v", len(rs), err)
	}
}
