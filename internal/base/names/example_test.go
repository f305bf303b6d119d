package names_test

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
)

// The names of a deployment called "prod" with its default windows topic.
func ExampleDeployment() {
	d := names.Deployment{Namespace: "prod"}
	fmt.Println(d.WindowsTopic(), d.StateTopic(), d.DeadLetterTopic(), d.ControlTopic())
	fmt.Println(d.Group(), d.TransactionalID(), d.LeaseName(), d.LeaseKey())
	fmt.Println(d.JobKey("report", "token"), d.WorkerACLKeys())
	// Output:
	// kjob.prod.windows kjob.prod.windows.state kjob.prod.windows.dlq kjob.prod.windows.control
	// kjob-workers-prod kjob-producer-prod kjob-producer-prod kjob:{prod}:producer-lease
	// kjob:{prod:report}:token ~kjob:{prod:*
}

// Which partition, and so which worker, runs a job's windows; a client
// that writes windows partitions them the same way.
func ExampleJobPartition() {
	fmt.Println(names.JobPartition("nightly-report", 3), names.JobPartition("sync", 3))
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.RecordPartitioner(names.Partitioner()))
	if err == nil {
		cl.Close()
	}
	// Output: 0 2
}
