package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dlq"
)

// Escape sequences an attacker who can write records would send: set the
// terminal's title (OSC 0 ... BEL), clear the screen (CSI 2J), the
// one-byte C1 CSI, a bidirectional override, and a newline and a tab that
// would break a table.
const (
	setTitle    = "\x1b]0;pwned\x07"
	clearScreen = "\x1b[2J"
	c1CSI       = "\u009b31m"
	bidi        = "\u202e"
)

const hostile = setTitle + clearScreen + c1CSI + bidi + "\nrow\tcell"

// assertInert fails if out holds a control character other than the
// newlines kjobctl's own layout uses, or a bidirectional override.
func assertInert(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if r == utf8.RuneError {
			t.Errorf("%s: invalid UTF-8 at byte %d", what, i)
		}
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x202e {
			t.Errorf("%s: raw control character %U at byte %d:\n%s", what, r, i, out)
			return
		}
	}
}

// assertShown checks that the escaped forms of setTitle and clearScreen
// are shown, so an operator sees what the record held.
func assertShown(t *testing.T, what, out string) {
	t.Helper()
	for _, want := range []string{`\x1b]0;pwned\x07`, `\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the escaped form %s is not shown:\n%s", what, want, out)
		}
	}
}

func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"sync@2026-11-22T09:00:00Z": "sync@2026-11-22T09:00:00Z",
		"grüße ☃":                   "grüße ☃",
		hostile:                     `\x1b]0;pwned\x07\x1b[2J\u009b31m\u202e\nrow\tcell`,
		"a\xffb":                    `a\xffb`,
		"del\x7f":                   `del\x7f`,
	} {
		if got := safe(in); got != want {
			t.Errorf("safe(%q) = %q, want %q", in, got, want)
		}
	}
}

// A dead letter full of escape sequences, in every field a record or its
// headers set, is printed inert by dlq list, show and redrive; -o json
// stays valid JSON.
func TestDLQOutputEscapesControlCharacters(t *testing.T) {
	payload, _ := json.Marshal(map[string]string{"url": "http://x/" + hostile})
	value, _ := json.Marshal(map[string]any{
		"v": 1, "id": "sync@2026-11-22T09:00:00Z", "job": "sync", "handler": "http",
		"window":       map[string]string{"start": "2026-11-22T09:00:00Z", "end": "2026-11-22T09:00:10Z"},
		"scheduled_at": "2026-11-22T09:00:00Z", "published_at": "2026-11-22T09:00:00Z", "trigger": "schedule",
		"payload": json.RawMessage(payload), "policy": map[string]any{"timeout": "1m0s", "max_attempts": 3, "backoff": "1s", "max_backoff": "1m0s"},
	})
	orig := &kgo.Record{Topic: "kjob.windows" + setTitle, Partition: 0, Offset: 57, Key: []byte("sync"), Value: value,
		Headers: []kgo.RecordHeader{{Key: "x-" + clearScreen, Value: []byte(hostile)}}}
	good := dlq.New("kjob.windows.dlq", orig, dlq.Meta{Reason: "http: " + hostile, Attempts: 3, Worker: "worker-" + setTitle, At: t0})
	good.Offset = 3
	bad := dlq.New("kjob.windows.dlq", &kgo.Record{Topic: "kjob.windows", Offset: 8, Key: []byte("key" + hostile), Value: []byte("not json " + hostile)},
		dlq.Meta{Reason: "undecodable " + hostile, At: t0})
	bad.Offset = 4
	ls := []deadLetter{parseDeadLetter(good), parseDeadLetter(bad)}
	ls[0].WindowState = &windowState{Status: "running", Token: 3, Holder: "worker-" + clearScreen}
	ls[1].Redriven = &operator.Redrive{At: t0, By: "kjobctl " + setTitle, Topic: "kjob.windows" + clearScreen}

	var b bytes.Buffer
	if err := renderDLQList(&b, ls); err != nil {
		t.Fatal(err)
	}
	assertInert(t, "dlq list", b.String())
	assertShown(t, "dlq list", b.String())
	for i, d := range ls {
		b.Reset()
		if err := renderDLQShow(&b, d); err != nil {
			t.Fatal(err)
		}
		assertInert(t, "dlq show "+d.ID, b.String())
		assertShown(t, "dlq show "+d.ID, b.String())
		if i == 0 && !strings.Contains(b.String(), `"url": "http://x/\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202e\nrow\tcell"`) {
			t.Errorf("dlq show: payload not shown escaped:\n%s", b.String())
		}
	}
	b.Reset()
	renderRedrivePlan(&b, planRedrive(ls, true), 0)
	assertInert(t, "dlq redrive plan", b.String())
	b.Reset()
	renderLeftOut(&b, planRedrive(ls, false), 0)
	assertInert(t, "dlq redrive left out", b.String())

	b.Reset()
	if err := writeJSON(&b, ls); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("-o json is not valid JSON: %v", err)
	}
	if back[0]["reason"] != "http: "+hostile {
		t.Errorf("-o json reason %q, want the reason unchanged", back[0]["reason"])
	}
}

// status, lag and replay print names other clients chose (group members,
// lease holders, window ids in the state topic, workers' acks) inert too.
func TestTablesEscapeControlCharacters(t *testing.T) {
	s := &inspect.Snapshot{
		At:     t0,
		Leader: &inspect.Leader{Holder: "producer" + setTitle, Epoch: 1, Since: t0},
		Group: &inspect.Group{Name: "kjob-workers", State: "Stable", Members: []inspect.Member{
			{ClientID: "worker" + clearScreen, Host: "127.0.0.1" + hostile, Partitions: []int32{0}},
		}},
		Jobs: []inspect.JobStatus{{Name: "sync", Schedule: "@every 10s", Timezone: "UTC", Enabled: true, InFile: true,
			Last: &inspect.WindowStatus{ID: "sync@" + hostile, Outcome: "done"}}},
		DeadLettersError: "read " + setTitle + clearScreen,
	}
	var b bytes.Buffer
	renderStatus(&b, s, statusInfo{group: "kjob-workers", lease: "redis"})
	assertInert(t, "status", b.String())
	assertShown(t, "status", b.String())

	b.Reset()
	renderLag(&b, &inspect.Group{Partitions: []inspect.PartitionLag{{Partition: 0, Owner: "worker" + hostile}}})
	assertInert(t, "lag", b.String())

	b.Reset()
	p := replayPlan()
	p.Partitions[0].Owner, p.Partitions[0].AppliedBy = "worker"+setTitle, "worker"+clearScreen
	p.Rerun = []string{"sync@" + hostile}
	p.OtherJobs = []string{"other" + setTitle}
	renderReplay(&b, "table", p, true)
	assertInert(t, "replay", b.String())
	b.Reset()
	p.Spec.Rerun = false
	p.Retry = []operator.RetryWindow{{ID: "sync@" + hostile, Status: "dead" + setTitle}}
	renderReplay(&b, "table", p, false)
	assertInert(t, "replay retry", b.String())
}
