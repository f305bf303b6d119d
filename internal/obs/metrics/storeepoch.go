package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kjob/kjob/internal/store/storeepoch"
)

// The store epoch's metrics (internal/store/storeepoch), read at scrape time.
var (
	storeEpochDesc = prometheus.NewDesc("kjob_store_epoch",
		"The store epoch this worker last proved: every fencing token it hands out is above epoch << 32. It grows by one each time Redis is found wiped, restarted or failed over.",
		nil, nil)
	storeProvenDesc = prometheus.NewDesc("kjob_store_epoch_proven",
		"1 while this worker's store epoch is proven and it claims windows; 0 while claims are refused because Redis may have lost data (or the epoch cannot be read from or written to Kafka).",
		nil, nil)
	storeWipedDesc = prometheus.NewDesc("kjob_store_wiped",
		"1 from the moment this worker found Redis wiped (its store epoch marker gone while Kafka holds an epoch) until a new store epoch is proven; 0 otherwise. Paused jobs, run history, the audit stream and redrive records were lost with the data.",
		nil, nil)
	storeLossesDesc = prometheus.NewDesc("kjob_store_losses_total",
		"Redis data losses this worker detected, by cause: wiped (the epoch marker was gone), restarted (the server's run_id changed: a restart or failover that may have lost the last writes).",
		[]string{"cause"}, nil)
)

// storeEpochCollector reports a storeepoch.Guard's status.
type storeEpochCollector struct{ status func() storeepoch.Status }

// StoreEpoch returns a collector of kjob_store_epoch,
// kjob_store_epoch_proven, kjob_store_wiped and kjob_store_losses_total
// from status (usually (*storeepoch.Guard).Status), read at scrape time.
func StoreEpoch(status func() storeepoch.Status) prometheus.Collector {
	return storeEpochCollector{status: status}
}

func (c storeEpochCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeEpochDesc
	ch <- storeProvenDesc
	ch <- storeWipedDesc
	ch <- storeLossesDesc
}

func (c storeEpochCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(storeEpochDesc, prometheus.GaugeValue, float64(st.Epoch))
	ch <- prometheus.MustNewConstMetric(storeProvenDesc, prometheus.GaugeValue, b(st.Proven))
	ch <- prometheus.MustNewConstMetric(storeWipedDesc, prometheus.GaugeValue, b(st.Wiped))
	ch <- prometheus.MustNewConstMetric(storeLossesDesc, prometheus.CounterValue, float64(st.Wipes), "wiped")
	ch <- prometheus.MustNewConstMetric(storeLossesDesc, prometheus.CounterValue, float64(st.Restarts), "restarted")
}
