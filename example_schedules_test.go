package kjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// A SaaS service keeps one schedule per customer: each tenant's weekly
// report, at the hour and in the time zone the tenant chose. It creates
// the schedule at sign-up, changes it when the tenant does, and once a
// night makes the schedules match its tenants table, all from its own
// code, with no producer restart.
//
// The example brings its own deployment: the in-process kfake broker with
// SASL, a throwaway redis-server and a producer. A real service points
// SchedulesConfig at its deployment's brokers and has no producer in
// its own process.

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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers, stop, err := exampleDeployment(ctx, "shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	s, err := kjob.NewSchedules(kjob.SchedulesConfig{
		Brokers:   brokers,
		Namespace: "shop",
		// The SASL user is the actor the changes are recorded under.
		KafkaOpts: []kgo.Opt{kgo.SASL(plain.Auth{User: "svc-reports", Pass: "svc-secret"}.AsMechanism())},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	t := tenant{ID: 4711, Zone: "Europe/Berlin", Hour: 8}
	if err := onSignup(ctx, s, t); err != nil {
		fmt.Println(err)
		return
	}
	// A sign-up with a time zone that does not exist is refused with the
	// field, the value and the fix; nothing changes.
	var se *kjob.ScheduleError
	if err := onSignup(ctx, s, tenant{ID: 4713, Zone: "Europe/Berln", Hour: 8}); errors.As(err, &se) && errors.Is(err, kjob.ErrScheduleInvalid) {
		fmt.Printf("refused: %s %q\n", se.Field, se.Value)
	}

	t.Hour = 9
	if err := onPreferencesChanged(ctx, s, t); err != nil {
		fmt.Println(err)
		return
	}

	res, err := nightlySync(ctx, s, []tenant{t, {ID: 4712, Zone: "America/New_York", Hour: 7}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("nightly sync: created %v, updated %v, deleted %v, unchanged %v\n", res.Created, res.Updated, res.Deleted, res.Unchanged)

	h, err := s.History(ctx, reportSpec(t).Name)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range h {
		fmt.Printf("v%d %s by %s through %s, note %q\n", c.VersionAfter, c.Op, c.Actor, c.Source, c.Note)
		if c.Op == "update" {
			for _, d := range c.Diff {
				fmt.Printf("    %s: %q -> %q\n", d.Field, d.Before, d.After)
			}
		}
	}

	// Output:
	// refused: timezone "Europe/Berln"
	// nightly sync: created [report-tenant-4712], updated [], deleted [], unchanged [report-tenant-4711]
	// v1 create by svc-reports through api, note "sign-up"
	// v2 update by svc-reports through api, note "tenant changed the report time"
	//     schedule: "0 8 * * 1" -> "0 9 * * 1"
}

// exampleDeployment starts what a deployment runs beside the service: a
// broker (kfake, with SASL users for the producer and the service), a
// Redis for the producer's lease, and a producer with no schedules file.
// It returns once the producer serves /readyz (it has created the
// deployment's topics and runs). stop stops them all.
func exampleDeployment(ctx context.Context, namespace string) (brokers []string, stop func(), err error) {
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "kjob-producer", "producer-secret"),
		kfake.Superuser("PLAIN", "svc-reports", "svc-secret"))
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: %w", err)
	}
	redisAddr, stopRedis, err := testenv.ExampleRedis()
	if err != nil {
		kafka.Close()
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	p, err := kjob.NewProducer(kjob.ProducerConfig{
		Brokers:   kafka.ListenAddrs(),
		KafkaOpts: []kgo.Opt{kgo.SASL(plain.Auth{User: "kjob-producer", Pass: "producer-secret"}.AsMechanism())},
		Redis:     rdb,
		Namespace: namespace,
		ID:        "producer-1",
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		rdb.Close()
		stopRedis()
		kafka.Close()
		return nil, nil, fmt.Errorf("producer: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	stop = func() {
		cancel()
		<-done
		rdb.Close()
		stopRedis()
		kafka.Close()
	}
	for tick := time.NewTicker(20 * time.Millisecond); ; {
		rec := httptest.NewRecorder()
		p.HTTPHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code == http.StatusOK {
			tick.Stop()
			return kafka.ListenAddrs(), stop, nil
		}
		select {
		case <-tick.C:
		case err := <-done:
			done <- err
			stop()
			return nil, nil, fmt.Errorf("producer stopped before it was ready: %v", err)
		case <-ctx.Done():
			stop()
			return nil, nil, fmt.Errorf("producer not ready: %w", ctx.Err())
		}
	}
}
