package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/pkg/lease"
	"github.com/kjob/kjob/pkg/names"
	"github.com/kjob/kjob/pkg/producer"
)

// newElector builds the leader election selected by --lease-backend.
func newElector(backend, leaseNS, leaseName, namespace, id string, ttl, renew time.Duration, rdb redis.UniversalClient, log *slog.Logger, onChange func(lease.Event)) (producer.Elector, error) {
	switch backend {
	case "redis":
		lock, err := lease.NewRedisLock(rdb, names.Deployment{Namespace: namespace}.LeaseKey())
		if err != nil {
			return nil, err
		}
		return lease.NewElector(lease.Config{Lock: lock, Holder: id, TTL: ttl, RenewInterval: renew, Logger: log, OnChange: onChange})
	case "kubernetes":
		return kubeElector(leaseNS, leaseName, namespace, id, ttl, renew, log, onChange)
	}
	return nil, fmt.Errorf("--lease-backend %q: want redis or kubernetes", backend)
}
