// Package producer publishes kjob's job windows: one keyed record per cron
// tick of each job, exactly once, from whichever replica currently leads.
//
// # Leadership and fencing
//
// Every producer replica runs Run; an Elector (see pkg/lease) picks one
// leader. The leader publishes inside Kafka transactions with one
// transactional id per kjob deployment. Starting a leadership term calls
// InitProducerID for that id, which bumps the producer epoch: the broker then
// rejects every write and commit of any older holder of the id, and aborts
// its open transaction. So a paused or partitioned ex-leader ("zombie") can
// never make records visible, whatever the lease or the clocks say: safety
// rests on the transaction, the lease only keeps one replica busy at a time.
//
// # State and catch-up
//
// With each batch of window records the leader writes, in the same
// transaction, one record per job to a compacted state topic: the start of
// the last window published. A new leader fences first, then reads the state
// topic to its end (read-committed), so it knows exactly which windows were
// published. Windows that fell due while no leader was live are then
// published with trigger "catchup" if they are younger than the job's
// catch-up limit; older ones are skipped, counted and logged. A job seen for
// the first time starts with its next window: kjob does not invent history.
//
// # Timing
//
// Windows are published at their start time by a timer set for the earliest
// due window across all jobs (no polling loop), so under no load a window is
// published a few milliseconds after it starts.
package producer
