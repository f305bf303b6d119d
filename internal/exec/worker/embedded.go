package worker

import "github.com/kjob/kjob/internal/exec/handler"

// Embedded are options of the root package's Worker (kjob.NewWorker) that
// only kjobtest sets (Embed): they are not part of kjob.WorkerConfig, so
// the public API stays as it is, and the kit runs the Worker users run.
type Embedded struct {
	// Handler, if set, receives every window, whatever its handler name:
	// the Worker's Mux and built-in handlers (noop, log, sleep, http) are
	// not used, so a test's handler can have any name.
	Handler handler.Handler
	// OnExecuted, if set, receives every execution report (Config.
	// OnExecuted), after the Worker's metrics have counted it.
	OnExecuted func(Execution)
}

// Embed sets e on w, a *kjob.Worker from kjob.NewWorker that has not
// run. The root package sets it in its init, as it sets handler.Public;
// internal packages cannot import the root.
var Embed func(w any, e Embedded)
