package kubelease_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/lease/kubelease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Short timings so the tests run in seconds; generous relative to each
// other so they hold under load.
func config(cl kubernetes.Interface, id string) kubelease.Config {
	return kubelease.Config{
		Client: cl, Namespace: "kjob", Name: "kjob-producer", Identity: id,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// replica runs one Elector; lead marks it leading until its context ends
// or release is closed.
type replica struct {
	id      string
	el      *kubelease.Elector
	leading atomic.Bool
	terms   atomic.Int32
	mu      sync.Mutex
	release chan struct{} // closed to make the current lead return
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, cl kubernetes.Interface, id string, overlap *atomic.Int32) *replica {
	t.Helper()
	el, err := kubelease.New(config(cl, id))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, el: el, release: make(chan struct{}), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		r.done <- el.Run(ctx, func(ctx context.Context) error {
			if overlap.Add(1) > 1 {
				t.Errorf("%s leads while another replica leads", id)
			}
			r.terms.Add(1)
			r.leading.Store(true)
			r.mu.Lock()
			release := r.release
			r.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-release:
			}
			r.leading.Store(false)
			overlap.Add(-1)
			return nil
		})
	}()
	return r
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: Run: %v", r.id, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: Run did not return within 20s of cancellation", r.id)
	}
}

// newClientset is client-go's fake clientset plus the API server's
// optimistic concurrency on Leases, which the fake's tracker lacks: every
// write bumps metadata.resourceVersion and an update carrying a stale one
// is refused with 409 Conflict. client-go's leader election renews
// optimistically and relies on that conflict to notice a lease taken over.
func newClientset(t *testing.T) *fake.Clientset {
	cl := fake.NewClientset()
	var mu sync.Mutex
	cl.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		switch a.GetVerb() {
		case "create":
			a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease).ResourceVersion = "1"
		case "update":
			l := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
			cur, err := cl.Tracker().Get(a.GetResource(), l.Namespace, l.Name)
			if err != nil {
				return true, nil, err
			}
			rv := cur.(*coordinationv1.Lease).ResourceVersion
			if l.ResourceVersion != rv {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), l.Name, errors.New("the object has been modified"))
			}
			n, _ := strconv.Atoi(rv)
			l.ResourceVersion = strconv.Itoa(n + 1)
		}
		return false, nil, nil // the tracker stores it
	})
	return cl
}

func holder(t *testing.T, cl kubernetes.Interface) string {
	t.Helper()
	l, err := cl.CoordinationV1().Leases("kjob").Get(context.Background(), "kjob-producer", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func TestTwoElectorsOneLeadsOtherStandsByThenTakesOver(t *testing.T) {
	cl := newClientset(t)
	var overlap atomic.Int32
	a := start(t, cl, "a", &overlap)
	testenv.Eventually(t, 10*time.Second, a.leading.Load, "a leads")
	b := start(t, cl, "b", &overlap)

	// b stands by while a renews: well past several LeaseDurations.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b.leading.Load() {
			t.Fatal("b leads while a holds the lease")
		}
		time.Sleep(50 * time.Millisecond) // sampling interval of a negative check
	}
	if h := holder(t, cl); h != "a" {
		t.Fatalf("lease holder = %q, want a", h)
	}

	// a releases (shutdown): b takes over promptly, without waiting for
	// the lease to expire.
	stopped := time.Now()
	a.stop(t)
	if a.leading.Load() {
		t.Fatal("a still leading after Run returned")
	}
	testenv.Eventually(t, 10*time.Second, b.leading.Load, "b takes over after a releases")
	took := time.Since(stopped)
	t.Logf("hand-over after release took %v (lease duration 2s)", took)
	if took > 1900*time.Millisecond {
		t.Errorf("hand-over took %v: want it faster than the 2s lease duration, since a released the lease", took)
	}
	if h := holder(t, cl); h != "b" {
		t.Fatalf("lease holder = %q, want b", h)
	}
	b.stop(t)
}

func TestLeadReturningReleasesAndCampaignsAgain(t *testing.T) {
	cl := newClientset(t)
	var overlap atomic.Int32
	a := start(t, cl, "a", &overlap)
	testenv.Eventually(t, 10*time.Second, a.leading.Load, "a leads")
	b := start(t, cl, "b", &overlap)
	a.mu.Lock()
	close(a.release) // a's lead returns: it must release, and b take over
	a.release = make(chan struct{})
	a.mu.Unlock()
	testenv.Eventually(t, 10*time.Second, b.leading.Load, "b takes over after a's lead returned")
	b.stop(t)
	// a campaigns again and, b gone, leads again.
	testenv.Eventually(t, 10*time.Second, func() bool { return a.terms.Load() >= 2 }, "a leads a second term")
	a.stop(t)
}

func TestLostLeaseCancelsLead(t *testing.T) {
	cl := newClientset(t)
	var overlap atomic.Int32
	var mu sync.Mutex
	var cause error
	el, err := kubelease.New(config(cl, "a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var leading atomic.Bool
	go func() {
		done <- el.Run(ctx, func(lctx context.Context) error {
			overlap.Add(1)
			leading.Store(true)
			<-lctx.Done()
			mu.Lock()
			cause = lctx.Err()
			mu.Unlock()
			leading.Store(false)
			return nil
		})
	}()
	testenv.Eventually(t, 10*time.Second, leading.Load, "a leads")
	// Someone else takes the Lease over in the API server (an operator, or
	// a partition after which another replica won): a's renewals fail.
	l, err := cl.CoordinationV1().Leases("kjob").Get(context.Background(), "kjob-producer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, now := "intruder", metav1.NewMicroTime(time.Now())
	dur := int32(3600)
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime, l.Spec.LeaseDurationSeconds = &other, &now, &now, &dur
	if _, err := cl.CoordinationV1().Leases("kjob").Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return !leading.Load() }, "a stops leading once the lease is taken")
	mu.Lock()
	if !errors.Is(cause, context.Canceled) {
		t.Errorf("lead context ended with %v, want context.Canceled", cause)
	}
	mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h := holder(t, cl); h != "intruder" {
		t.Errorf("holder = %q: a must not release a lease it no longer holds", h)
	}
}

func TestConfigErrors(t *testing.T) {
	cl := newClientset(t)
	for _, c := range []struct {
		mut  func(*kubelease.Config)
		want string
	}{
		{func(c *kubelease.Config) { c.Client = nil }, "Config.Client is nil"},
		{func(c *kubelease.Config) { c.Namespace = "" }, "Config.Namespace is empty"},
		{func(c *kubelease.Config) { c.Name = "" }, "Config.Name is empty"},
		{func(c *kubelease.Config) { c.Identity = "" }, "Config.Identity is empty"},
		{func(c *kubelease.Config) { c.RenewDeadline = c.LeaseDuration }, "RenewDeadline = 2s is not below LeaseDuration"},
		{func(c *kubelease.Config) { c.RetryPeriod = 1300 * time.Millisecond }, "RetryPeriod = 1.3s is too long"},
	} {
		cfg := config(cl, "a")
		c.mut(&cfg)
		if _, err := kubelease.New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
