// Package worker executes kjob's job windows: it consumes the windows topic
// in a consumer group (pkg/partition), and runs each window's handler once
// across all workers, using the idempotency store (pkg/dedupe) for claims,
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
// Records of a partition are settled in order, one window after the other.
// A record's offset is committed only once it is settled: done, skipped
// because the window is already done, or written to the dead-letter topic.
//
// With a store that implements BatchStore (as *dedupe.Store does), a
// backlog of records (a replay, a backfill, a worker catching up) is claimed
// and completed in batches of up to a few hundred windows per Redis round
// trip. Claims are taken ahead in chunks that grow from one window while the
// windows run quickly (each chunk within 100ms) and shrink back to one when
// they do not, so a scheduled window arriving alone is settled exactly as
// described below, and a slow handler never holds claims on many waiting
// windows. Claims taken ahead are extended if their turn comes late (a
// window never starts on a claim that is not proven, see step 3), and
// given back without counting an attempt (dedupe's UnclaimBatch) if the
// partition is revoked first. Successful attempts are completed together
// before the batch's offsets are marked and before the worker waits for
// anything (a busy window, a retry backoff); a crash before that re-runs
// them with higher fencing tokens, like any crash before Complete.
//
//  1. The record is decoded (jobmsg.FromRecord). An invalid record (not
//     JSON, unknown schema version, missing fields, too large) is
//     dead-lettered with the decode error as reason.
//  2. The window is claimed (Store.Claim with WorkerID as owner).
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
//     Panics become errors. A record older than the store's Retention (by
//     the later of its published_at and its Kafka timestamp) is not run:
//     its done marker may have expired, so it is dead-lettered with that
//     reason (ErrBeyondHorizon); kjobctl dlq redrive runs it if it must.
//  3. While the handler runs, the claim is extended every
//     ClaimExtendInterval, each Extend on its own goroutine. If the store
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
//  4. Success: Store.Complete marks the window done (store errors are
//     retried while the partition is owned). If Complete is refused, another
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
