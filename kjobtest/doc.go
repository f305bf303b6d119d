// Package kjobtest helps users of kjob test their handlers, as River's
// rivertest and franz-go's kfake do for theirs. It has two uses.
//
// # Unit tests of a handler
//
// NewJob builds the *kjob.Job a worker would pass to a handler, from a
// JobOptions whose zero fields all have defaults: the window (job and
// handler names, start and end, trigger, payload, timeout, retries,
// overlap policy) and the attempt (number, fencing token, worker). Call
// the handler, or the *kjob.Mux it is registered on, with it:
//
//	func TestReport(t *testing.T) {
//		j := kjobtest.NewJob(kjobtest.JobOptions{
//			Window:       kjobtest.Window{Job: "report", Payload: ReportArgs{Team: "billing"}},
//			Attempt:      2,
//			FencingToken: 41,
//		})
//		if err := mux.HandleJob(context.Background(), j); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// The payload is any value encoding/json encodes to an object, or JSON
// text (json.RawMessage, []byte, string). The job is built through kjob's
// wire format, so the handler sees what it would see in production, and an
// invalid window makes NewJob panic naming the field, as
// httptest.NewRequest does.
//
// # A pipeline in a test
//
// StartPipeline runs a small kjob deployment inside the test process: the
// embedded Kafka broker (kfake) with the windows and dead-letter topics, a
// Redis for the idempotency store, and one kjob.Worker (kjob.NewWorker,
// the worker a process embeds) running the handler under test with its
// claims, fencing tokens, retries, overlap policies and dead letters. The
// worker sends every window to the handler under test, whatever its
// handler name: the built-in handlers (noop, log, sleep, http) are not in
// the way. Publish puts a window on the topic now, as
// the producer would; Wait blocks (with a deadline) until that window is
// settled and returns its Result: the Outcome, the handler's attempts with
// their tokens and errors, the store's record (Stored) and the DeadLetter.
//
//	func TestReportPipeline(t *testing.T) {
//		p := kjobtest.StartPipeline(t, mux, kjobtest.PipelineOptions{})
//		id := p.Publish(t, kjobtest.Window{Job: "report", Payload: ReportArgs{Team: "billing"}})
//		res := p.Wait(t, id)
//		if res.Outcome != kjobtest.OutcomeDone || len(res.Attempts) != 1 {
//			t.Fatalf("report: %s after %d attempts: %v", res.Outcome, len(res.Attempts), res.Err)
//		}
//	}
//
// Everything StartPipeline starts (the broker, Redis, the worker and its
// goroutines) is stopped when the test ends, through t.Cleanup; a handler
// that ignores its context's cancellation is abandoned after
// PipelineOptions.Grace, as in production, and is then the only thing
// left running. Every wait has a deadline (PipelineOptions.WaitTimeout),
// after which the test fails with what happened so far.
//
// A pipeline takes a second or two to start. Tests can share one: use a
// different job name (Window.Job) per test, as windows of different jobs
// wait for each other only for a free slot. To start one in TestMain, which has no
// *testing.T, use a Standalone as the TB.
//
// # Redis
//
// The pipeline's Redis is a real redis-server started on a free loopback
// port in a temporary directory when one is on PATH; otherwise the
// in-process miniredis, and the test log says so. These environment
// variables change that:
//
//	KJOB_TEST_REQUIRE_REDIS=1   fail instead of falling back to miniredis
//	KJOB_TEST_REDIS_URL=redis://host:port/db
//	                            use that Redis instead (only when the TB is a
//	                            testing.TB). Its database is FLUSHED before each
//	                            pipeline starts: point it at a disposable one, and
//	                            run test packages one at a time (go test -p 1).
package kjobtest
