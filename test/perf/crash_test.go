package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// BenchmarkCrashRedelivery: what a worker SIGKILLed with 100 windows in
// flight leaves to the partition's next owner. One partition holds 3,000
// windows of 3,000 jobs whose handler sleeps 1 s; a worker with
// KJOB_CONCURRENCY=100 (so 100 windows run at any moment) works on them
// for a while and is SIGKILLed. Then the group's committed offset, the
// windows settled above it and those in flight at the kill are read from
// Kafka and Redis, and a second worker takes the partition over: every
// record from the committed offset on is delivered to it again; those
// settled by the first worker are skipped as done (Redis says so), those in
// flight run again once their claims expire. The worst case is bounded by
// KJOB_MAX_UNCOMMITTED (records fetched and not committed) plus one fetch.
func BenchmarkCrashRedelivery(b *testing.B) {
	for range b.N {
		crashRedelivery(b)
	}
}

func crashRedelivery(b *testing.B) {
	const n, concurrency = 3000, 100
	brokers := broker(b)
	r := redis(b)
	cl, adm := admin(b, brokers)
	topic, group := "crash", "crash"
	createTopic(b, adm, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := make([]string, n)
	recs := make([]*kgo.Record, n)
	for i := range n {
		job := fmt.Sprintf("crash-%04d", i)
		m := &jobmsg.Message{
			Namespace: "crash", ID: jobmsg.WindowID(job, base), Job: job, Handler: "sleep",
			Window:      jobmsg.Window{Start: base, End: base.Add(time.Hour)},
			ScheduledAt: base, PublishedAt: base, Trigger: jobmsg.TriggerBackfill,
			Payload: json.RawMessage(`{"duration":"1s"}`), Policy: benchPolicy,
		}
		rec, err := jobmsg.Record(topic, m)
		if err != nil {
			b.Fatal(err)
		}
		ids[i], recs[i] = m.ID, rec
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatalf("prefill: %v", err)
	}
	env := []string{fmt.Sprintf("KJOB_CONCURRENCY=%d", concurrency)}
	args := []string{"--brokers", brokers[0], "--redis-url", r.URL(), "--topic", topic, "--group", group,
		"--namespace", "crash", "--http-addr", "", "--log-level", "warn", "--claim-ttl", "6s", "--session-timeout", "6s"}
	w1 := startEnv(b, "worker", env, "", append(args, "--id", "worker-1")...)
	waitStable(b, adm, group)
	// Let it commit a few hundred windows, with 100 running.
	committed := func() int64 {
		os, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			b.Fatal(err)
		}
		at, _ := os.Lookup(topic, 0)
		return at.At
	}
	deadline := time.Now().Add(2 * time.Minute)
	for committed() < 500 {
		if time.Now().After(deadline) {
			b.Fatalf("the first worker committed only %d windows in 2 minutes", committed())
		}
		time.Sleep(100 * time.Millisecond) // polling the group's offsets: there is no event to wait on
	}
	_ = w1.cmd.Process.Kill()
	<-w1.done
	commitAt := committed()

	// What the next owner finds: from the commit point on, the windows
	// the first worker settled, and those it had in flight.
	store, err := dedupe.New(r.Client(), dedupe.Config{Namespace: "crash"})
	if err != nil {
		b.Fatal(err)
	}
	sts, err := store.States(ctx, ids[commitAt:])
	if err != nil {
		b.Fatal(err)
	}
	settledAbove, inFlight, last := 0, 0, commitAt-1
	for i := commitAt; i < n; i++ {
		st, ok := sts[ids[i]]
		if !ok {
			continue
		}
		switch {
		case st.Status == dedupe.StatusDone:
			settledAbove++
		case st.Status == dedupe.StatusRunning:
			inFlight++
		}
		last = i
	}
	redelivered := last - commitAt + 1 // records the first worker had taken on from the commit point

	t0 := time.Now()
	w2 := startEnv(b, "worker", env, "", append(args, "--id", "worker-2")...)
	defer func() { _ = w2.cmd.Process.Kill(); <-w2.done }()
	deadline = time.Now().Add(5 * time.Minute)
	for {
		l, err := lag(ctx, adm, group, topic)
		if err == nil && l == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the second worker did not drain the partition within 5 minutes (lag %d, %v)", l, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the broker
	}
	took := time.Since(t0)
	reruns := 0
	all, err := store.States(ctx, ids)
	if err != nil {
		b.Fatal(err)
	}
	for _, id := range ids {
		st := all[id]
		if st.Status != dedupe.StatusDone {
			b.Fatalf("window %s after the takeover: %+v; want done", id, st)
		}
		if st.Attempts > 1 {
			reruns++
		}
	}
	settings := fmt.Sprintf("%d windows of %d jobs in 1 partition, built-in sleep handler 1s, KJOB_CONCURRENCY=%d, KJOB_MAX_UNCOMMITTED default %s, claim TTL 6s, session timeout 6s; "+
		"the first worker SIGKILLed once 500 windows were committed; %s", n, n, concurrency, strconv.Itoa(10_000), machine())
	report(b, "crash with 100 in flight: records delivered again to the next owner", float64(redelivered), "records", settings+"; from the committed offset to the last record the first worker had claimed")
	report(b, "crash with 100 in flight: of those, settled above the commit point (skipped as done)", float64(settledAbove), "windows", settings)
	report(b, "crash with 100 in flight: in flight at the kill (run again once their claims expire)", float64(inFlight), "windows", settings)
	report(b, "crash with 100 in flight: windows that ran twice", float64(reruns), "windows", settings+"; attempts > 1 in Redis after the takeover")
	report(b, "crash with 100 in flight: takeover to all done", took.Seconds(), "s", settings+"; session timeout 6s + claim TTL 6s, then the rest of the backlog at 100/s")
}
