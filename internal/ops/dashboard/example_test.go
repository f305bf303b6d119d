package dashboard_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/schedule"
)

// Serve the dashboard with its actions on, for users of a bcrypt users
// file, as kjobctl dashboard --actions --auth-users does. It needs Kafka
// and Redis, so it is compiled but not run.
func ExampleActions() {
	ctx := context.Background()
	brokers := []string{"127.0.0.1:9092"}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	f, err := schedule.Load("schedules.yaml")
	if err != nil {
		log.Fatal(err)
	}
	store, _ := dedupe.New(rdb, dedupe.Config{Namespace: "kjob"})
	redrives, _ := operator.NewRedrives(rdb, "kjob")
	audit, _ := operator.NewAuditLog(rdb, "kjob", 0)
	cl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(names.Partitioner()))
	replayer, _ := operator.NewReplayer(operator.ReplayerConfig{Brokers: brokers, Store: store, IssuedBy: "dashboard"})
	op, err := operator.New(operator.Config{Jobs: f.Jobs, Topic: "kjob.windows", DLQTopic: "kjob.windows.dlq",
		Publisher: cl, Redriver: cl, ReadOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Store: store,
		Redrives: redrives, Replayer: replayer})
	if err != nil {
		log.Fatal(err)
	}
	users, err := dashboard.LoadUsers("/etc/kjob/dashboard-users") // alice:$2y$10$... (htpasswd -B -n alice)
	if err != nil {
		log.Fatal(err)
	}
	in, _ := inspect.New(inspect.Config{Brokers: brokers, Redis: rdb, Jobs: f.Jobs})
	tl, _ := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: brokers, States: store})
	d, err := dashboard.New(dashboard.Config{Inspector: in, States: store, TimeLag: tl, Runs: store, Brokers: brokers, Topic: "kjob.windows",
		Actions: &dashboard.Actions{Operator: op, Auth: []dashboard.Authenticator{users}, Audit: audit}})
	if err != nil {
		log.Fatal(err)
	}
	go d.Run(ctx)
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: d, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
