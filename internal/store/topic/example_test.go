package topic_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/topic"
)

// Ensure creates a missing topic, accepts an existing one with the same
// settings, and refuses one whose settings differ, saying how to fix it.
// Each call stands for a process starting (a new client each time: a
// client caches metadata briefly). The example uses the in-process kfake
// broker.
func ExampleEnsure() {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer kafka.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ensure := func(specs ...topic.Spec) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.ListenAddrs()...))
		if err != nil {
			return err
		}
		defer cl.Close()
		return topic.Ensure(ctx, kadm.NewClient(cl), specs...)
	}

	windows := topic.Spec{Name: "kjob.windows", Partitions: 3, ReplicationFactor: 1}
	state := topic.Spec{Name: "kjob.windows.state", Partitions: 1, ReplicationFactor: 1, Compacted: true}
	fmt.Println("first start:", ensure(windows, state))
	fmt.Println("second start:", ensure(windows, state))

	windows.Partitions = 4 // a replica configured differently
	err = ensure(windows, state)
	fmt.Println("mismatch:", errors.Is(err, topic.ErrMismatch))
	fmt.Println(err)
	// Output:
	// first start: <nil>
	// second start: <nil>
	// mismatch: true
	// topic kjob.windows exists but has 3 partitions, configured 4 (set the partitions setting to 3, or add partitions with kafka-topics --alter; note that changing the count moves jobs between partitions): topic settings mismatch
}
