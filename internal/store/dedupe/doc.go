// Package dedupe is kjob's Redis idempotency store: it makes running a job
// window exactly-once-like across a consumer group of workers.
//
// A worker that receives a window calls Claim. If the window is already
// done, it skips the record and commits its offset; if another worker holds
// a live claim, it waits (it neither runs the window nor commits past it);
// otherwise it gets a new fencing token, runs the handler while calling
// Extend, and finally calls Complete, which marks the window done by
// compare-and-set on the token. A failed attempt calls Release so the next
// Claim can retry at once.
//
//	store, err := dedupe.New(rdb, dedupe.Config{Namespace: "prod"})
//	...
//	c, err := store.Claim(ctx, "report@2026-11-22T10:00:00Z", "worker-1/7f3a")
//	if err != nil {
//		return err // Redis unreachable: outcome unknown, retry, commit nothing
//	}
//	switch c.Outcome {
//	case dedupe.AlreadyDone:
//		// skip the window and commit its offset
//	case dedupe.Busy:
//		// someone else runs it: look again after c.Retry, commit nothing
//	case dedupe.Claimed:
//		// run the handler with c.Token, calling store.Extend every ClaimTTL/3;
//		// then store.Complete(ctx, c.WindowID, c.Token), or store.Release on failure
//	}
//
// # Guarantee
//
// A window is completed at most once: Complete succeeds only for the token
// of the latest claim, and only while the window is not done. A handler can
// start more than once for the same window: when its worker crashed or
// stalled past ClaimTTL without Extend (the claim expires and the next
// Claim re-runs it), or after Release. Every such re-run carries a strictly
// higher fencing token, and the stale attempt's Complete, Extend and
// Release fail with ErrFenced (or ErrAlreadyDone once the window is done).
// A done window is reported AlreadyDone for Config.Retention after it
// completed (the replay horizon); after that, or after Forget, its record is
// gone and a new Claim runs it again.
//
// Redis is the source of truth for "done": run it with persistence (AOF) in
// production. A Redis that loses its data forgets which windows ran; its
// fencing tokens still do not go back (see Store epoch below).
//
// # Fencing tokens
//
// Tokens come from one counter per (namespace, job) that never expires and
// is never reset, not even by Forget. So tokens grow strictly per job,
// across all of that job's windows: a downstream store keyed by job can
// remember the highest token it has accepted and reject writes carrying a
// lower one, which stops a zombie attempt that lost its claim from
// overwriting the work of a newer one. Tokens of different jobs are
// unrelated (each job's counter starts at 1, or at its epoch's floor). A batch claim takes the
// tokens of one job's claimed windows with one INCRBY and hands them out in
// the order of the batch, so they are exactly what one INCR per window
// would have given.
//
// # Store epoch
//
// The counters live in Redis, so a Redis that loses its data would start
// them again at 1. A store given an epoch (SetEpoch; internal/store/storeepoch keeps
// it in Kafka and proves it) takes every token above the epoch's floor,
// epoch << EpochShift, raising a job's counter to it first; while the
// epoch is not proven (Unprove, or, on a single server, a claim script
// that finds the epoch marker kjob:{<ns>:_epoch} no longer holding it)
// every claim fails with ErrStoreUnproven. See epoch.go.
//
// # Key layout
//
// Every key of a window carries the hash tag {<namespace>:<job>}, where job
// is the part of the window id before the first '@'. So every key one
// script touches lives in one Redis Cluster slot, and different jobs spread
// across the cluster; batch calls make one script call per job, pipelined.
// Only on a single server (a *redis.Client whose server answers HELLO with
// mode "standalone") do they put up to a thousand windows of any jobs into
// one script call, which costs the server about half as much per window
// when a batch holds many jobs; a server that refuses such a call as
// spanning slots (a cluster behind a proxy) does not run it, and the store
// goes back to one call per job:
//
//	kjob:{<ns>:<job>}:w:<id>  hash: status, token, attempts, holder,
//	                          updated_ms, last_error, claim_until_ms;
//	                          TTL Retention + ClaimTTL from a claim or
//	                          extension, Retention from other transitions
//	                          (a completion within the claim keeps the
//	                          claim's TTL, which exceeds Retention)
//	kjob:{<ns>:<job>}:token   counter of fencing tokens; no TTL
//	kjob:{<ns>:_epoch}        hash: the store epoch's marker (epoch, id,
//	                          run_id); no TTL
//	kjob:{<ns>:<job>}:runs    sorted set: the job's run history (AppendRuns,
//	                          Runs; see history.go), one member per batch of
//	                          runs settled together, scored by its newest
//	                          run's end (Unix ms); at most HistoryBatches
//	                          members, none older than Retention; TTL
//	                          Retention from the last trim
//
// The live claim is part of the window's hash: the latest token and its
// holder own the window while status is "running" and the server's TIME
// is before claim_until_ms. (Before this layout the claim was a key of its
// own, kjob:{<ns>:<job>}:c:<id>; do not run workers of both layouts
// against one namespace: a new worker does not see an old one's claim and
// would re-run the window with a higher token, fencing the old attempt.)
//
// # States
//
// A window's record moves through these states (State.Status):
//
//	(no record) --Claim--> running --Complete--> done
//	                       running --Release---> failed --Claim--> running
//	                       running --claim expires, Claim--> running (new token)
//	running or failed --DeadLetter--> dead (settled: Claim says AlreadyDone)
//	(no record), failed, or running with an expired claim
//	                  --Settle OpSkip------> skipped    (overlap policy)
//	                  --Settle OpSupersede-> superseded (overlap policy)
//	done, dead, skipped, superseded --Retention passes, or Forget--> (no record)
//
// Done, dead, skipped and superseded are the settled statuses (Settled):
// Claim reports AlreadyDone for them and every compare-and-set refuses to
// change them. Every transition after a claim is one op of Settle, which
// applies a batch of them (of any ops and jobs) in one round trip; Extend,
// Complete, Release, DeadLetter and the *Batch methods are Settle with one
// op.
//
// "running" means the latest token claimed it and neither completed nor
// released it; State.ClaimTTL tells whether that claim is still live (0: it
// expired, its holder crashed or stalled, and the next Claim takes over).
// Until someone re-claims, the holder of an expired claim may still Extend
// or Complete: nobody else has run the window.
//
// Every transition is one Lua script (EVALSHA, falling back to EVAL), so it
// is atomic on the server. Timestamps (updated_ms, claim_until_ms) come from
// the Redis server's TIME inside the scripts: one clock for every worker,
// never a comparison of clocks across machines. Claims expire by that clock
// and records by Redis TTLs, so correctness never depends on any clock but
// the server's. Redis 5 or later is required (scripts that read TIME and
// then write).
//
// # Errors
//
// Conditions callers branch on are sentinels (ErrFenced, ErrAlreadyDone,
// ErrNotFound, ErrInvalidID), matched with errors.Is. Any other error, for
// example an unreachable Redis, is returned wrapped with the operation and
// window id: the outcome is unknown and the caller should retry later
// without acknowledging the window. Retrying is safe: a Claim whose reply
// was lost reports Busy (held by the caller's own owner string) until the
// claim expires, a repeated Complete reports ErrAlreadyDone, and a repeated
// Release or Extend succeeds.
package dedupe
