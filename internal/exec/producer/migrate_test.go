package producer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// The Redis pause list of older versions is moved into the spec at the
// start of a term, before anything is published: a job the upgrade's file
// import creates is created paused, a job already in the topic is paused
// before its catch-up, each with a change record of source "migration"
// keeping who paused it and since when; the entries are deleted, one for
// a job that does not exist is dropped. The producer no longer reads the
// list otherwise, and nobody else may write a migrated pause.
func TestMigratesRedisPauses(t *testing.T) {
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	list, err := pause.New(rdb, names.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Date(2026, 11, 22, 10, 0, 5, 0, time.UTC)
	alice := t0.Add(-time.Hour)
	for _, e := range []pause.Pause{{Job: "a", Since: alice, By: "alice"}, {Job: "gone", Since: alice, By: "bob"}} {
		if err := list.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	clk := clock.NewFake(t0)
	js := jobs(t, everyTen) // a may catch up 25s, b never
	withList := func(c *producer.Config) { c.LegacyPauses = list }
	c := specsClient(t, brokers, "carol", 15*time.Second)
	left := func() int {
		m, err := list.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}

	// Upgrade: the topic is empty, the file import creates a paused.
	r := startProducer(t, brokers, clk, js, alwaysLeader{}, withList)
	waitLeading(t, r)
	a := waitImported(t, c, "a")
	if a.Version != 2 || a.Paused == nil || a.Paused.By != "alice" || !a.Paused.At.Equal(alice) || a.Source.Kind != specs.SourceMigration {
		t.Fatalf("a after the upgrade: %+v paused %+v, want version 2 paused by alice since %s through the migration", a, a.Paused, alice)
	}
	hist, err := c.History(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Op != specs.OpPut || hist[0].Source.Kind != specs.SourceFile ||
		hist[1].Op != specs.OpPause || hist[1].Source.Kind != specs.SourceMigration || hist[1].Paused == nil ||
		!strings.Contains(hist[1].Note, "paused by alice since 2026-11-22T09:00:05Z") {
		t.Fatalf("a's change log: %+v", hist)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return left() == 0 }, "the pause list still has entries (a migrated, gone dropped)")
	clk.Set(t0.Add(5 * time.Second)) // 10:00:10
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 1 }, "b@10:00:10 not published")
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	// An older kjobctl pauses b while the producers are down; the next
	// leader pauses it before its takeover catch-up, so b@:30 (within the
	// misfire grace of a takeover at :32) is not published.
	carolSince := t0.Add(7 * time.Second)
	if err := list.Add(ctx, pause.Pause{Job: "b", Since: carolSince, By: "dave"}); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(27 * time.Second)) // 10:00:32
	r = startProducer(t, brokers, clk, js, alwaysLeader{}, withList)
	testenv.Eventually(t, 20*time.Second, func() bool { return r.p.Status().Leading }, "second producer not leading")
	testenv.Eventually(t, 10*time.Second, func() bool { return left() == 0 }, "b's entry not migrated")
	b, err := c.Get(ctx, "b")
	if err != nil || b.Paused == nil || b.Paused.By != "dave" || !b.Paused.At.Equal(carolSince) || b.Version != 2 {
		t.Fatalf("b after the takeover: %+v %v", b, err)
	}
	// Resumed through the spec: from the next window after the resume.
	clk.Set(t0.Add(35 * time.Second)) // 10:00:40
	res := submit(t, c, specs.Edit{Op: specs.OpResume, Job: "b"})
	if !res.At.Equal(t0.Add(35 * time.Second)) {
		t.Fatalf("the resume's instant is %s, want the leader's clock %s", res.At, t0.Add(35*time.Second))
	}
	clk.Set(t0.Add(45 * time.Second)) // 10:00:50
	testenv.Eventually(t, 10*time.Second, func() bool { return len(r.published()) == 1 }, "b@10:00:50 not published after the resume")
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	ids, _ := windowIDs(t, brokers)
	if want := []string{"b@2026-11-22T10:00:10Z", "b@2026-11-22T10:00:50Z"}; !slices.Equal(ids, want) {
		t.Fatalf("windows topic holds %v, want %v", ids, want)
	}

	// Nobody but the leader writes a migrated pause or the migration source.
	r = startProducer(t, brokers, clk, js, alwaysLeader{}, withList)
	testenv.Eventually(t, 20*time.Second, func() bool { return r.p.Status().Leading }, "third producer not leading")
	forged := specs.Edit{Op: specs.OpPause, Job: "b", Note: "x", Migrated: &specs.Pause{By: "ceo", At: t0}}
	if _, err := c.Submit(ctx, []specs.Edit{forged}, ""); !errors.Is(err, specs.ErrInvalid) || !strings.Contains(err.Error(), "migrated pause") {
		t.Fatalf("a forged migrated pause: %v", err)
	}
	mig, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Source: specs.Source{Kind: specs.SourceMigration}, Wait: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mig.Submit(ctx, []specs.Edit{{Op: specs.OpPause, Job: "b", Note: "x"}}, ""); !errors.Is(err, specs.ErrInvalid) {
		t.Fatalf("a request with source migration: %v", err)
	}
	if b, err := c.Get(ctx, "b"); err != nil || b.Paused != nil {
		t.Fatalf("b after the refusals: %+v %v", b, err)
	}
}
