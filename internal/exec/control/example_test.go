package control_test

import (
	"context"
	"log"

	"github.com/kjob/kjob/internal/exec/control"
)

// A worker runs an Agent next to its *worker.Worker so operators can
// replay its partitions while it runs. It needs Kafka, so it is compiled
// but not run.
func ExampleAgent() {
	var w control.Seeker // the *worker.Worker
	a, err := control.NewAgent(control.AgentConfig{
		Brokers: []string{"127.0.0.1:9092"}, Group: "kjob-workers", Topic: "kjob.windows",
		Member: "worker-1", Seeker: w,
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = a.Run(context.Background()) // until the context ends
}
