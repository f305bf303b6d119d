package main

import (
	"fmt"

	"github.com/kjob/kjob"
)

// newElector returns what --lease-backend selects for
// ProducerConfig.Elector: nil for redis, the library's default lease, or
// the Kubernetes Lease elector, with c's id and lease timing.
func newElector(backend, leaseNS, leaseName string, c kjob.ProducerConfig) (kjob.Elector, error) {
	switch backend {
	case "redis":
		return nil, nil
	case "kubernetes":
		return kubeElector(leaseNS, leaseName, c.Namespace, c.ID, c.LeaseTTL, c.LeaseRenew, c.Logger)
	}
	return nil, fmt.Errorf("--lease-backend %q: want redis or kubernetes", backend)
}
