//go:build !nokubernetes

package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/kubelease"
)

const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// kubeElector builds the Kubernetes Lease elector (--lease-backend
// kubernetes) from the pod's service account. Building with
// -tags nokubernetes leaves it, and client-go, out of the binary.
func kubeElector(leaseNS, leaseName, namespace, id string, ttl, renew time.Duration, log *slog.Logger) (kjob.Elector, error) {
	if leaseNS == "" {
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return nil, fmt.Errorf("--lease-namespace is empty and the pod's namespace is unknown (%v): set --lease-namespace", err)
		}
		leaseNS = strings.TrimSpace(string(b))
	}
	if leaseName == "" {
		leaseName = names.Deployment{Namespace: namespace}.LeaseName()
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--lease-backend kubernetes: %w (it uses the pod's service account; run in a cluster)", err)
	}
	cl, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("--lease-backend kubernetes: %w", err)
	}
	// --lease-ttl is the Lease duration; the leader steps down after
	// two thirds of it without a renewal; --lease-renew is the retry
	// period.
	return kubelease.New(kubelease.Config{
		Client: cl, Namespace: leaseNS, Name: leaseName, Identity: id,
		LeaseDuration: ttl, RenewDeadline: ttl * 2 / 3, RetryPeriod: renew, Logger: log,
	})
}

// kubeFlags names the flag each kubelease.Config field kubeElector sets
// comes from, for its errors.
var kubeFlags = map[string]string{
	"Config.Namespace": "lease-namespace", "Config.Name": "lease-name", "Config.Identity": "id",
	"Config.LeaseDuration": "lease-ttl", "Config.RenewDeadline": "lease-ttl", "Config.RetryPeriod": "lease-renew",
	"LeaseDuration": "lease-ttl", "RenewDeadline": "lease-ttl", // named in reasons (Related)
}
