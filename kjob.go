// Package kjob runs scheduled jobs exactly once per window across
// redundant replicas, with Kafka as the dispatch log and Redis idempotency
// keys.
//
// A Worker is a whole worker process, the same one cmd/worker runs: its
// consumer runs the windows of the partitions it owns with your handlers
// and the built-in ones, its control agent applies operators' replays, and
// it exports lag, time lag and stalls on /metrics beside /healthz and
// /readyz. A Producer is a whole producer process, the same one
// cmd/producer runs: the replica holding the lease publishes each job's
// windows in Kafka transactions. Both take a Config whose zero fields are
// the binaries' defaults, and run until their context ends:
//
//	w, err := kjob.NewWorker(kjob.WorkerConfig{
//		Brokers: []string{"127.0.0.1:9092"},
//		Redis:   redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}),
//	})
//	...
//	w.HandleFunc("report", func(ctx context.Context, j *handler.Job) error { ... })
//	err = w.Run(ctx)
//
// Handlers are plain functions (package handler; handler.Typed decodes a
// payload into a struct); package kjobtest tests them.
package kjob

import (
	"github.com/redis/go-redis/v9"
)

// redisUser is the ACL user rdb connects as, for the access check's
// messages.
func redisUser(rdb redis.UniversalClient) string {
	var u string
	switch c := rdb.(type) {
	case *redis.Client:
		u = c.Options().Username
	case *redis.ClusterClient:
		u = c.Options().Username
	}
	if u == "" {
		return "default"
	}
	return u
}
