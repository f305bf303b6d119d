package keepalive_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/base/keepalive"
)

// A leader keeps its lease proven by renewing it; when the renewals stop
// succeeding it steps down strictly before the lease can expire in the
// backend: its work runs in a context cancelled by the keepalive.
func Example() {
	p, err := keepalive.NewPolicy(600*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("margin:", p.Margin(), "proof:", p.Proof())

	start := time.Now() // just before the call that took the lease
	// ... the acquisition call succeeded ...
	work, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	k := p.Start(start, func(x keepalive.Expiry) {
		// Runs at x.Deadline, strictly before the lease can expire at
		// x.Proven + TTL.
		stop(errors.New("lease lost: no renewal succeeded in time"))
	})
	defer k.Stop()

	// Two renewals succeed, then the backend stops answering.
	for range 2 {
		time.Sleep(p.RenewInterval())
		start := time.Now()
		// ... the renewal call succeeded ...
		k.Prove(start)
	}
	<-work.Done()
	fmt.Println(k.Err())
	fmt.Println(context.Cause(work))
	// Output:
	// margin: 120ms proof: 480ms
	// keepalive: expired (not proven again before its step-down deadline)
	// lease lost: no renewal succeeded in time
}
