package testenv

import "runtime"

// Goroutines returns the stacks of every goroutine of the test binary, for
// a test to log when something did not stop in time: a hang is then told
// apart from slowness by what each goroutine was waiting on.
func Goroutines() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}
