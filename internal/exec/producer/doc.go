// Package producer publishes kjob's job windows: one keyed record per cron
// tick of each job, exactly once, from whichever replica currently leads.
//
// # Leadership and fencing
//
// Every producer replica runs Run; an Elector (see internal/store/lease) picks one
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
// published. It then publishes every later window that is due, back to a
// cutoff fixed when its tenure began (at L, when the lease was won):
//
//   - windows due during its own tenure (at or after L) are always
//     published, with trigger "schedule": they are late only because a
//     Kafka error ended a term, and the next term of the same tenure
//     publishes them with their ids unchanged;
//   - windows due before L, while no leader was live (a handover, a crashed
//     leader's lease running out), are published with trigger "catchup" if
//     they fell due at or after L - Config.MisfireGrace (default 10s), or
//     within the job's catch-up limit of L, whichever reaches further back;
//   - older ones are skipped, counted (Config.OnSkipped) and logged.
//
// # Lease store outages
//
// While the lease store (Redis) is unreachable, no replica can prove
// leadership: the leader steps down before its lease could expire and no
// standby can win the lease, so nobody publishes. Publishing does not
// continue without the lease, so that "one leader at a time" stays a
// property of the lease and not only of Kafka's fencing. Instead, the
// replica that wins the lease once the store answers again learns from its
// Elector how long the store had been unreachable for it
// (lease.UnreachableBefore) and treats the windows due since then like
// those of its own tenure: they are published with trigger "catchup",
// back to max(catch-up limit, MisfireGrace, 1m) before now, as after a
// Kafka outage under a live leader; older ones are skipped and counted.
// So a Redis outage, restart or failover shorter than a minute loses no
// window, whatever the jobs' catch-up limits. No window is published twice:
// the new leader fences, then reads the state topic, so it publishes only
// windows after the last one committed. A Kubernetes Lease elector
// (kubelease) does not report API server outages: a tenure after
// one gets the misfire grace only.
//
// So with the default catch-up limit of 0, no window is lost to a graceful
// handover, to a crash failover with the default lease settings, or to a
// transient Kafka error; only windows of longer outages are subject to the
// catch-up limit. A job seen for the first time starts with its first
// window after L: kjob does not invent history. The leader records such a
// job in the state at once (a baseline record, with no window id), so that
// the job's first window is not lost if leadership changes hands before
// it is published.
//
// # Schedules as a log
//
// The jobs are the schedules topic's (internal/store/specs), not a file's.
// Every replica follows the topic while it stands by, into one view (each
// job's current record and validated spec); a new leader takes that view
// over and, after fencing, reads only the records committed since the
// view's offsets, so it has read the topic to its end, then imports the
// schedules file (Config.Jobs), if any, under the ownership rule of
// docs/schedules.md (an entry is written when the topic lacks the job or
// the entry changed since it was last imported; a job deleted at runtime
// stays deleted). While leading it reads change requests from the control
// topic and applies each at an instant F: in one transaction, the windows
// due up to F (under the old spec), the new spec records or tombstones,
// one change-log record per edit and the request's Result. The changed
// job's next window is then its first after F under the new spec
// (Record.EffectiveFrom = F), so no window is lost or doubled at the
// boundary, and a paused, disabled or deleted job publishes nothing after
// F. Every window record carries the spec version that produced it.
//
// Catch-up across a handover uses the current spec from the later of the
// job's last published window and its EffectiveFrom: no change commits
// while no leader leads, so the spec in force during a leaderless gap is
// the latest one. Requests written while no leader led are answered by the
// next one if they are younger than specs.RequestTTL.
//
// # Timing
//
// Windows are published at their start time by a timer set for the earliest
// due window across all jobs (no polling loop), so under no load a window is
// published a few milliseconds after it starts.
package producer
