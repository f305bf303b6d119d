// Package kubelease elects the publishing kjob producer with a Kubernetes
// Lease (coordination.k8s.io/v1) instead of Redis, using client-go's
// tools/leaderelection with a LeaseLock. Its Elector is a kjob.Elector:
//
//	el, err := kubelease.New(kubelease.Config{Client: cl, Namespace: "kjob", Name: "kjob-producer", Identity: pod})
//	...
//	p, err := kjob.NewProducer(kjob.ProducerConfig{..., Elector: el})
//
// Leadership is a context: lead runs with a context that client-go cancels
// as soon as the lease cannot be renewed within RenewDeadline, which is
// shorter than LeaseDuration, so a leader that loses the API server steps
// down before a standby may take over. All timing is measured on the local
// monotonic clock against observed changes of the Lease, never by comparing
// clocks across machines. On shutdown, or when lead returns, Run first
// waits for lead to return and only then releases the Lease, so a standby
// never starts publishing while this replica still is.
//
// As with the Redis lease, the lease gives liveness and, normally, a single
// publisher; publishing safety rests on the producer's Kafka transactional
// fencing (a paused leader that resumes after losing the Lease is fenced
// when the next leader initialises the transactional id).
//
// RBAC: the producer's ServiceAccount needs get and update on the one Lease
// (resourceNames), and create on leases in the namespace, since Kubernetes
// cannot restrict create by name. Creating the Lease beforehand (as
// deploy/kubernetes does) lets an operator drop create entirely.
package kubelease

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/kjob/kjob/internal/base/configerr"
)

// Defaults, as client-go's recommended values for controllers.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Config configures an Elector. Client, Namespace, Name and Identity are
// required; zero durations take the defaults.
type Config struct {
	// Client talks to the API server (kubernetes.NewForConfig of
	// rest.InClusterConfig, or a fake clientset in tests). Required.
	Client kubernetes.Interface
	// Namespace and Name locate the Lease. Required. Every producer replica
	// of a deployment uses the same Lease.
	Namespace, Name string
	// Identity is this replica's holder identity, unique per replica (the
	// pod name). Required.
	Identity string
	// LeaseDuration is how long standbys wait after the last renewal they
	// observed before taking over. Default 15s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// steps down; it must be less than LeaseDuration. Default 10s.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between acquisition and renewal
	// attempts; RenewDeadline must exceed 1.2 × RetryPeriod. Default 2s.
	RetryPeriod time.Duration
	// Logger receives leadership changes (keys holder, lease). Default
	// slog.Default().
	Logger *slog.Logger
}

// Elector campaigns for a Kubernetes Lease and runs a function while it
// holds it. Create it with New.
type Elector struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	leading bool
}

// configError is a *configerr.Error about field of Config.
func configError(field string, value any, reason string, related ...string) error {
	return &configerr.Error{Op: "kubelease", Field: field, Value: value, Reason: reason, Related: related}
}

