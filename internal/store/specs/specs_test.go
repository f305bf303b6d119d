package specs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

func spec(name, cron string) schedule.Spec {
	return schedule.Spec{Name: name, Schedule: cron, Handler: "noop", Payload: json.RawMessage(`{"a": 1}`)}
}

func TestSpecRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	in := &specs.Record{Namespace: "prod", Job: "report", Version: 3, Spec: spec("report", "@every 1m"),
		Paused: &specs.Pause{Note: "db migration", By: "alice", At: at}, SetBy: "alice",
		Source: specs.Source{Kind: specs.SourceDashboard}, SetAt: at, ChangeID: "r1/0", EffectiveFrom: at}
	rec, err := specs.SpecRecord("kjob.prod.windows.schedules", in)
	if err != nil {
		t.Fatal(err)
	}
	e, err := specs.ParseSpecRecord(rec, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if e.Job != "report" || e.Version != 3 || e.Record.Paused.Note != "db migration" || !e.Record.EffectiveFrom.Equal(at) {
		t.Fatalf("round trip: %+v", e.Record)
	}
	tomb := specs.Tombstone("t", "report", 4)
	e, err = specs.ParseSpecRecord(tomb, "prod")
	if err != nil || e.Record != nil || e.Version != 4 {
		t.Fatalf("tombstone: %+v %v", e, err)
	}
}

func TestMalformedSpecRecords(t *testing.T) {
	good := func() *specs.Record {
		return &specs.Record{Namespace: "prod", Job: "report", Version: 1, Spec: spec("report", "@every 1m")}
	}
	enc := func(r *specs.Record) []byte {
		rec, err := specs.SpecRecord("t", r)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Value
	}
	other := good()
	other.Namespace = "staging"
	renamed := good()
	renamed.Spec.Name = "other"
	for _, c := range []struct {
		name  string
		key   string
		value []byte
		want  string
	}{
		{"garbage", "report", []byte("not json"), "not a spec record"},
		{"no key", "", enc(good()), "no key"},
		{"key differs", "x", enc(good()), "differs from the key"},
		{"spec name differs", "report", enc(renamed), "spec name"},
		{"foreign namespace", "report", enc(other), `namespace "staging"`},
		{"future schema", "report", []byte(`{"v": 9, "job": "report"}`), "schema version 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := specs.ParseSpecRecord(&kgo.Record{Topic: "t", Key: []byte(c.key), Value: c.value, Offset: 7}, "prod")
			var m *specs.MalformedError
			if !errors.As(err, &m) || !strings.Contains(err.Error(), c.want) || m.Offset != 7 {
				t.Fatalf("err = %v, want a MalformedError containing %q", err, c.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	a, b := spec("report", "@every 1m"), spec("report", "30 2 * * *")
	b.Retries = &schedule.RetrySpec{MaxAttempts: 5}
	got := specs.Diff(&a, nil, &b, &specs.Pause{Note: "migration"})
	want := []specs.FieldDiff{
		{Field: "schedule", Before: "@every 1m", After: "30 2 * * *"},
		{Field: "retries.max_attempts", After: "5"},
		{Field: "paused", After: "migration"},
	}
	if len(got) != len(want) {
		t.Fatalf("diff = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("diff[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if d := specs.Diff(nil, nil, &a, nil); len(d) != 4 { // name, schedule, handler, payload
		t.Fatalf("create diff = %+v", d)
	}
	if specs.Hash(a) == specs.Hash(b) || specs.Hash(a) != specs.Hash(spec("report", "@every 1m")) {
		t.Fatal("Hash must tell specs apart and agree on equal ones")
	}
}

func TestRefusedError(t *testing.T) {
	at := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	three := int64(3)
	req := &specs.Request{Edits: []specs.Edit{{Op: specs.OpUpdate, Job: "report", ExpectVersion: &three}}}
	res := &specs.Result{RequestID: "r", Refused: &specs.Refusal{Kind: specs.RefusedConflict, Job: "report", Current: 5,
		SetBy: "alice", SetAt: at, Source: specs.Source{Kind: specs.SourceDashboard}}}
	err := specs.Refused(res, req)
	if !errors.Is(err, specs.ErrConflict) {
		t.Fatalf("%v is not ErrConflict", err)
	}
	for _, w := range []string{"expected version 3", "version 5", "alice", "the dashboard", "2026-11-28T08:00:00Z"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	res.Refused = &specs.Refusal{Kind: specs.RefusedInvalid, Job: "report", Field: "timezone", Value: "Europe/Berln", Reason: "unknown time zone"}
	if err := specs.Refused(res, req); !errors.Is(err, specs.ErrInvalid) || !strings.Contains(err.Error(), `timezone: "Europe/Berln": unknown`) {
		t.Fatalf("invalid: %v", err)
	}
	res.Refused = nil
	if specs.Refused(res, req) != nil {
		t.Fatal("a result without a refusal is no error")
	}
}

func TestReadAllKeepsLastGoodVersion(t *testing.T) {
	brokers := testenv.Brokers(t)
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("s"), kgo.AllowAutoTopicCreation()}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "s"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i, r := range []*specs.Record{
		{Namespace: "prod", Job: "a", Version: 1, Spec: spec("a", "@every 1m")},
		{Namespace: "prod", Job: "b", Version: 1, Spec: spec("b", "@every 1m")},
		{Namespace: "prod", Job: "a", Version: 2, Spec: spec("a", "@every 2m")},
	} {
		rec, err := specs.SpecRecord("s", r)
		if err != nil {
			t.Fatal(i, err)
		}
		recs = append(recs, rec)
	}
	recs = append(recs,
		&kgo.Record{Topic: "s", Key: []byte("a"), Value: []byte("garbage written by hand")},
		specs.Tombstone("s", "b", 2))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s, err := specs.ReadAll(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, "s", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Jobs["a"]; a == nil || a.Version != 2 || a.Spec.Schedule != "@every 2m" {
		t.Fatalf("a = %+v, want version 2 (the garbage after it skipped)", a)
	}
	if _, ok := s.Jobs["b"]; ok || s.Version("b") != 2 {
		t.Fatalf("b deleted at version 2: jobs %v, deleted %v", s.Names(), s.Deleted)
	}
	if len(s.Malformed) != 1 || s.Malformed[0].Key != "a" {
		t.Fatalf("malformed = %+v", s.Malformed)
	}
	if s, err := specs.ReadAll(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, "missing", "prod"); err != nil || len(s.Jobs) != 0 {
		t.Fatalf("a missing topic reads as empty: %v %v", s, err)
	}
}
