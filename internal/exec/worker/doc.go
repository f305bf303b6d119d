// Package worker executes kjob's job windows: it consumes the windows topic
// in a consumer group (internal/exec/partition), and runs each window's handler once
// across all workers, using the idempotency store (internal/store/dedupe) for claims,
// fencing tokens and "done" markers.
//
//	w, err := worker.New(worker.Config{
//		Brokers:  []string{"localhost:9092"},
//		Store:    store,   // *dedupe.Store
//		Handler:  mux,     // *handler.Mux
//		WorkerID: "host-1234",
//	})
//	...
//	err = w.Run(ctx) // until ctx is done; graceful shutdown within Grace
//
// # Per record
//
// A partition's records are decoded into their jobs' lanes
// (internal/lanes): windows of different jobs run concurrently, up to
// Config.Concurrency across the partitions the worker owns, and the
// windows of one job follow its overlap policy (queue, the default, runs
// them one at a time in window order). A free slot goes to the job
// holding the fewest, and an allow job holds at most its max_concurrent
// (jobmsg.Policy.MaxConcurrent; by default Concurrency/AllowShare), so
// neither a backlog nor a slow job takes every slot. A record's offset is committed
// only once it and every record before it is settled: done, skipped
// because the window is already done, settled by its overlap policy
// (skipped, superseded), or written to the dead-letter topic.
//
// Store calls are batched per partition. Windows that come up together
// are claimed in one ClaimBatch call; settlements (completions, releases,
// dead letters, skips) go out in Settle calls, up to three in flight, a
// call's answer handled a few dozen settlements at a time so that one
// group of lanes is settled while the windows of another run. The
// completion of a queue window also claims the next window of its lane in
// the same atomic step (dedupe.Settlement.Next), and only if the
// completion succeeded: a lane's next window starts the moment its
// predecessor is done, one store round trip after the predecessor's
// handler returned, and never before. So a job's fencing tokens grow in
// window order.
//
// Handlers of windows started in the same turn of the partition's loop
// share a runner goroutine that runs them one after the other; if one
// runs for a millisecond, the windows queued behind it get a goroutine
// each. A handler whose last attempt ran 100µs or more gets a goroutine
// per window at once. So a window never waits more than about a
// millisecond behind another job's window, and a backlog of handlers that
// return at once does not pay for a goroutine each.
//
// The claims of running windows are extended in one Settle call per
// partition every ClaimExtendInterval, and one timer per partition (its
// watchdog) cancels a handler whose claim could not be proven in time,
// strictly before the claim can expire (step 3).
//
//  1. The record is decoded (jobmsg.FromRecordAliased). An invalid record (not
//     JSON, unknown schema version, missing fields, too large) is
//     dead-lettered with the decode error as reason. A window whose record
//     names another namespace than Config.Namespace (another deployment's)
//     is dead-lettered with a reason naming both, never claimed nor run
//     (ErrForeignNamespace); one that names none is run with a warning.
//  2. The window is claimed (Store.ClaimBatch, or its predecessor's
//     completion, with WorkerID as owner).
//     - Store unreachable: nothing runs and nothing is committed; the claim
//     is retried with capped exponential backoff (50ms to 2s), and the
//     outage is logged once.
//     - AlreadyDone: the record is acknowledged without running.
//     - Busy (another worker's claim is live): the worker waits
//     min(Claim.Retry, 1s) and claims again; it never skips the window
//     nor commits past it.
//     - Claimed: the handler runs with a context bounded by the window's
//     timeout, the partition's ownership and the claim's proof (step 3),
//     and a *handler.Job carrying the attempt number and fencing token.
//     The timeout looks as context.WithTimeout makes it (Deadline, and
//     context.DeadlineExceeded as Err and cause once it passes), rounded
//     down to the millisecond: handlers whose timeouts end in the same
//     millisecond share one timer.
//     Panics become errors. A record older than the store's Retention (by
//     the later of its published_at and its Kafka timestamp) is not run:
//     its done marker may have expired, so it is dead-lettered with that
//     reason (ErrBeyondHorizon); kjobctl dlq redrive runs it if it must.
//  3. While the handler runs, the claim is extended every
//     ClaimExtendInterval, with the partition's other running claims. If the store
//     reports the claim taken over (dedupe.ErrFenced), the handler's
//     context is cancelled and its result is discarded ("fenced"); the
//     window is claimed again, which then reports Busy or AlreadyDone. If
//     no Extend succeeds for ClaimTTL - max(ClaimExtendInterval,
//     ClaimTTL/5) after the start of the last successful Claim or Extend
//     (the store is unreachable or hung), the handler's context is
//     cancelled with cause ErrClaimUnproven strictly before the claim can
//     expire, and its result is discarded ("stepped-down"): the window is
//     neither completed nor acknowledged, and is claimed again, which
//     waits for the store, and runs with a higher fencing token.
//  4. Success: a Settle completion marks the window done (store errors
//     are retried while the partition is owned). If it is refused, another
//     attempt got there first; the worker logs it and claims again.
//  5. Failure: a permanent error (handler.ErrPermanent, which includes an
//     unknown handler name) or the last of Policy.MaxAttempts attempts
//     dead-letters the window and releases the claim; otherwise the claim
//     is released and the window is claimed again after a backoff of
//     min(MaxBackoff, Backoff*2^(attempt-1)) with equal jitter, as a new
//     attempt with a higher fencing token.
//
// A handler that does not return within Grace after its context was
// cancelled (timeout, revoke, loss) is abandoned: its goroutine is left
// running, the loss is logged loudly, the window is not completed, and the
// attempt counts as failed. If the partition is gone by then, the record
// is not acknowledged: its next owner re-delivers it, and the store decides.
//
// # Reading the code: one window's route
//
// A window's rules are one pure function, Rules.Step in internal/window:
// the window's state and an event in, the next state and actions out. It
// reads no clock and does no I/O; its scenario tables cover the fault
// table of docs/guarantees.md. This package is the shell around it: it
// turns what happens (a record, a lanes decision, a store answer, a
// handler's return, a timer) into events, and carries out the actions
// (step.go). Nothing else writes a window's state. Batching, chaining,
// shared runners, the watchdog and per-millisecond timeouts are the
// shell's, invisible to the rules.
//
// From the fetched record to the handler ("⇒": another goroutine):
//
//  1. partition/partition.go Consumer.poll: kgo's fetch; part.push queues
//     the records and signals the partition's loop. ⇒
//  2. loop.go loop.run: the select of the partition's goroutine; take
//     moves the records to fetched.
//  3. loop.go loop.arrive: Worker.parse (worker.go: signature, then
//     jobmsg.FromRecordAliased) decodes each record; step(Arrived); the
//     job's lane (internal/lanes) decides, loop.apply turns its decision
//     into events: step(Admitted) → the rules ask WantSlot (step.go: the
//     fair queue, lanes.Fair, and the worker's slots).
//  4. loop.go loop.granted: a slot came; step(SlotGranted) → Claim: the
//     window joins claimQ.
//  5. settle.go loop.kick: the turn's claims go out in one
//     Store.ClaimBatch (Worker.claimBatch), answered to the inbox as a
//     claimAnswer. ⇒ ⇒
//  6. loop.go loop.receive → loop.claimed → claimEvent: step(Claimed) →
//     Start (or AlreadyDone → Report, Finish; Busy → Wait). A window
//     claimed before its start (the producer publishes PublishLead ahead)
//     is Held instead: it gives its slot back and waits (Wait) for its
//     start, its claim extended by extendClaims (attempt.go); at its
//     start step(TimerFired) → WantSlot, and loop.granted's
//     step(SlotGranted) → Start under the claim it holds, with no claim's
//     round trip (the herd's row). A halt gives the claim back (Unclaim).
//     A window of a skip, latest or replace job fetched before its start
//     waits in loop.untilStart and enters its lane only at its start
//     (startsDue), so its overlap policy decides then. Each window that
//     waits for its start is counted for its start instant (herdgc.go):
//     when more wait for one instant than the worker has slots, the
//     process collects its garbage 100 ms before it, so that no
//     collection runs while the waves of slots turn over (the herd's row).
//  7. attempt.go loop.start: the claim's keepalive, the timeout's shared
//     context (deadlineFor), the watchdog; runner.go loop.dispatch runs
//     the handler on a runner. ⇒
//  8. runner.go launch.run: handler.Recover, then the Mux's HandleJob and
//     the user's handler.
//
// And back to the commit:
//
//  9. runner.go launch.run posts handlerReturned. ⇒
//  10. attempt.go loop.returned → attemptOver: the attempt's contexts end;
//     what its extends, fence and step-down found comes in as events,
//     then step(Returned) → ReleaseSlot (or, chainNext, the slot goes to
//     the lane's next window) and Settle(complete).
//  11. settle.go loop.kick: the turn's settlements and the run history go
//     out in one Store.Settle (Worker.settleBatch), answered as a
//     settleAnswer. ⇒ ⇒
//  12. settle.go loop.answer: per settlement, the chained claim's answer
//     to the next window (chainAnswered), then step(Settled) → Report
//     (step.go loop.report: Config.OnExecuted, the run history) and
//     Finish (loop.go loop.finish: Owned.Settle, the lane's next window).
//  13. partition/partition.go Owned.Settle and part.advance: the settled
//     prefix is marked, and committed by Consumer.commitDrained or kgo's
//     autocommit. ⇒
//
// # Dead letters
//
// A dead letter is produced synchronously to DeadLetterTopic before the
// record is acknowledged, with the original key, value and headers, plus
// the headers named by the HeaderDLQ* constants: reason, source topic,
// partition and offset, attempts, worker and time. Produce errors are
// retried until the partition is revoked, so no window is lost on the way.
//
// # Guarantees
//
// A window is marked done at most once, and a record is never acknowledged
// before its window is done, skipped as done, or dead-lettered. A handler
// can run more than once for the same window: after a failed attempt (by
// design), after a store outage stopped it (step 3), and when a worker
// stalls or dies mid-handler long enough for its claim to expire. Every such run carries a higher fencing token
// (handler.Job.FencingToken) that downstream systems can use to reject a
// stale attempt's writes. A dead-lettered window is released, not
// completed: if its record is delivered again (its commit was lost), the
// window runs again.
package worker
