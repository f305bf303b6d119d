// Package partition consumes a Kafka topic in a consumer group and treats
// each assigned partition as a leadership: while this member owns a
// partition, its ServeFunc runs on a goroutine of its own, under a context
// that ends when the ownership ends. It takes the partition's records in
// offset order as they are fetched and settles them in any order, with any
// concurrency (Config.Serve); or, for callers that handle records strictly
// one after the other, Config.Process is called for each record in order.
//
//	c, err := partition.New(partition.Config{
//		Brokers: []string{"localhost:9092"},
//		Group:   "kjob-workers",
//		Topic:   "kjob.windows",
//		Process: func(ctx context.Context, rec *kgo.Record) error {
//			// settle rec; return ctx.Err() only if ctx is done
//			return nil
//		},
//	})
//	...
//	err = c.Run(ctx) // returns after a graceful shutdown once ctx is done
//
// # Commits: the settled prefix
//
// The Consumer keeps, per partition, the records fetched and not yet below
// the commit point, in offset order (the frontier). Owned.Settle marks a
// record settled, in any order; the commit point moves past the contiguous
// prefix of settled records, and the last of them is marked for commit
// (kgo.AutoCommitMarks). So a record is committed only once it and every
// record below it are settled: a slow record holds the commit point while
// records above it settle, and after a crash or a rebalance the next owner
// gets every record from the first unsettled one on again, including those
// above it that were settled (the caller's idempotency, internal/store/dedupe, skips
// them). No offset map is kept in the commit metadata.
//
// Marks are committed every CommitInterval, as soon as a partition's
// frontier is empty (everything fetched is settled; at most every 50ms),
// and synchronously when partitions are revoked and at shutdown, so the
// next owner starts right after the last settled prefix. Records are read
// with the read-committed isolation level (records of aborted transactions
// are never processed), and a group without committed offsets starts at
// the beginning of the topic.
//
// Config.MaxUncommitted bounds the frontier: when a partition holds that
// many records, fetching it is paused (the poll loop never blocks), and it
// resumes once they are down to half. It bounds the memory a partition
// holds and what a crash re-delivers: at most MaxUncommitted records plus
// the records of one fetch, plus those settled since the last commit.
//
// # Revoke, loss and shutdown
//
// On a revoke (a cooperative rebalance moves the partition away, or Run's
// context is done) Owned.Halted is closed: the ServeFunc starts nothing
// new, and the work in flight may finish within Config.Grace, after which
// its context is cancelled; once the ServeFunc has returned, the settled
// prefix is committed before the revoke callback returns, i.e. before the
// group hands the partition to its next owner. Records already fetched for
// the partition are dropped with its goroutine.
//
// On a loss (session expired, member fenced) the partition's context is
// cancelled at once and nothing is committed: another member may own the
// partition already.
//
// The partition context carries the values of Run's context but not its
// cancellation: cancelling Run's context starts a graceful shutdown (the
// revoke path above for every partition, while the member still
// heartbeats), then the member leaves the group and the client is closed.
// Run returns when every goroutine it started has exited.
//
// If the partition is assigned to this member again, a new goroutine
// starts; kgo fetches the partition again from the committed offset (it
// fetches offsets for every newly added partition of a cooperative
// assignment), so nothing is skipped and nothing already settled is
// processed by this member twice.
//
// # Why rebalances cannot deadlock
//
// Three rules keep the poll loop, the rebalance callbacks and the partition
// goroutines from waiting on each other:
//
//  1. The client uses kgo.BlockRebalanceOnPoll, so no OnPartitions callback
//     runs between PollFetches returning and AllowRebalance. Between the
//     two, the poll loop only appends the fetched records to each
//     partition's in-memory queue, which never blocks; a rebalance waits at
//     most for that hand-over. Because callbacks and hand-overs exclude each
//     other, a batch is always handed to the goroutine of the assignment it
//     was fetched for: a batch fetched before a revoke cannot reach a later
//     goroutine of the same partition.
//  2. Back-pressure is by pausing, not blocking: when a partition holds
//     MaxUncommitted records, the poll loop pauses fetching it
//     (PauseFetchPartitions); settling resumes it when they are down to
//     half. Pausing one partition does not slow the others, and paused
//     partitions' buffered data is discarded by kgo and fetched again later.
//     A revoked or lost partition is resumed once its goroutine has exited,
//     because kgo keeps pauses across assignments.
//  3. The callbacks wait only for partition goroutines, and partition
//     goroutines never wait for the poll loop or a callback: they take their
//     own queue, process, and settle. A waiting poll (one that has not
//     returned records) does not block a rebalance in kgo, and while a
//     callback runs, polls wait; so the poll loop pausing behind a revoke
//     that waits out a Grace period is the only coupling, and it ends.
//
// In a cooperative rebalance kgo keeps heartbeating while the revoke
// callback runs, so a revoke that takes Grace does not expire the session.
// A ServeFunc (or Process) that ignores its cancelled context blocks the
// revoke (and so the rebalance) until it returns; the Consumer logs an
// error every Grace while it waits. The worker package guarantees its
// ServeFunc returns.
//
// # Seek
//
// Consumer.Seek moves an owned partition to another offset while the
// member keeps running (operators' replays, internal/exec/control): the partition's
// ServeFunc is halted as on a revoke (without committing its marks), then the
// poll loop, between two polls, drops what was fetched, sets the fetch
// position, commits the new offset and starts a new goroutine. A waiting
// poll is woken up for it. Doing the reset on the poll loop means no
// rebalance callback runs concurrently and no batch fetched at the old
// position reaches the new goroutine.
//
// # Options
//
// New sets FetchMaxWait to 250ms before Config.ClientOpts, which may change
// it: a partition whose fetching resumes after it held MaxUncommitted waits for
// the fetch in flight, which waits up to FetchMaxWait when the other
// partitions have nothing new (kgo's default of 5s stalled backlogs). It
// also sets FetchMaxPartitionBytes to 128 KiB (kgo's default is 1 MiB): a
// fetch of a partition then brings fewer records than MaxUncommitted, so
// pausing drops little that was fetched ahead and must be fetched and
// decompressed again.
//
// New applies these client options after Config.ClientOpts, so they win:
// ConsumerGroup, Balancers(CooperativeStickyBalancer), FetchIsolationLevel
// (ReadCommitted), ConsumeResetOffset(start), AutoCommitMarks,
// AutoCommitInterval, BlockRebalanceOnPoll, SessionTimeout,
// HeartbeatInterval, RebalanceTimeout (at least 2*Grace+20s), the three
// OnPartitions callbacks and, with an InstanceID, ClientID. The topic is
// added to the client when Run starts, so building a Consumer does not join
// the group.
//
// Every assign, revoke and loss is logged with the keys partition, member
// (Config.InstanceID) and reason.
//
// # Transaction markers and lag
//
// The producer writes in transactions, so each partition holds a commit
// marker after every transaction's records. The consumer keeps those
// markers (kgo.KeepControlRecords), never passes them to Take or Process,
// and settles each one as it is fetched, so the committed offset moves past
// it with the settled prefix: a
// drained group shows a lag of 0 in kadm, kafka-consumer-groups and every
// other tool, instead of one marker per partition forever.
package partition
