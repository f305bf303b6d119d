package test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

const handoverSchedules = `jobs:
  - name: beat
    schedule: "@every 1s"
    handler: log
`

// BenchmarkProducerHandover measures the graceful producer handover between
// separate producer processes at their default settings (lease TTL 2s,
// renew 300ms) with the dev broker and a real redis-server: from SIGTERM to
// the leader until the standby logs "publishing as leader" (lease taken,
// transactional id fenced, state read, timers set), taken from the
// standby's log timestamp. KJOB_HANDOVER_REPS repetitions (default 20),
// each at a random point of the 1s cadence; prints p50/p99/max:
//
//	KJOB_TEST_REQUIRE_REDIS=1 go test -run '^$' -bench ProducerHandover -benchtime 1x ./test/
//
// (the repetitions are inside; b.N is not used).
func BenchmarkProducerHandover(b *testing.B) {
	reps := testenv.Reps(b, "KJOB_HANDOVER_REPS", 20)
	c := newCluster(b, handoverSchedules, 1)
	c.env = append(c.env, "KJOB_LOG_LEVEL=info")
	next := 0
	producer := func() *process {
		next++
		return c.startProducer(b, fmt.Sprintf("producer-%d", next))
	}
	leader := producer()
	testenv.Eventually(b, 60*time.Second, func() bool { return leader.hasLine("publishing as leader") }, "no producer leads")
	var samples []time.Duration
	for range reps {
		standby := producer()
		testenv.Eventually(b, 60*time.Second, func() bool { return standby.hasLine("lease held by another replica") }, "%s is not on standby", standby.name)
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second)))) // a random point of the cadence
		sent := time.Now()
		leader.stop(b, 20*time.Second)
		testenv.Eventually(b, 30*time.Second, func() bool { return standby.hasLine("publishing as leader") }, "%s did not take over", standby.name)
		at, ok := lastLineTime(standby, "publishing as leader")
		if !ok {
			b.Fatalf("%s: no time in its \"publishing as leader\" line", standby.name)
		}
		samples = append(samples, at.Sub(sent))
		b.Logf("handover #%d: %s publishing as leader %v after SIGTERM to %s", len(samples), standby.name, at.Sub(sent).Round(100*time.Microsecond), leader.name)
		leader = standby
	}
	leader.stop(b, 20*time.Second)
	slices.Sort(samples)
	fmt.Fprintf(os.Stdout, "\nproducer handover (processes): SIGTERM to the leader -> standby \"publishing as leader\"; %d repetitions; lease TTL %v, renew %v; dev broker, %s\n"+
		"p50 %v  p99 %v  max %v  (with few samples p99 is the maximum)\n",
		reps, foLeaseTTL, foLeaseRenew, c.redis, nearestRank(samples, 50), nearestRank(samples, 99), samples[len(samples)-1].Round(100*time.Microsecond))
}

// nearestRank returns the p-th percentile (nearest rank) of sorted ds,
// to 0.1ms.
func nearestRank(ds []time.Duration, p int) time.Duration {
	i := (p*len(ds)+99)/100 - 1
	return ds[max(0, min(i, len(ds)-1))].Round(100 * time.Microsecond)
}
