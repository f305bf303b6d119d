package operator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestRedrives(t *testing.T) {
	r := testenv.NewRedis(t)
	rd, err := operator.NewRedrives(r.Client(), "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := dlq.Origin{Topic: "w.dlq", Partition: 0, Offset: 3}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if _, ok, err := rd.Get(ctx, l); ok || err != nil {
		t.Fatalf("Get before any redrive: %v %v", ok, err)
	}
	first, err := rd.Begin(ctx, operator.Redrive{Letter: l, WindowID: "a@1", At: at, By: "alice"}, false)
	if err != nil || first.Done() {
		t.Fatalf("Begin: %+v %v", first, err)
	}
	cur, err := rd.Begin(ctx, operator.Redrive{Letter: l, WindowID: "a@1", At: at.Add(time.Hour), By: "bob"}, false)
	if !errors.Is(err, operator.ErrAlreadyRedriven) || cur.By != "alice" {
		t.Fatalf("second Begin: %+v %v, want ErrAlreadyRedriven with alice's", cur, err)
	}
	first.Topic, first.Partition, first.Offset = "w", 1, 42
	if err := rd.Finish(ctx, first); err != nil {
		t.Fatal(err)
	}
	other := dlq.Origin{Topic: "other.dlq", Offset: 3}
	if _, err := rd.Begin(ctx, operator.Redrive{Letter: other, At: at}, false); err != nil {
		t.Fatal(err)
	}
	m, err := rd.List(ctx, "w.dlq")
	if err != nil || len(m) != 1 || !m[l].Done() || m[l].Offset != 42 || !m[l].At.Equal(at) {
		t.Fatalf("List = %+v %v", m, err)
	}
	if _, err := rd.Begin(ctx, operator.Redrive{Letter: l, At: at.Add(2 * time.Hour), By: "carol"}, true); err != nil {
		t.Fatalf("forced Begin: %v", err)
	}
	if g, _, _ := rd.Get(ctx, l); g.By != "carol" || g.Done() {
		t.Fatalf("after a forced Begin: %+v", g)
	}
	if err := rd.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := rd.Get(ctx, l); ok {
		t.Fatal("Delete kept the record")
	}
}

func TestPublished(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	p, err := operator.NewPublished(rdb, "t", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.NewPublished(rdb, "t", 0); err == nil {
		t.Fatal("NewPublished accepted a zero retention")
	}
	ctx := context.Background()
	var ids []string
	for i := range 2500 { // more than one pipeline
		ids = append(ids, fmt.Sprintf("j@%d#backfill", i))
	}
	got, err := p.Reserve(ctx, ids[:2000], time.Minute)
	if err != nil || len(got) != 2000 || slices.Contains(got, false) {
		t.Fatalf("first Reserve: %d results, %v", len(got), err)
	}
	got, err = p.Reserve(ctx, ids, time.Minute)
	if err != nil || len(got) != 2500 || slices.Contains(got[:2000], true) || slices.Contains(got[2000:], false) {
		t.Fatalf("second Reserve: want the first 2000 refused, the rest reserved; %v", err)
	}
	// A reservation lives for the hold; a confirmed marker for the retention.
	if err := p.Confirm(ctx, ids[:10]); err != nil {
		t.Fatal(err)
	}
	ttl := func(id string) time.Duration {
		d, err := rdb.PTTL(ctx, "kjob:{t}:published:"+id).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := ttl(ids[0]); d <= time.Minute || d > time.Hour {
		t.Fatalf("confirmed marker TTL %v, want the retention (1h)", d)
	}
	if d := ttl(ids[20]); d <= 0 || d > time.Minute {
		t.Fatalf("reserved marker TTL %v, want the hold (1m)", d)
	}
	if err := p.Release(ctx, ids[:5]); err != nil {
		t.Fatal(err)
	}
	marked, err := p.Marked(ctx, ids[:10])
	if err != nil || !slices.Equal(marked, []bool{false, false, false, false, false, true, true, true, true, true}) {
		t.Fatalf("Marked after Release = %v %v", marked, err)
	}
	if err := p.Mark(ctx, ids[:1]); err != nil {
		t.Fatal(err)
	}
	if m, _ := p.Marked(ctx, ids[:1]); !m[0] {
		t.Fatal("Mark did not set the marker")
	}
}
