package metrics

import "github.com/prometheus/client_golang/prometheus"

// SlotReader is what the slots collector reads from a worker;
// *worker.Worker implements it.
type SlotReader interface {
	// Concurrency is how many windows the worker runs at once.
	Concurrency() int
	// SlotsInUse is how many of them are taken now.
	SlotsInUse() int
	// WaitingForSlot is how many windows are due to start but wait for a
	// slot (every slot taken, or their job at its max_concurrent).
	WaitingForSlot() int
}

var (
	slotsDesc = prometheus.NewDesc("kjob_worker_slots",
		"Windows this worker may run at once (its concurrency).", nil, nil)
	slotsInUseDesc = prometheus.NewDesc("kjob_worker_slots_in_use",
		"Slots taken now: windows being claimed or running. Equal to kjob_worker_slots while windows wait, slots are the bottleneck.", nil, nil)
	waitingSlotDesc = prometheus.NewDesc("kjob_worker_windows_waiting_slot",
		"Windows of the partitions this worker owns that are due to start (their overlap policy lets them) but wait for a slot: every slot is taken, or their job holds its max_concurrent.", nil, nil)
)

// Slots returns a collector of a worker's slots, read at scrape time:
// kjob_worker_slots, kjob_worker_slots_in_use and
// kjob_worker_windows_waiting_slot. A nil r exports nothing.
func Slots(r SlotReader) prometheus.Collector { return slotCollector{r: r} }

type slotCollector struct{ r SlotReader }

func (c slotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- slotsDesc
	ch <- slotsInUseDesc
	ch <- waitingSlotDesc
}

func (c slotCollector) Collect(ch chan<- prometheus.Metric) {
	if c.r == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(c.r.Concurrency()))
	ch <- prometheus.MustNewConstMetric(slotsInUseDesc, prometheus.GaugeValue, float64(c.r.SlotsInUse()))
	ch <- prometheus.MustNewConstMetric(waitingSlotDesc, prometheus.GaugeValue, float64(c.r.WaitingForSlot()))
}
