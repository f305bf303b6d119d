// Package control is the worker side of operators' replays: the control
// topic's protocol (SeekRequest, SeekAck) and the Agent every worker runs
// next to its consumer, which moves the partitions the worker owns when an
// operator asks.
//
// Kafka lets a consumer group's offsets be reset from outside only while
// the group has no members (kafka-consumer-groups --reset-offsets refuses
// otherwise). kjob routes the reset through a control topic instead
// (default "<windows topic>.control", one partition; see
// names.Deployment.ControlTopic): an operator's tool (internal/ops/operator's
// Replayer, behind kjobctl replay and the dashboard) writes a SeekRequest
// naming the group, the windows topic and a target offset per partition;
// every worker runs an Agent that reads the control topic from the moment
// it started, and the worker that owns a named partition moves its own
// consumption there (partition.Consumer.Seek: finish the in-flight window,
// drop fetched records, set the fetch position, commit the new offset) and
// answers with a SeekAck. The requester re-sends a request, under the same
// id, to the partitions nobody acknowledged yet (an owner acknowledges only
// once the seek is applied, up to its grace later; or a rebalance moved the
// partition): an Agent applies a request id once per partition and
// answers a copy with the same ack (SeekAck.Duplicate), so a replay seeks
// once and cancels the windows running then once.
//
// With SeekRequest.SkipUnsettled, a partition moved forward has the
// windows it skips over that are not settled settled as skipped by the
// replay (Skipper, worker.Worker.SeekSkipping) rather than left unsettled.
//
// The package holds only what a worker process links: planning a replay,
// and every other operator's action, lives in internal/ops/operator.
package control
