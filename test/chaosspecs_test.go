package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/chaos"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// mutableJob is the chaos job whose spec changes while the faults run:
// its cron, pauses and resumes, deletes and re-creates, through the same
// client kjobctl and kjob.Schedules use, asked of whichever producer leads.
const mutableJob = "mutable"

// chaosDeployment names the chaos cluster's topics (newClusterWith's
// namespace and windows topic).
var chaosDeployment = names.Deployment{Namespace: "e2e", Topic: "kjob.windows"}

// mutation is one change the mutator asked for, and how it ended.
type mutation struct {
	at   time.Time
	op   specs.Op
	cron string
	err  error
}

// mutator changes mutableJob at random moments (every 1-4s) until stop
// is closed, from its own seeded random source (so the fault schedule's
// stays as it was for a seed).
type mutator struct {
	r       *chaosRun
	rng     *rand.Rand
	client  *specs.Client
	mu      sync.Mutex
	done    []mutation
	deleted bool
	paused  bool
}

func (r *chaosRun) startMutator(stop <-chan struct{}) (*mutator, <-chan struct{}) {
	c, err := specs.NewClient(specs.ClientConfig{Opts: []kgo.Opt{kgo.SeedBrokers(r.c.broker)}, Deployment: chaosDeployment,
		Actor: "chaos", Source: specs.Source{Kind: specs.SourceAPI}, Wait: 10 * time.Second})
	if err != nil {
		r.t.Fatal(err)
	}
	m := &mutator{r: r, client: c, rng: rand.New(rand.NewPCG(r.seed^0x5bd1e995, r.seed))}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(1000+m.rng.IntN(3000)) * time.Millisecond):
			}
			m.step()
		}
	}()
	return m, exited
}

func (m *mutator) spec(cron string) *schedule.Spec {
	payload, _ := json.Marshal(map[string]string{"url": m.r.c.ledger.url()})
	return &schedule.Spec{Name: mutableJob, Schedule: cron, Handler: "http", Payload: payload, Timeout: "10s", Catchup: "1m",
		Retries: &schedule.RetrySpec{MaxAttempts: 50, Backoff: "200ms", MaxBackoff: "2s"}}
}

// step asks for one change, chosen from the job's state as the mutator
// last saw it.
func (m *mutator) step() {
	crons := []string{"@every 1s", "@every 2s", "@every 3s"}
	cron := crons[m.rng.IntN(len(crons))]
	var e specs.Edit
	switch d := m.rng.IntN(10); {
	case m.deleted:
		e = specs.Edit{Op: specs.OpCreate, Job: mutableJob, Spec: m.spec(cron)}
	case d < 4:
		e = specs.Edit{Op: specs.OpUpdate, Job: mutableJob, Spec: m.spec(cron)}
	case d < 7 && !m.paused:
		e = specs.Edit{Op: specs.OpPause, Job: mutableJob, Note: "chaos"}
	case d < 7:
		e = specs.Edit{Op: specs.OpResume, Job: mutableJob}
	default:
		e = specs.Edit{Op: specs.OpDelete, Job: mutableJob}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := m.client.Submit(ctx, []specs.Edit{e}, "chaos")
	mu := mutation{at: time.Now(), op: e.Op, err: err}
	if e.Spec != nil {
		mu.cron = e.Spec.Schedule
	}
	if err == nil {
		switch e.Op {
		case specs.OpCreate:
			m.deleted, m.paused = false, false
		case specs.OpDelete:
			m.deleted = true
		case specs.OpPause:
			m.paused = true
		case specs.OpResume:
			m.paused = false
		}
	} else {
		// A refusal, or an answer lost to a fault (a change not answered
		// may still be applied by the next leader): learn the job's state
		// again.
		if rec, gerr := m.client.Get(ctx, mutableJob); gerr == nil {
			m.deleted, m.paused = false, rec.Paused != nil
		} else if errors.Is(gerr, specs.ErrNotFound) {
			m.deleted = true
		}
	}
	m.mu.Lock()
	m.done = append(m.done, mu)
	m.mu.Unlock()
	m.r.t.Logf("%s schedule change %s %s: %v", mu.at.Format("15:04:05.000"), e.Op, mu.cron, errText(err))
}

func errText(err error) string {
	if err == nil {
		return "applied"
	}
	return err.Error()
}

// summary counts the mutator's changes by outcome.
func (m *mutator) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	applied, refused, unanswered := 0, 0, 0
	for _, x := range m.done {
		switch {
		case x.err == nil:
			applied++
		case errors.Is(x.err, specs.ErrNoLeader):
			unanswered++
		default:
			refused++
		}
	}
	return fmt.Sprintf("%d schedule changes asked: %d applied, %d refused, %d unanswered (no leader within the wait)", len(m.done), applied, refused, unanswered)
}

// specChanges reads the run's committed schedule changes for the checker:
// every record of the change log, with the EffectiveFrom of the version
// it wrote from the schedules topic (read whole: the embedded broker does
// not compact it).
func (r *chaosRun) specChanges() []chaos.SpecChange {
	t := r.t
	eff := map[string]time.Time{}
	for _, rec := range testenv.ReadCommitted(t, []string{r.c.broker}, chaosDeployment.SchedulesTopic()) {
		e, err := specs.ParseSpecRecord(rec, chaosDeployment.Namespace)
		if err != nil {
			t.Errorf("schedules topic: %v", err)
			continue
		}
		if e.Record != nil {
			eff[fmt.Sprintf("%s/%d", e.Job, e.Version)] = e.Record.EffectiveFrom
		}
	}
	var out []chaos.SpecChange
	for _, rec := range testenv.ReadCommitted(t, []string{r.c.broker}, chaosDeployment.ScheduleLogTopic()) {
		c, err := specs.ParseChange(rec)
		if err != nil {
			t.Errorf("change log: %v", err)
			continue
		}
		sc := chaos.SpecChange{Job: c.Job, Version: c.VersionAfter, Op: c.Op, Committed: c.At, Paused: c.Paused != nil,
			EffectiveFrom: eff[fmt.Sprintf("%s/%d", c.Job, c.VersionAfter)]}
		if c.Spec != nil {
			sc.Schedule, sc.Timezone = c.Spec.Schedule, c.Spec.Timezone
			sc.Disabled = c.Spec.Enabled != nil && !*c.Spec.Enabled
		}
		out = append(out, sc)
	}
	return out
}
