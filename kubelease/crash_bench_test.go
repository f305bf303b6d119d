package kubelease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/kubelease"
)

// BenchmarkCrash measures the election part of a producer crash failover
// with the Kubernetes Lease, on client-go's fake clientset with the API
// server's optimistic concurrency (newClientset): from the leader's crash
// (the API server refuses its writes from then on: it neither renews nor
// releases) to the standby's lead being called, over KJOB_CRASH_REPS
// repetitions (default 10) at a random point of the retry cycle. The
// settings are cmd/producer's mapping of --lease-ttl and --lease-renew
// (LeaseDuration = TTL, RenewDeadline = 2/3 TTL, RetryPeriod = renew), at
// the defaults (2s, 300ms), with other renew intervals (400ms, 200ms) and the
// earlier defaults (5s, 1s). It also counts
// the Lease requests per second a leader and one standby make. Run it with
//
//	go test -run '^$' -bench Crash -benchtime 1x ./kubelease/
//
// (the repetitions are inside; b.N is not used).
func BenchmarkCrash(b *testing.B) {
	reps := testenv.Reps(b, "KJOB_CRASH_REPS", 10)
	var out strings.Builder
	fmt.Fprintf(&out, "\nKubernetes Lease crash failover: leader's writes refused (no renewal, no release) -> standby's lead called; %d repetitions; leader + 1 standby; client-go fake clientset with resourceVersion conflicts\n", reps)
	fmt.Fprintf(&out, "%-62s %9s %9s %9s  %12s %13s\n", "setting (--lease-ttl, --lease-renew)", "p50", "p99", "max", "GET/s", "UPDATE/s")
	for _, s := range []struct {
		name       string
		ttl, renew time.Duration
	}{
		{"2s, 300ms: LeaseDuration 2s, RenewDeadline 1.33s, retry 300ms (default)", 2 * time.Second, 300 * time.Millisecond},
		{"2s, 400ms: LeaseDuration 2s, RenewDeadline 1.33s, retry 400ms", 2 * time.Second, 400 * time.Millisecond},
		{"2s, 200ms: LeaseDuration 2s, RenewDeadline 1.33s, retry 200ms", 2 * time.Second, 200 * time.Millisecond},
		{"5s, 1s: LeaseDuration 5s, RenewDeadline 3.33s, retry 1s (before)", 5 * time.Second, time.Second},
	} {
		cl := newClientset(b)
		var mu sync.Mutex
		dead := map[string]bool{}
		gets, updates := 0, 0
		cl.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			switch a.GetVerb() {
			case "get":
				gets++
			case "update", "create":
				updates++
				var l *coordinationv1.Lease
				if u, ok := a.(clienttesting.UpdateAction); ok {
					l = u.GetObject().(*coordinationv1.Lease)
				} else {
					l = a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease)
				}
				// A crashed replica's renewals carry its identity, its
				// release an empty one (nobody else writes that).
				if h := holderOf(l); dead[h] || (h == "" && len(dead) > 0) {
					return true, nil, errors.New("crashed")
				}
			}
			return false, nil, nil
		})
		next := 0
		type rep struct {
			r       *replica
			leading chan time.Time
		}
		start := func() rep {
			next++
			leading := make(chan time.Time, 1)
			cfg := kubelease.Config{Client: cl, Namespace: "kjob", Name: "kjob-producer", Identity: fmt.Sprintf("r%d", next),
				LeaseDuration: s.ttl, RenewDeadline: s.ttl * 2 / 3, RetryPeriod: s.renew, Logger: slog.New(slog.DiscardHandler)}
			el, err := kubelease.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			r := &replica{id: cfg.Identity, el: el, release: make(chan struct{}), done: make(chan error, 1)}
			ctx, cancel := context.WithCancel(context.Background())
			r.cancel = cancel
			go func() {
				r.done <- el.Run(ctx, func(ctx context.Context) error {
					leading <- time.Now()
					<-ctx.Done()
					return nil
				})
			}()
			return rep{r, leading}
		}
		wait := func(r rep) time.Time {
			select {
			case at := <-r.leading:
				return at
			case <-time.After(30 * time.Second):
				b.Fatalf("%s did not lead within 30s", r.r.id)
				return time.Time{}
			}
		}
		stop := func(r rep) {
			r.r.cancel()
			select {
			case <-r.r.done:
			case <-time.After(30 * time.Second):
				b.Fatalf("%s: Run did not return within 30s", r.r.id)
			}
		}
		leader := start()
		wait(leader)
		standby := start()
		time.Sleep(2 * s.renew)
		mu.Lock()
		g0, u0 := gets, updates
		mu.Unlock()
		time.Sleep(10 * time.Second)
		mu.Lock()
		g1, u1 := gets, updates
		mu.Unlock()
		var samples []time.Duration
		for range reps {
			time.Sleep(time.Duration(rand.Int64N(int64(s.renew))))
			mu.Lock()
			dead[leader.r.id] = true
			mu.Unlock()
			at := time.Now()
			samples = append(samples, wait(standby).Sub(at))
			stop(leader)
			mu.Lock()
			clear(dead)
			mu.Unlock()
			leader, standby = standby, start()
			time.Sleep(2 * s.renew) // the new standby has seen the lease held
		}
		stop(leader)
		stop(standby)
		slices.Sort(samples)
		p := func(q int) time.Duration { return samples[max(0, (q*len(samples)+99)/100-1)].Round(time.Millisecond) }
		fmt.Fprintf(&out, "%-62s %9v %9v %9v  %12.1f %13.1f\n", s.name, p(50), p(99), samples[len(samples)-1].Round(time.Millisecond),
			float64(g1-g0)/10, float64(u1-u0)/10)
	}
	out.WriteString("With fewer than 100 samples p99 is the maximum. A standby takes over once LeaseDuration has passed since it last saw the Lease change (client-go), so up to one RetryPeriod after the last renewal it saw.\n")
	fmt.Fprint(os.Stdout, out.String())
}
