package main

import (
	"fmt"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/store/lease"
)

// sharedHelp is the producer's own help for shared flags.
var sharedHelp = map[string]string{
	"topic":              "topic to publish windows to",
	"replication-factor": "replication factor of created topics (1 to 32767)",
	"id":                 "this replica's id (lease holder name)",
	"metrics-max-jobs":   `at most this many distinct kjob_job label values; further jobs are counted under kjob_job="other" and in kjob_metrics_job_labels_folded_total`,
}

// check refuses settings that break leadership, before anything is
// built, in the words of the command line: the flag, its variable, the
// value and the fix. The lease package refuses them too, in the library's
// words.
func check(f *cli.Flags, c kjob.ProducerConfig) error {
	switch {
	case c.LeaseTTL < lease.MinTTL:
		return f.Errorf("lease-ttl", "too short: set at least %v (seconds in production)", lease.MinTTL)
	case c.LeaseRenew <= 0:
		return f.Errorf("lease-renew", "not positive: set a duration below --lease-ttl/2 (%v)", c.LeaseTTL/2)
	case c.LeaseRenew >= c.LeaseTTL/2:
		return f.Errorf("lease-renew", "must be less than --lease-ttl/2 (%v; %s), or the leader cannot renew before its lease expires: lower --lease-renew or raise --lease-ttl",
			c.LeaseTTL/2, f.Ref("lease-ttl"))
	case c.MisfireGrace < 0:
		return fmt.Errorf("--misfire-grace/KJOB_MISFIRE_GRACE=%v is negative: use a duration such as 10s, or 0 to turn the grace off", c.MisfireGrace)
	}
	return nil
}

// libraryFields names the flag of each library field an error of
// NewProducer or Run may name: the producer's, the Redis and Kubernetes
// leases', the topic check's and the HTTP server's.
var libraryFields = map[string]string{
	"Brokers": "brokers", "StateTopic": "state-topic", "Partitions": "partitions", "ReplicationFactor": "replication-factor",
	"TransactionalID": "transactional-id", "TransactionTimeout": "transaction-timeout",
	"Config.TTL": "lease-ttl", "Config.RenewInterval": "lease-renew", "Config.Holder": "id",
	"Config.RenewDeadline": "lease-ttl", "LeaseDuration": "lease-ttl", "Config.RetryPeriod": "lease-renew", "RenewDeadline": "lease-ttl",
	"Config.Identity": "id", "Config.Namespace": "lease-namespace", "Config.Name": "lease-name",
	"Spec.Partitions": "partitions", "Spec.ReplicationFactor": "replication-factor", "ProducerConfig.HTTPAddr": "http-addr",
}
