package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// A redriven letter is recorded: after its window succeeded, redrive --all
// republishes nothing and the window has run once; redriving it by ID is
// refused unless --force.
func TestDLQRedriveOnce(t *testing.T) {
	e := newOpsEnv(t)
	var mu sync.Mutex
	failing := true
	l := e.startWorker(&failing, &mu)
	code, out, stderr := e.kjobctl("trigger", "flaky")
	if code != exitOK {
		t.Fatalf("trigger: %d %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDeadLettered) == 1 }, "%s not dead-lettered", id)
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, out, _ := e.kjobctl("dlq", "list")
		return code == exitOK && strings.Contains(out, id) && strings.Contains(out, "dead (token ")
	}, "dlq list does not show %s as dead", id)

	mu.Lock()
	failing = false
	mu.Unlock()
	code, out, stderr = e.kjobctl("dlq", "redrive", "0", "--execute")
	if code != exitOK || !strings.HasPrefix(out, "Redrove 1 dead letter (they stay in kjob.windows.dlq):\nID  WINDOW") || !strings.Contains(out, "0   "+id) {
		t.Fatalf("redrive 0 --execute: exit %d\n%s%s", code, out, stderr)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 1 }, "redriven %s did not run", id)

	code, out, _ = e.kjobctl("dlq", "list", "-o", "json")
	var ls []deadLetter
	if code != exitOK || json.Unmarshal([]byte(out), &ls) != nil || len(ls) != 1 || ls[0].Redriven == nil || !ls[0].Redriven.Done() ||
		ls[0].WindowState == nil || ls[0].WindowState.Status != "done" {
		t.Fatalf("dlq list -o json after the redrive: exit %d\n%s", code, out)
	}
	code, out, _ = e.kjobctl("dlq", "list")
	// WINDOW STATE done, REDRIVEN at a time.
	if code != exitOK || !regexp.MustCompile(`done \(token \d+\)\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+upstream said no`).MatchString(out) {
		t.Fatalf("dlq list after the redrive:\n%s", out)
	}

	before := e.endOffsets()
	code, out, stderr = e.kjobctl("dlq", "redrive", "--all", "--execute")
	if code != exitOK || out != "Redrove 0 dead letters (they stay in kjob.windows.dlq):\nID  WINDOW  REPUBLISHED AT\n1 letters redriven before were left out (--force includes them).\n" {
		t.Fatalf("redrive --all again: exit %d\n%q%s", code, out, stderr)
	}
	if after := e.endOffsets(); after != before {
		t.Fatalf("redrive --all republished %d records", after-before)
	}
	code, out, stderr = e.kjobctl("dlq", "redrive", "0", "--execute")
	expect(t, code, stderr, exitConflict, "kjobctl: dlq redrive: 1 of the 1 chosen dead letters were left out (see above); --force redrives them anyway: refused")
	if !strings.Contains(out, "Left out 0: redriven before, at ") {
		t.Fatalf("redrive 0 again:\n%s", out)
	}
	if after := e.endOffsets(); after != before {
		t.Fatalf("a refused redrive republished %d records", after-before)
	}
	if n := l.count(id, worker.OutcomeDone); n != 1 {
		t.Fatalf("%s ran %d times", id, n)
	}
	// --force runs it again, on purpose.
	code, out, stderr = e.kjobctl("dlq", "redrive", "0", "--force", "--execute")
	if code != exitOK || !strings.HasPrefix(out, "Redrove 1 dead letter") {
		t.Fatalf("redrive 0 --force: exit %d\n%s%s", code, out, stderr)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return l.count(id, worker.OutcomeDone) == 2 }, "forced redrive of %s did not run", id)

	code, _, stderr = e.kjobctl("dlq", "show", "12")
	expect(t, code, stderr, exitNotFound, "kjobctl: dlq show: no dead letter 12 in kjob.windows.dlq (it holds 1; see kjobctl dlq list): not found")
}

// A replay while the group rebalances is refused with exit 5.
func TestReplayRebalancing(t *testing.T) {
	e, cluster := newOpsEnvCluster(t)
	cluster.ControlKey(int16(kmsg.DescribeGroups), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.DescribeGroupsRequest)
		dr := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.State, rg.ProtocolType = g, "PreparingRebalance", "consumer"
			m := kmsg.NewDescribeGroupsResponseGroupMember()
			m.MemberID, m.ClientID, m.ClientHost = "w1-1", "w1", "/127.0.0.1"
			rg.Members = append(rg.Members, m)
			dr.Groups = append(dr.Groups, rg)
		}
		return dr, nil, true
	})
	code, _, stderr := e.kjobctl("replay", "--to-earliest", "--execute")
	expect(t, code, stderr, exitConflict, `kjobctl: replay: group "kjob-workers": group is rebalancing (state PreparingRebalance); run the command again in a few seconds: refused`)
}
