package lease_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (an Elector's, a client's)
// outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
