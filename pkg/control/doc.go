// Package control is how operators steer a running kjob deployment without
// stopping it: offset resets that the owning worker applies itself, paused
// jobs that the producer honours, and the records kjobctl keeps of what it
// redrove and published.
//
// # Seeks through the control topic
//
// Kafka lets a consumer group's offsets be reset from outside only while
// the group has no members (kafka-consumer-groups --reset-offsets refuses
// otherwise). kjob routes the reset through a control topic instead
// (default "<windows topic>.control", one partition): kjobctl writes a
// SeekRequest naming the group, the windows topic and a target offset per
// partition; every worker runs an Agent that reads the control topic from
// the moment it started, and the worker that owns a named partition moves
// its own consumption there (partition.Consumer.Seek: finish the in-flight
// window, drop fetched records, set the fetch position, commit the new
// offset) and answers with a SeekAck. Targets are absolute offsets, so a
// request delivered twice (kjobctl re-sends it for partitions nobody
// acknowledged, e.g. during a rebalance) has the same effect as once.
//
// When the group has no members, Replayer commits the offsets directly with
// kadm, as kafka-consumer-groups does.
//
// # Replays and done markers
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
// windows. Both are kjobctl's own state in Redis, under their own keys.
//
// # Operators' actions
//
// Trigger publishes a manual window; ReadDeadLetters, AnnotateDeadLetters,
// PlanRedrive and ExecuteRedrive list and republish dead letters. kjobctl
// (trigger, dlq) and the dashboard's actions both call them, so an action
// does the same whichever tool starts it.
//
// # Pauses
//
// Pauses stores paused jobs in Redis (one hash per namespace); the producer
// asks it before each transaction (producer.Config.Pauses) and advances a
// paused job's state without publishing its windows, so neither it nor a
// later leader publishes them. The pause therefore survives leader changes.
// Resuming with catch-up republishes the skipped windows under their
// scheduled ids (see Resume).
package control
