package main

import (
	"fmt"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
)

// newElector returns what --lease-backend selects for
// ProducerConfig.Elector: nil for redis, the library's default lease, or
// the Kubernetes Lease elector, with c's id and lease timing.
func newElector(f *cli.Flags, backend, leaseNS, leaseName string, c kjob.ProducerConfig) (kjob.Elector, error) {
	switch backend {
	case "redis":
		return nil, nil
	case "kubernetes":
		el, err := kubeElector(leaseNS, leaseName, c.Namespace, c.ID, c.LeaseTTL, c.LeaseRenew, c.Logger)
		if err != nil {
			return nil, f.WithFlags(err, kubeFlags)
		}
		return el, nil
	}
	return nil, fmt.Errorf("--lease-backend %q: want redis or kubernetes", backend)
}
