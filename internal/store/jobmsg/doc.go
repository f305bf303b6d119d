// Package jobmsg is kjob's wire format: the Kafka record that carries one job
// window from the producer to a worker, and the record of the producer's
// state topic that remembers each job's last window (State).
//
// A record's key is the job name (so every window of a job lands on the same
// partition, in order). Its value is a JSON object, schema version 1:
//
//	{
//	  "v": 1,
//	  "namespace": "prod",
//	  "id": "report@2026-11-22T10:00:00Z",
//	  "job": "report",
//	  "handler": "http",
//	  "window": {"start": "2026-11-22T10:00:00Z", "end": "2026-11-22T11:00:00Z"},
//	  "scheduled_at": "2026-11-22T10:00:00Z",
//	  "published_at": "2026-11-22T10:00:00.002Z",
//	  "trigger": "schedule",
//	  "payload": {"url": "http://127.0.0.1:8080/hook"},
//	  "policy": {"timeout": "30s", "max_attempts": 3, "backoff": "1s", "max_backoff": "1m", "overlap": "queue"}
//	}
//
// The policy is bounded (MaxTimeout, MaxAttempts, MaxBackoffLimit): a record
// is not trusted to hold a worker's lane for longer than a schedules file
// could. "overlap" says how the job's windows may overlap (see Overlap); a
// record without it, as kjob wrote before overlap policies, decodes as
// OverlapQueue.
//
// "namespace" names the deployment that published the window (and, in a
// State, the deployment whose producer wrote it; see internal/base/names). A worker
// dead-letters a window of another namespace without claiming it, and a
// producer refuses to lead from a state topic whose latest records belong
// to another namespace. The field covers the whole value, so a signature
// (internal/store/signing) covers it too: a record re-labelled with another namespace
// fails verification. A record without "namespace" was written by a kjob
// from before records carried it; nothing in it says which deployment
// wrote it, so workers and producers of every namespace accept it, never
// silently: each logs a warning (see the upgrade section of
// docs/deploying.md). Once every writer of a topic has been upgraded, no
// such record is written any more.
//
// Two headers describe the value: "kjob-schema" (the schema version, "1") and
// "content-type" ("application/json"). Decoding validates every field and
// returns a *DecodeError naming the field, the value and the problem; a value
// written by a newer kjob (a version this one does not know) is rejected with
// ErrUnsupportedVersion instead of being guessed at. Unknown fields of a known
// version are ignored, so version 1 can grow compatibly.
//
// Window ids are "<job>@<window start in RFC 3339, UTC>". Manual triggers and
// backfills get distinct ids (see ManualID and BackfillID) so they never
// collide with the scheduled window of the same start time.
package jobmsg
