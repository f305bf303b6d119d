package kubelease

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kjob/kjob/internal/store/lease"
)

// Holder is what a Lease says about its holder, for tools that show the
// leader (kjobctl status).
type Holder struct {
	// Identity is the Lease's holderIdentity.
	Identity string
	// AcquireTime and RenewTime are the Lease's acquireTime and renewTime
	// (zero if unset).
	AcquireTime, RenewTime time.Time
	// Duration is leaseDurationSeconds.
	Duration time.Duration
	// Transitions is leaseTransitions: how many times the Lease changed
	// hands. It grows with every new holder, so it serves as the lease
	// epoch.
	Transitions int32
}

// Expired reports whether the holder has not renewed within Duration of
// now: it has probably stopped and a standby takes over at its next try.
func (h Holder) Expired(now time.Time) bool {
	if h.RenewTime.IsZero() || h.Duration <= 0 {
		return false
	}
	return now.After(h.RenewTime.Add(h.Duration))
}

// ErrNoHolder is returned by Get for a Lease that does not exist or has no
// holder; it is the error kjob's Redis lease returns for the same (errors.Is
// matches either).
var ErrNoHolder = lease.ErrNoHolder

// Get reads the Lease namespace/name. It returns ErrNoHolder when the
// Lease does not exist or has no holder (a leader that shut down releases
// it by clearing holderIdentity).
func Get(ctx context.Context, client kubernetes.Interface, namespace, name string) (Holder, error) {
	l, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Holder{}, fmt.Errorf("kubernetes Lease %s/%s does not exist: %w", namespace, name, lease.ErrNoHolder)
	}
	if err != nil {
		return Holder{}, fmt.Errorf("get kubernetes Lease %s/%s: %w", namespace, name, err)
	}
	sp := l.Spec
	var h Holder
	if sp.HolderIdentity != nil {
		h.Identity = *sp.HolderIdentity
	}
	if sp.AcquireTime != nil {
		h.AcquireTime = sp.AcquireTime.Time
	}
	if sp.RenewTime != nil {
		h.RenewTime = sp.RenewTime.Time
	}
	if sp.LeaseDurationSeconds != nil {
		h.Duration = time.Duration(*sp.LeaseDurationSeconds) * time.Second
	}
	if sp.LeaseTransitions != nil {
		h.Transitions = *sp.LeaseTransitions
	}
	if h.Identity == "" {
		return h, fmt.Errorf("kubernetes Lease %s/%s has no holder (released): %w", namespace, name, lease.ErrNoHolder)
	}
	return h, nil
}
