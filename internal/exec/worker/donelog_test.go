package worker

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// At info, a backlog's windows are logged together, at most a line a
// second (doneLogEvery), and every completed window is counted in a
// line; a window completed after a quiet second is logged alone, with
// its id.
func TestDoneLogSummarisesABacklog(t *testing.T) {
	e := newEnv(t, 1, 5*time.Second)
	x := &execs{}
	cfg := e.config("w0", handler.HandlerFunc(func(context.Context, *handler.Job) error { return nil }), x)
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, stop := start(t, cfg)

	const n = 300
	var ms []*jobmsg.Message
	for i := range n {
		ms = append(ms, window(fmt.Sprintf("job-%d", i%30), "h", i, defaultPolicy))
	}
	published := time.Now()
	e.publish(ms...)
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == n }, "%d windows done (have %d)", n, x.count(OutcomeDone))
	began := time.Now()
	testenv.Eventually(t, 5*time.Second, func() bool { return logged(logs.String()) == n }, "the %d windows logged (have %d in %q)", n, logged(logs.String()), logs.String())
	if waited := time.Since(began); waited > doneLogEvery+time.Second {
		t.Errorf("the last windows were logged %v after they were done, want at most %v", waited, doneLogEvery)
	}
	lines := doneLines(logs.String())
	if len(lines) > 2+int(time.Since(published)/time.Second) { // the first at once, then a line a second
		t.Errorf("%d lines for %d windows, want a few:\n%s", len(lines), n, strings.Join(lines, "\n"))
	}

	time.Sleep(doneLogEvery) // a quiet second: the next window is logged alone
	alone := window("alone", "h", n, defaultPolicy)
	e.publish(alone)
	testenv.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "window="+alone.ID) }, "%s logged alone (have %q)", alone.ID, logs.String())
	stop()
	if got := logged(logs.String()); got != n+1 {
		t.Errorf("%d windows logged, want %d:\n%s", got, n+1, strings.Join(doneLines(logs.String()), "\n"))
	}
}

var (
	oneDone  = regexp.MustCompile(`msg="window done"`)
	manyDone = regexp.MustCompile(`msg="windows done" .*windows=(\d+)`)
)

// doneLines are the log's "window(s) done" lines.
func doneLines(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if oneDone.MatchString(line) || manyDone.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// logged counts the windows the log's "window(s) done" lines name.
func logged(log string) int {
	n := 0
	for _, line := range doneLines(log) {
		if m := manyDone.FindStringSubmatch(line); m != nil {
			k, _ := strconv.Atoi(m[1])
			n += k
			continue
		}
		n++
	}
	return n
}
