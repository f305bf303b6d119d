// Package operator is what operators do to a running kjob deployment
// without stopping it: replays, dead-letter redrives, manual and backfilled
// windows, and the audit log. kjobctl and the dashboard both call it, so an
// action does the same whichever tool starts it. Worker and producer
// processes do not link it: the worker's side of a replay is internal/exec/control.
// Pauses are not operators' records: they are spec changes through the
// producer leader (internal/store/specs), versioned and in the change log.
//
// # Replays and done markers
//
// A Replayer moves the workers' consumer group offsets. When the group has
// members, it writes a control.SeekRequest to the control topic and waits
// for the owners' acks (the worker's control.Agent applies the seek); when
// the group has no members, it commits the offsets directly with kadm, as
// kafka-consumer-groups does.
//
// Rewinding re-delivers windows to their partition's owner. Dedupe skips
// windows that are settled: done, and also dead-lettered ones. So that a
// plain replay re-runs the windows that failed or never finished, Plan
// reads the replayed range and the states of its windows, and Execute
// clears the records of those that failed or were dead-lettered (only
// those still in that state); done windows are skipped when re-delivered.
// With Rerun, the Replayer first deletes the records of every window in
// the replayed range (dedupe.Store.ForgetAll), so they all run again with
// a higher fencing token.
//
// # Operators' records
//
// Redrives records which dead letters were republished, so kjobctl dlq
// redrive --all does not republish one twice. Published marks the windows
// kjobctl backfill and resume --catchup published, so a second run
// publishes nothing new before the workers have run the first run's
// windows. AuditLog keeps who did what from the dashboard. All are the
// operators' own state in Redis, under the keys names.Deployment derives.
//
// # Operators' actions
//
// Operator is the one entry point: Trigger, PlanBackfill and Backfill,
// Paused and ResumeCatchup (a resume through the producer leader, then the
// catch-up of the paused windows), DeadLetters and DeadLetter, PlanRedrive,
// ExecuteRedrive and Redrive, PlanReplay and ExecuteReplay. kjobctl and the
// dashboard build an Operator and only parse their input and render its
// results. The functions under it (Trigger, PublishWindows, ReadDeadLetters,
// AnnotateDeadLetters, PlanRedrive, ExecuteRedrive, Replayer) stay exported
// for the tools that read more than one action's data at once (kjobctl dlq
// lists, plans and redrives from one read of the topic).
//
// A dead letter is internal/store/dlq's Letter; DeadLetter embeds it and
// adds only what the operator knows: its place, its window, its window's
// state and its redrive.
package operator
