// Package lease elects the one kjob producer replica that publishes: the
// replica holding a lease (a Redis key with a TTL) leads, the others stand
// by and take over when it goes away.
//
// Leadership is a context, not a boolean. Every replica runs an Elector;
// the one that acquires the lease gets its lead function called with a
// context that is cancelled as soon as leadership can no longer be proven,
// as client-go's leaderelection does with OnStartedLeading:
//
//	lock, err := lease.NewRedisLock(rdb, names.Deployment{Namespace: "prod"}.LeaseKey()) // "kjob:{prod}:producer-lease"
//	if err != nil { ... }
//	el, err := lease.NewElector(lease.Config{Lock: lock, Holder: hostnamePID})
//	if err != nil { ... }
//	err = el.Run(ctx, func(ctx context.Context) error {
//		return publishUntil(ctx) // stop when ctx is done
//	})
//
// # What the lease guarantees
//
// The lease gives liveness and, in the normal case, a single active
// publisher. It does not make publishing safe: a leader paused longer than
// the TTL (GC, a frozen VM) can wake up still running. Safety rests on
// Kafka transactions, which fence a zombie leader's writes.
//
// Within that limit the Elector is careful with time:
//
//   - Only the local monotonic clock is used; the backend's clock is only
//     the TTL's.
//   - A renewal (or acquisition) that starts at s and succeeds proves the
//     lease until s + TTL. The leader cancels lead's context at
//     s + TTL - margin, margin = max(RenewInterval, TTL/5): strictly
//     before the lease can expire and a standby can take it, and whether
//     or not the failing renewal calls have returned (a hung Redis does
//     not delay the step-down).
//   - A renewal the backend refuses (the lease was deleted or taken)
//     cancels lead's context at once; context.Cause of that context wraps
//     ErrLost.
//   - Renew and Release are compare-and-extend and compare-and-delete on
//     the tenure (holder and epoch): a stale leader cannot extend or delete
//     its successor's lease.
//   - On shutdown the leader cancels lead's context, waits for lead to
//     return, then releases the lease, so a standby takes over within
//     RetryInterval instead of TTL; with a Lock that announces releases
//     (Watcher; RedisLock publishes them on a Pub/Sub channel) the
//     standbys try at once, and the handover takes a few Redis round trips.
//
// # When the store is unreachable
//
// A leader that cannot reach the store steps down at its deadline, as
// above, and no replica can win the lease until the store answers again:
// during a Redis outage, restart or failover nobody leads. kjob does not
// let a leader go on without a lease it can prove, although Kafka's
// fencing would keep publishing safe, so that one leader at a time stays
// the lease's promise. What the outage cost is made up for after it: the
// replica that wins the lease right after a run of calls to the store that
// got no answer (its own renewals as the last leader, then its attempts to
// acquire) gets the length of that run in lead's context
// (UnreachableBefore), and the producer publishes the windows that fell
// due during it instead of treating them as missed while every replica was
// down.
//
// # Epochs
//
// Each acquisition gets an epoch, one more than the last: log it and export
// it as a metric to see handovers. See RedisLock for how it behaves when
// Redis loses its data.
//
// # Backends
//
// Lock is the storage boundary. RedisLock keeps the lease in one key; on
// Redis Cluster give it a hash tag ("kjob:{<deployment>}:producer-lease",
// names.Deployment.LeaseKey) so its epoch counter lives in the same slot. A Lock may also implement
// Watcher, so that standbys hear of a release at once instead of polling.
// Another store can implement Lock without touching the Elector. For a
// Kubernetes Lease, use kubelease instead: it is a complete
// elector (client-go's leader election over a coordination.k8s.io Lease)
// with the same Run(ctx, lead) shape, which producer.Config.Elector accepts.
package lease
