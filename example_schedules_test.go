package kjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/schedule"
)

// A SaaS service keeps one schedule per customer: each tenant's weekly
// report, at the hour and in the time zone the tenant chose. It creates
// the schedule at sign-up, changes it when the tenant does, and once a
// night makes the schedules match its tenants table, all from its own
// code, with no producer restart.
//
// This example builds but does not run under go test: it needs a
// deployment's producer leader to answer (the changes go through it).
// TestScheduleExamplePerCustomer runs these same functions against a
// fake leader.

// tenant is a row of the service's own tenants table.
type tenant struct {
	ID   int
	Zone string // IANA, e.g. "Europe/Berlin"
	Hour int    // local hour of the Monday report
}

// reportSpec is a tenant's schedule: its fields are a schedules file's.
func reportSpec(t tenant) schedule.Spec {
	return schedule.Spec{
		Name:     fmt.Sprintf("report-tenant-%d", t.ID),
		Schedule: fmt.Sprintf("0 %d * * 1", t.Hour),
		Timezone: t.Zone,
		Handler:  "report",
		Payload:  json.RawMessage(fmt.Sprintf(`{"tenant": %d}`, t.ID)),
	}
}

// onSignup creates the tenant's schedule. A schedule of that name that
// exists already (a retried sign-up) is fine.
func onSignup(ctx context.Context, s *kjob.Schedules, t tenant) error {
	_, err := s.Create(ctx, reportSpec(t), "sign-up")
	if errors.Is(err, kjob.ErrScheduleConflict) {
		return nil
	}
	return err
}

// onPreferencesChanged updates the tenant's schedule from the version it
// read: if someone changed it meanwhile (an operator, through kjobctl or
// the dashboard), the update is refused with a conflict, so it reads
// again and decides again instead of overwriting their change unseen.
func onPreferencesChanged(ctx context.Context, s *kjob.Schedules, t tenant) error {
	for {
		cur, err := s.Get(ctx, reportSpec(t).Name)
		if err != nil {
			return err
		}
		if cur.Paused {
			return fmt.Errorf("tenant %d: report paused by %s (%s): not changed", t.ID, cur.SetBy, cur.PauseNote)
		}
		_, err = s.Update(ctx, reportSpec(t), cur.Version, "tenant changed the report time")
		if !errors.Is(err, kjob.ErrScheduleConflict) {
			return err
		}
	}
}

// nightlySync makes the schedules exactly the tenants' (Prune deletes the
// schedules of tenants that left) and returns what it changed.
func nightlySync(ctx context.Context, s *kjob.Schedules, tenants []tenant) (kjob.ApplyResult, error) {
	list := make([]schedule.Spec, 0, len(tenants))
	for _, t := range tenants {
		list = append(list, reportSpec(t))
	}
	return s.Apply(ctx, list, kjob.ApplyOptions{Prune: true, Note: "nightly sync from the tenants table"})
}

func ExampleSchedules() {
	s, err := kjob.NewSchedules(kjob.SchedulesConfig{
		Brokers:   []string{"kafka-1:9092"},
		Namespace: "shop",
		// KafkaOpts: kgo.SASL(...): the SASL user is the actor the
		// changes are recorded under.
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t := tenant{ID: 4711, Zone: "Europe/Berlin", Hour: 8}
	if err := onSignup(ctx, s, t); err != nil {
		var se *kjob.ScheduleError
		switch {
		case errors.As(err, &se) && errors.Is(err, kjob.ErrScheduleInvalid):
			log.Printf("tenant %d: fix %s %q: %s", t.ID, se.Field, se.Value, se.Reason)
		case errors.Is(err, kjob.ErrNoProducer):
			log.Printf("tenant %d: no producer answered; retry later: %v", t.ID, err)
		default:
			log.Print(err)
		}
	}

	t.Hour = 9
	if err := onPreferencesChanged(ctx, s, t); err != nil {
		log.Print(err)
	}

	res, err := nightlySync(ctx, s, []tenant{t, {ID: 4712, Zone: "America/New_York", Hour: 7}})
	if err != nil {
		log.Print(err)
	}
	fmt.Printf("created %v, updated %v, deleted %v, %d unchanged\n", res.Created, res.Updated, res.Deleted, len(res.Unchanged))

	h, err := s.History(ctx, reportSpec(t).Name)
	if err != nil {
		log.Print(err)
	}
	for _, c := range h {
		fmt.Printf("v%d %s by %s: %s %v\n", c.VersionAfter, c.Op, c.Actor, c.Note, c.Diff)
	}
}
