package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// perJob counts the runs of each job in progress, and the most at once.
type perJob struct {
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
}

func newPerJob() *perJob { return &perJob{running: map[string]int{}, most: map[string]int{}} }

func (p *perJob) wrap(h handler.Handler) handler.Handler {
	return handler.HandlerFunc(func(ctx context.Context, j *handler.Job) error {
		p.mu.Lock()
		p.running[j.Name()]++
		p.most[j.Name()] = max(p.most[j.Name()], p.running[j.Name()])
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.running[j.Name()]--
			p.mu.Unlock()
		}()
		return h.HandleJob(ctx, j)
	})
}

func (p *perJob) now(job string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running[job]
}

func (p *perJob) mostAtOnce(job string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.most[job]
}

func allowPolicy(maxConcurrent int) jobmsg.Policy {
	p := overlapPolicy(jobmsg.OverlapAllow)
	p.MaxConcurrent = maxConcurrent
	p.Timeout = jobmsg.Duration(5 * time.Minute) // held until the test opens them
	return p
}

// An allow job with a slow handler and more windows than the worker has
// slots holds only its max_concurrent of them (by default Concurrency /
// AllowShare); another job on the same partition starts its windows while
// the slow job's still run, and the gauges say how many slots are taken
// and how many windows wait.
func TestSlowAllowJobLeavesSlotsToOtherJobs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxConcurrent int // in the windows' policy
		want          int // slots the slow job may hold
	}{
		{"default", 0, 8 / AllowShare},
		{"max_concurrent 3", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, 30*time.Second)
			g := newGates()
			var slow []*jobmsg.Message
			for i := range 20 {
				m := window("slow", "g", i, allowPolicy(tc.maxConcurrent))
				g.hold(m.ID)
				slow = append(slow, m)
			}
			opened := false
			openAll := func() {
				if !opened {
					opened = true
					for _, m := range slow {
						g.open(m.ID)
					}
				}
			}
			t.Cleanup(openAll)
			jobs := newPerJob()
			mux := handler.NewMux()
			mux.Handle("g", jobs.wrap(g))
			x := &execs{}
			cfg := e.config("w1", mux, x)
			cfg.Concurrency = 8
			w, _ := start(t, cfg)
			e.publish(slow...)
			testenv.Eventually(t, 20*time.Second, func() bool { return jobs.now("slow") >= tc.want },
				"the slow job runs %d windows", tc.want)
			var fast []*jobmsg.Message
			for i := range 5 {
				fast = append(fast, window("fast", "g", i, defaultPolicy))
			}
			e.publish(fast...)
			testenv.Eventually(t, 20*time.Second, func() bool { return x.count(OutcomeDone) == len(fast) },
				"the other job's windows are done while the slow job's run (done %d of %d)", x.count(OutcomeDone), len(fast))
			if n := jobs.now("slow"); n != tc.want {
				t.Fatalf("the slow job runs %d windows, want its max_concurrent %d", n, tc.want)
			}
			testenv.Eventually(t, 20*time.Second, func() bool {
				return w.SlotsInUse() == tc.want && w.WaitingForSlot() == len(slow)-tc.want
			}, "gauges: %d slots in use and %d windows waiting; have %d and %d", tc.want, len(slow)-tc.want, w.SlotsInUse(), w.WaitingForSlot())
			openAll()
			testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == len(fast)+len(slow) }, "every window done")
			if most := jobs.mostAtOnce("slow"); most != tc.want {
				t.Errorf("the slow job ran %d windows at once, want at most (and at some point) %d", most, tc.want)
			}
			testenv.Eventually(t, 10*time.Second, func() bool { return w.SlotsInUse() == 0 && w.WaitingForSlot() == 0 },
				"gauges back to 0; have %d slots in use and %d waiting", w.SlotsInUse(), w.WaitingForSlot())
		})
	}
}

// A freed slot goes to the job holding the fewest: a job whose window
// arrives behind another job's backlog gets the next slot, not the
// backlog's next window.
func TestFreedSlotGoesToTheJobWithoutOne(t *testing.T) {
	e := newEnv(t, 1, 30*time.Second)
	g := newGates()
	var backlog []*jobmsg.Message
	for i := range 10 {
		m := window("backlog", "g", i, allowPolicy(2)) // may hold every slot
		g.hold(m.ID)
		backlog = append(backlog, m)
	}
	other := window("other", "g", 0, defaultPolicy)
	g.hold(other.ID)
	opened := map[string]bool{}
	open := func(id string) {
		if !opened[id] {
			opened[id] = true
			g.open(id)
		}
	}
	t.Cleanup(func() {
		for _, m := range append(backlog, other) {
			open(m.ID)
		}
	})
	mux := handler.NewMux()
	mux.Handle("g", g)
	x := &execs{}
	cfg := e.config("w1", mux, x)
	cfg.Concurrency = 2
	w, _ := start(t, cfg)
	e.publish(backlog...)
	g.waitStarted(t, backlog[0].ID)
	g.waitStarted(t, backlog[1].ID)
	e.publish(other)
	// Every window but the two running waits for a slot, the other one
	// included. Free a slot.
	testenv.Eventually(t, 20*time.Second, func() bool { return w.WaitingForSlot() == len(backlog)-2+1 },
		"the other window waits for a slot (waiting: %d)", w.WaitingForSlot())
	open(backlog[0].ID)
	testenv.Eventually(t, 20*time.Second, func() bool { return len(g.of(other.ID)) > 0 || len(g.of(backlog[2].ID)) > 0 },
		"the freed slot goes to a window")
	if len(g.of(other.ID)) == 0 {
		t.Fatalf("the freed slot went to %s, the backlog's next window, while %s of another job (holding no slot) waited", backlog[2].ID, other.ID)
	}
	for _, m := range append(backlog, other) {
		open(m.ID)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return x.count(OutcomeDone) == len(backlog)+1 }, "every window done")
}
