package metrics_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/obs/metrics"
)

// A worker main wires the hooks into its configuration; here the hook is
// called by hand to show what it records.
func Example() {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	cfg := worker.Config{OnExecuted: m.Executed} // and Store: m.Store(store), ...
	cfg.OnExecuted(worker.Execution{Job: "report", Outcome: worker.OutcomeSkippedDone})

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "kjob_executions_total" {
			for _, s := range mf.GetMetric() {
				fmt.Println(mf.GetName(), s.GetLabel()[0].GetValue(), s.GetLabel()[1].GetValue(), s.GetCounter().GetValue())
			}
		}
	}
	// Output: kjob_executions_total report skipped-done 1
}
