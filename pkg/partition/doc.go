// Package partition consumes a Kafka topic in a consumer group and treats
// each assigned partition as a leadership: while this member owns a
// partition, one goroutine processes its records strictly in order, one at
// a time (Process) or in runs of consecutive records (ProcessBatch, for
// callers that batch their own round trips), under a context that ends when
// the ownership ends.
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
// # Commits
//
// A record's offset is marked for commit only after Process returned nil
// for it (or ProcessBatch reported it settled) (kgo.AutoCommitMarks); marks are committed every CommitInterval,
// as soon as a partition goroutine has caught up with its fetched records
// (at most every 50ms), and synchronously when partitions are revoked and at
// shutdown, so the next owner starts right after the last settled record. Records are read with
// the read-committed isolation level (records of aborted transactions are
// never processed), and a group without committed offsets starts at the
// beginning of the topic.
//
// # Revoke, loss and shutdown
//
// On a revoke (a cooperative rebalance moves the partition away, or Run's
// context is done) the partition goroutine takes no new record; the
// in-flight record may finish within Config.Grace, after which its context
// is cancelled; once the goroutine has returned, the marked offsets are
// committed before the revoke callback returns, i.e. before the group hands
// the partition to its next owner. Records already fetched for the
// partition are dropped with its goroutine.
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
//  2. Back-pressure is by pausing, not blocking: when a partition's queue
//     holds 500 records, the poll loop pauses fetching it
//     (PauseFetchPartitions); its goroutine resumes it when the queue is down
//     to 100. Pausing one partition does not slow the others, and paused
//     partitions' buffered data is discarded by kgo and fetched again later.
//     A revoked or lost partition is resumed once its goroutine has exited,
//     because kgo keeps pauses across assignments.
//  3. The callbacks wait only for partition goroutines, and partition
//     goroutines never wait for the poll loop or a callback: they read their
//     own queue, call Process, and mark. A waiting poll (one that has not
//     returned records) does not block a rebalance in kgo, and while a
//     callback runs, polls wait; so the poll loop pausing behind a revoke
//     that waits out a Grace period is the only coupling, and it ends.
//
// In a cooperative rebalance kgo keeps heartbeating while the revoke
// callback runs, so a revoke that takes Grace does not expire the session.
// A Process that ignores its cancelled context blocks the revoke (and so
// the rebalance) until it returns; the Consumer logs an error every Grace
// while it waits. The worker package guarantees Process returns.
//
// # Seek
//
// Consumer.Seek moves an owned partition to another offset while the
// member keeps running (operators' replays, pkg/control): the partition's
// goroutine stops as on a revoke (without committing its marks), then the
// poll loop, between two polls, drops what was fetched, sets the fetch
// position, commits the new offset and starts a new goroutine. A waiting
// poll is woken up for it. Doing the reset on the poll loop means no
// rebalance callback runs concurrently and no batch fetched at the old
// position reaches the new goroutine.
//
// # Options
//
// New sets FetchMaxWait to 250ms before Config.ClientOpts, which may change
// it: a partition whose fetching resumes after its queue was long waits for
// the fetch in flight, which waits up to FetchMaxWait when the other
// partitions have nothing new (kgo's default of 5s stalled backlogs).
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
// markers (kgo.KeepControlRecords), never passes them to Process, and marks
// each one in order as it passes, so the committed offset moves past it: a
// drained group shows a lag of 0 in kadm, kafka-consumer-groups and every
// other tool, instead of one marker per partition forever.
package partition
