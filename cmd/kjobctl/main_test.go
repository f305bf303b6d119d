package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	redis.SetLogger(silentRedis{}) // as main does
	os.Exit(m.Run())
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := runCmd(t, "frobnicate")
	if code != exitUsage || !strings.Contains(stderr, `kjobctl: unknown command "frobnicate"`) {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
}

func TestScheduleCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("jobs:\n  - name: a\n    schedule: \"30 2 * * *\"\n    timezone: Europe/Berlin\n    handler: log\n"), 0o644)
	code, out, stderr := runCmd(t, "schedule", "check", "--next", "2", good)
	if code != exitOK {
		t.Fatalf("code %d stderr %s", code, stderr)
	}
	if !strings.Contains(out, "JOB") || !strings.Contains(out, "30 2 * * *") || !strings.Contains(out, "Europe/Berlin") ||
		!strings.Contains(out, "1 job, valid") || strings.Count(out, "02:30:00 CE") != 2 {
		t.Fatalf("output:\n%s", out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    timezone: Mars/Olympus\n"), 0o644)
	code, _, stderr = runCmd(t, "schedule", "check", bad)
	want := bad + `:5: jobs[0].timezone: "Mars/Olympus": unknown time zone; use an IANA name such as "Europe/Berlin"`
	if code != exitError || !strings.Contains(stderr, want) {
		t.Fatalf("code %d stderr %q\nwant it to contain %q", code, stderr, want)
	}

	// An overlap policy is checked as the producer checks it, and shown.
	badOverlap := filepath.Join(dir, "overlap.yaml")
	os.WriteFile(badOverlap, []byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    overlap: forbid\n"), 0o644)
	code, _, stderr = runCmd(t, "schedule", "check", badOverlap)
	want = badOverlap + `:5: jobs[0].overlap: "forbid": want one of queue (the default: one window at a time, in order), skip`
	if code != exitError || !strings.Contains(stderr, want) {
		t.Fatalf("code %d stderr %q\nwant it to contain %q", code, stderr, want)
	}
	os.WriteFile(badOverlap, []byte("jobs:\n  - name: a\n    schedule: \"@every 1s\"\n    handler: log\n    overlap: replace\n  - name: b\n    schedule: \"@every 1s\"\n    handler: log\n"), 0o644)
	code, out, stderr = runCmd(t, "schedule", "check", "-o", "json", badOverlap)
	var res struct {
		Jobs []struct{ Name, Overlap string }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || len(res.Jobs) != 2 || res.Jobs[0].Overlap != "replace" || res.Jobs[1].Overlap != "queue" {
		t.Fatalf("json: code %d\n%s%s", code, out, stderr)
	}

	code, _, stderr = runCmd(t, "schedule", "check")
	if code != exitUsage || !strings.Contains(stderr, "want exactly one FILE argument, got 0") {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
}
