package metrics

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakeSlots struct{ inUse, waiting atomic.Int64 }

func (f *fakeSlots) Concurrency() int    { return 8 }
func (f *fakeSlots) SlotsInUse() int     { return int(f.inUse.Load()) }
func (f *fakeSlots) WaitingForSlot() int { return int(f.waiting.Load()) }

// The slot gauges are read from the worker at scrape time.
func TestSlotGauges(t *testing.T) {
	f := &fakeSlots{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Slots(f))
	f.inUse.Store(8)
	f.waiting.Store(12)
	want := `
# HELP kjob_worker_slots Windows this worker may run at once (its concurrency).
# TYPE kjob_worker_slots gauge
kjob_worker_slots 8
# HELP kjob_worker_slots_in_use Slots taken now: windows being claimed or running. Equal to kjob_worker_slots while windows wait, slots are the bottleneck.
# TYPE kjob_worker_slots_in_use gauge
kjob_worker_slots_in_use 8
# HELP kjob_worker_windows_waiting_slot Windows of the partitions this worker owns that are due to start (their overlap policy lets them) but wait for a slot: every slot is taken, or their job holds its max_concurrent.
# TYPE kjob_worker_windows_waiting_slot gauge
kjob_worker_windows_waiting_slot 12
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	f.inUse.Store(3)
	f.waiting.Store(0)
	want = `
# HELP kjob_worker_slots_in_use Slots taken now: windows being claimed or running. Equal to kjob_worker_slots while windows wait, slots are the bottleneck.
# TYPE kjob_worker_slots_in_use gauge
kjob_worker_slots_in_use 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kjob_worker_slots_in_use"); err != nil {
		t.Fatal(err)
	}
	names := strings.Join(Names(), " ")
	for _, n := range []string{"kjob_worker_slots", "kjob_worker_slots_in_use", "kjob_worker_windows_waiting_slot"} {
		if !strings.Contains(" "+names+" ", " "+n+" ") {
			t.Errorf("Names() lacks %s", n)
		}
	}
}
