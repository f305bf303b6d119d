package backoff_test

import (
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/base/backoff"
)

// The delays of a call retried while Kafka cannot be reached.
func ExampleBackoff() {
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	var ds []time.Duration
	for range 6 {
		ds = append(ds, b.Next())
	}
	fmt.Println(ds)
	b.Reset() // it worked for a while: start again from Min
	fmt.Println(b.Next())
	// Output:
	// [100ms 200ms 400ms 800ms 1s 1s]
	// 100ms
}

// The delay before a failed window's third attempt: its policy's backoff
// doubled twice, capped, with equal jitter.
func ExampleExponential() {
	d := backoff.Exponential(time.Second, time.Minute, 3, backoff.Equal)
	fmt.Println(d >= 2*time.Second && d <= 4*time.Second)
	// Output: true
}
