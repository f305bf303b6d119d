package kubelease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kjob/kjob/kubelease"
)

func TestGet(t *testing.T) {
	ctx := context.Background()
	cl := fake.NewClientset()
	if _, err := kubelease.Get(ctx, cl, "kjob", "kjob-producer"); !errors.Is(err, kubelease.ErrNoHolder) {
		t.Fatalf("Get of a missing Lease: %v, want ErrNoHolder", err)
	}
	acquired := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	holder, dur, transitions := "producer-1", int32(15), int32(4)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kjob", Name: "kjob-producer"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, LeaseTransitions: &transitions,
			AcquireTime: &metav1.MicroTime{Time: acquired}, RenewTime: &metav1.MicroTime{Time: acquired.Add(time.Minute)}},
	}
	if _, err := cl.CoordinationV1().Leases("kjob").Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := kubelease.Get(ctx, cl, "kjob", "kjob-producer")
	if err != nil {
		t.Fatal(err)
	}
	if h.Identity != holder || h.Transitions != 4 || !h.AcquireTime.Equal(acquired) || h.Duration != 15*time.Second {
		t.Fatalf("holder %+v", h)
	}
	if h.Expired(acquired.Add(time.Minute+10*time.Second)) || !h.Expired(acquired.Add(time.Minute+16*time.Second)) {
		t.Fatal("Expired: want false within the lease duration after the renewal, true after it")
	}
	// Released: holderIdentity cleared.
	empty := ""
	l.Spec.HolderIdentity = &empty
	if _, err := cl.CoordinationV1().Leases("kjob").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kubelease.Get(ctx, cl, "kjob", "kjob-producer"); !errors.Is(err, kubelease.ErrNoHolder) {
		t.Fatalf("Get of a released Lease: %v, want ErrNoHolder", err)
	}
}
