package main

import (
	"fmt"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/store/lease"
)

// newElector returns what --lease-backend selects for
// ProducerConfig.Elector: nil for redis, the library's default lease, or
// the builder of the Kubernetes Lease elector, with c's id and lease
// timing.
func newElector(f *cli.Flags, backend, leaseNS, leaseName string, c kjob.ProducerConfig) (func(func(lease.Event)) (producer.Elector, error), error) {
	switch backend {
	case "redis":
		return nil, nil
	case "kubernetes":
		return func(onChange func(lease.Event)) (producer.Elector, error) {
			el, err := kubeElector(leaseNS, leaseName, c.Namespace, c.ID, c.LeaseTTL, c.LeaseRenew, c.Logger, onChange)
			return el, f.WithFlags(err, kubeFlags)
		}, nil
	}
	return nil, fmt.Errorf("--lease-backend %q: want redis or kubernetes", backend)
}
