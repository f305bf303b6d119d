package kubelease_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/kubelease"
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
	return startWith(t, config(cl, id), overlap)
}

// startWith starts a replica with cfg (its Identity is the replica's id).
func startWith(t *testing.T, cfg kubelease.Config, overlap *atomic.Int32) *replica {
	t.Helper()
	id := cfg.Identity
	el, err := kubelease.New(cfg)
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

// clientset is client-go's fake clientset plus the API server's
// optimistic concurrency on Leases, which the fake's tracker lacks: every
// write bumps metadata.resourceVersion and an update carrying a stale one
// is refused with 409 Conflict. client-go's leader election renews
// optimistically and relies on that conflict to notice a lease taken over.
// It also records the holder identity of every Lease write it accepts, in
// order, so tests can assert how leadership passed from one replica to
// another without timing it.
type clientset struct {
	*fake.Clientset
	mu      sync.Mutex
	holders []string // holder identity after each accepted create or update
}

func newClientset(t testing.TB) *clientset {
	cl := &clientset{Clientset: fake.NewClientset()}
	cl.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		switch a.GetVerb() {
		case "create":
			l := a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease)
			l.ResourceVersion = "1"
			cl.holders = append(cl.holders, holderOf(l))
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
			cl.holders = append(cl.holders, holderOf(l))
		}
		return false, nil, nil // the tracker stores it
	})
	return cl
}

// writes returns the holder identities of the Lease writes so far.
func (cl *clientset) writes() []string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Clone(cl.holders)
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
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

	// a releases (shutdown) and b takes over because of the release, not
	// because the lease ran out: the write just before b's first one is
	// a's release (an empty holder). Had a not released, b would have
	// written over a's record once it expired, with no release between.
	stopped := time.Now()
	a.stop(t)
	if a.leading.Load() {
		t.Fatal("a still leading after Run returned")
	}
	testenv.Eventually(t, 30*time.Second, b.leading.Load, "b takes over after a releases")
	t.Logf("hand-over after release took %v (lease duration 2s; a figure, not asserted)", time.Since(stopped))
	assertHandedOver(t, cl.writes(), "a", "b")
	if h := holder(t, cl); h != "b" {
		t.Fatalf("lease holder = %q, want b", h)
	}
	b.stop(t)
}

// assertHandedOver checks that in writes (holder identities of Lease
// writes, in order) from held the Lease, then released it (wrote an empty
// holder), and to's first write came right after that release.
func assertHandedOver(t *testing.T, writes []string, from, to string) {
	t.Helper()
	first := slices.Index(writes, to)
	if first < 2 {
		t.Fatalf("Lease writes %q: want %s's record, then its release, then %s's first write", writes, from, to)
	}
	if writes[first-1] != "" || writes[first-2] != from {
		t.Fatalf("Lease writes %q: %s's first write does not follow a release by %s; it took over some other way (expiry?)", writes, to, from)
	}
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

// readManifest decodes one object of the deploy/kubernetes base.
func readManifest(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "base", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("deploy/kubernetes/base/%s: %v", file, err)
	}
}

// The deploy/kubernetes base grants the producers only what its Role
// lists (get and update on one Lease, no create) and creates that Lease
// empty instead. Here the API server refuses every Lease request the Role
// does not allow, the Lease exists as the base creates it, and two
// electors must still elect one leader and hand over on release, with no
// request refused.
func TestDeployedRoleIsEnough(t *testing.T) {
	var role rbacv1.Role
	readManifest(t, "role.yaml", &role)
	var pre coordinationv1.Lease
	readManifest(t, "lease.yaml", &pre)
	if len(role.Rules) != 1 {
		t.Fatalf("role.yaml has %d rules, want 1", len(role.Rules))
	}
	rule := role.Rules[0]

	cl := newClientset(t)
	pre.ResourceVersion = "1"
	if err := cl.Tracker().Add(&pre); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	verbs := map[string]int{}
	var refused []string
	cl.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		var name string
		switch a := a.(type) {
		case clienttesting.GetAction:
			name = a.GetName()
		case clienttesting.CreateAction:
			name = a.GetObject().(*coordinationv1.Lease).Name
		case clienttesting.UpdateAction:
			name = a.GetObject().(*coordinationv1.Lease).Name
		}
		mu.Lock()
		defer mu.Unlock()
		verbs[a.GetVerb()]++
		if !slices.Contains(rule.Verbs, a.GetVerb()) || !slices.Contains(rule.ResourceNames, name) || a.GetNamespace() != pre.Namespace {
			refused = append(refused, a.GetVerb()+" "+a.GetNamespace()+"/"+name)
			return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), name, errors.New("not granted by role.yaml"))
		}
		return false, nil, nil // on to the conflict reactor and the tracker
	})
	cfg := func(id string) kubelease.Config {
		c := config(cl, id)
		c.Namespace, c.Name = pre.Namespace, pre.Name
		return c
	}
	var overlap atomic.Int32
	a := startWith(t, cfg("a"), &overlap)
	b := startWith(t, cfg("b"), &overlap)
	testenv.Eventually(t, 30*time.Second, func() bool { return a.leading.Load() || b.leading.Load() }, "one elector leads")
	leader, standby := a, b
	if b.leading.Load() {
		leader, standby = b, a
	}
	leader.stop(t)
	testenv.Eventually(t, 30*time.Second, standby.leading.Load, "the standby takes over after the leader releases")
	assertHandedOver(t, cl.writes(), leader.id, standby.id)
	standby.stop(t)

	mu.Lock()
	defer mu.Unlock()
	t.Logf("Lease requests by verb: %v", verbs)
	if len(refused) > 0 {
		t.Errorf("requests the Role does not grant: %q", refused)
	}
	if verbs["create"] != 0 {
		t.Errorf("%d create calls on a pre-created Lease, want 0", verbs["create"])
	}
}
