package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// TestRedisLockOnCluster runs the lease's scripts against a real Redis
// Cluster: every key a script touches shares the lease key's hash tag, so
// none is refused with CROSSSLOT, and an elector leads and hands over.
func TestRedisLockOnCluster(t *testing.T) {
	rc := testenv.NewRedisCluster(t).Client()
	l, err := lease.NewRedisLock(rc, testKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	a := mustAcquire(t, l, "a", 2*time.Second)
	if _, ok, err := l.TryAcquire(ctx, "b", 2*time.Second); err != nil || ok {
		t.Fatalf("TryAcquire by b while a holds it: %v %v", ok, err)
	}
	if err := l.Renew(ctx, a, 2*time.Second); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := l.Get(ctx); !errors.Is(err, lease.ErrNoHolder) {
		t.Fatalf("Get after release = %v, want ErrNoHolder", err)
	}
	b := mustAcquire(t, l, "b", 2*time.Second)
	if b.Epoch <= a.Epoch {
		t.Fatalf("epoch after hand-over %d, not above %d", b.Epoch, a.Epoch)
	}

	// An elector leads on the cluster.
	if err := l.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	e, err := lease.NewElector(lease.Config{Lock: l, Holder: "c", TTL: 2 * time.Second, RenewInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(rctx, func(lctx context.Context) error {
			close(leading)
			<-lctx.Done()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-ctx.Done():
		t.Fatal("the elector did not lead on the cluster")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return")
	}
}
