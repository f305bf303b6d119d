package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/kubelease"
)

// newKubeClient returns a client of the Kubernetes API and the namespace
// of the current kubeconfig context (or of the pod, in a cluster). Tests
// replace it with a fake clientset.
var newKubeClient = func(kubeconfig string) (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes credentials: %w (set --kubeconfig or KUBECONFIG, or run in a cluster)", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		ns = ""
	}
	cl, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %w", err)
	}
	return cl, ns, nil
}

// leaseName is where the producers keep their lease, for messages.
func (o *opts) leaseDesc() string {
	if o.leaseBackend == "kubernetes" {
		ns := o.leaseNS
		if ns == "" {
			ns = "<kubeconfig namespace>"
		}
		return "kubernetes Lease " + ns + "/" + o.kubeLeaseName()
	}
	return "redis key " + o.deployment().LeaseKey()
}

func (o *opts) kubeLeaseName() string {
	if o.leaseName != "" {
		return o.leaseName
	}
	return o.deployment().LeaseName()
}

// leaderSource returns how status reads the producer leader: nil for the
// Redis lease (inspect's default), a reader of the coordination.k8s.io
// Lease for --lease-backend kubernetes.
func (o *opts) leaderSource() (func(context.Context) (*inspect.Leader, error), error) {
	switch o.leaseBackend {
	case "redis":
		return nil, nil
	case "kubernetes":
	default:
		return nil, fmt.Errorf("--lease-backend %q: want redis or kubernetes, as the producer's: %w", o.leaseBackend, errUsage)
	}
	name := o.kubeLeaseName()
	return func(ctx context.Context) (*inspect.Leader, error) {
		cl, ns, err := newKubeClient(o.kubeconfig)
		if err != nil {
			return nil, err
		}
		if o.leaseNS != "" {
			ns = o.leaseNS
		}
		if ns == "" {
			return nil, errors.New("--lease-namespace is empty and the kubeconfig names no namespace: set --lease-namespace (KJOB_LEASE_NAMESPACE)")
		}
		h, err := kubelease.Get(ctx, cl, ns, name)
		if errors.Is(err, lease.ErrNoHolder) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &inspect.Leader{
			Holder: h.Identity, Epoch: int64(h.Transitions), Since: h.AcquireTime.UTC(),
			Source: "kubernetes Lease " + ns + "/" + name, RenewedAt: h.RenewTime.UTC(), Expired: h.Expired(nowFunc()),
		}, nil
	}, nil
}