// New validates cfg and returns an Elector. A setting it refuses is a
// *configerr.Error naming the field, the value and the fix.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Client == nil:
		return nil, configError("Config.Client", nil, "is nil: set it to kubernetes.NewForConfig(rest.InClusterConfig())")
	case cfg.Namespace == "":
		return nil, configError("Config.Namespace", nil, "is empty: set the namespace of the Lease (usually the pod's own)")
	case cfg.Name == "":
		return nil, configError("Config.Name", nil, `is empty: set the Lease name shared by the producer replicas, e.g. "kjob-producer-prod" (names.Deployment.LeaseName)`)
	case cfg.Identity == "":
		return nil, configError("Config.Identity", nil, "is empty: set a unique id per replica, e.g. the pod name")
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = min(DefaultRenewDeadline, cfg.LeaseDuration*2/3)
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = min(DefaultRetryPeriod, cfg.RenewDeadline/2)
	}
	if cfg.LeaseDuration <= cfg.RenewDeadline {
		return nil, configError("Config.RenewDeadline", cfg.RenewDeadline,
			fmt.Sprintf("is not below LeaseDuration = %v: the leader must step down before standbys take over; use e.g. two thirds of it", cfg.LeaseDuration), "LeaseDuration")
	}
	if float64(cfg.RenewDeadline) <= leaderelection.JitterFactor*float64(cfg.RetryPeriod) {
		return nil, configError("Config.RetryPeriod", cfg.RetryPeriod,
			fmt.Sprintf("is too long for RenewDeadline = %v: it must be below RenewDeadline/%.1f", cfg.RenewDeadline, leaderelection.JitterFactor), "RenewDeadline")
	}
	if cfg.RetryPeriod < 0 {
		return nil, configError("Config.RetryPeriod", cfg.RetryPeriod, "is negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Elector{cfg: cfg, log: cfg.Logger.With("holder", cfg.Identity, "lease", cfg.Namespace+"/"+cfg.Name)}, nil
}

// Leading reports whether this replica holds the Lease and runs lead.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

func (e *Elector) setLeading(v bool) {
	e.mu.Lock()
	e.leading = v
	e.mu.Unlock()
}

// Run campaigns until ctx is done. Each time this replica acquires the
// Lease it calls lead with a context cancelled when the Lease is lost or
// ctx is done; when lead returns (or ctx is done) Run waits for it, then
// releases the Lease and campaigns again after 3×RetryPeriod, so a standby
// takes over if there is one. Run returns nil
// once ctx is done and lead has returned; lead's errors are logged.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
		Client:     e.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
	}
	kctx := klog.NewContext(ctx, logr.FromSlogHandler(e.cfg.Logger.Handler()).V(1))
	for ctx.Err() == nil {
		if err := e.term(kctx, lock, lead); err != nil {
			return err
		}
		// Standbys retry every RetryPeriod stretched by up to 2.2× with
		// client-go's jitter (factor 1.2): pausing 3× gives every standby
		// at least one try at the released Lease before this replica
		// campaigns again (with 2× it sometimes won its own release back).
		select {
		case <-ctx.Done():
		case <-time.After(3 * e.cfg.RetryPeriod):
		}
	}
	return nil
}

// term runs one client-go election until leadership ends, and returns
// once lead (if it ran) has returned.
func (e *Elector) term(ctx context.Context, lock resourcelock.Interface, lead func(context.Context) error) error {
	// The election runs on its own context so that shutdown stops lead
	// first and releases the Lease (ReleaseOnCancel) only after lead
	// returned.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	started, leadDone := make(chan struct{}), make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			// lctx is cancelled by client-go when a renewal fails past
			// RenewDeadline; lead's context also ends with Run's.
			OnStartedLeading: func(lctx context.Context) {
				close(started)
				defer close(leadDone)
				defer stopElection() // lead returned: release, campaign again
				lctx, cancel := context.WithCancel(lctx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				e.setLeading(true)
				e.log.Info("acquired the kubernetes lease; leading")
				err := lead(lctx)
				switch {
				case ctx.Err() != nil:
					e.setLeading(false)
					e.log.Info("shutting down; releasing the kubernetes lease")
				case lctx.Err() != nil:
					e.setLeading(false)
					e.log.Warn("lost the kubernetes lease (not renewed within the renew deadline); stopped leading")
				default:
					e.setLeading(false)
					e.log.Warn("lead returned; releasing the kubernetes lease", "err", err)
				}
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("kubelease: %w", err)
	}
	waitLead := func() {
		select {
		case <-started:
			<-leadDone
		default:
		}
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-ctx.Done():
			waitLead() // lead's context is already cancelled
			stopElection()
		case <-electCtx.Done():
		}
	}()
	le.Run(klog.NewContext(electCtx, klog.FromContext(ctx)))
	waitLead()
	stopElection()
	<-watchDone
	return nil
}
