// Package window holds the rules of one window's life in a worker's
// partition, from its fetched record to its settled record, as a pure state
// machine:
//
//	w, actions := rules.Step(w, event)
//
// Step reads no clock (time comes in the events), does no I/O and starts no
// goroutine. The shell around it (the partition loop) feeds it events (the
// window arrived, its lane admitted it, a slot was granted, the store
// answered a claim, the handler returned, a timer fired, the partition was
// halted) and carries out the actions it returns (claim, start the handler,
// settle in the store, write a dead letter, wait, finish the record).
//
// # The worker is its shell
//
// The worker's partition loop (internal/exec/worker) holds each window's
// state as a Window and changes it only through Step (its step.go): it
// turns records, lanes decisions, store answers, handler returns and
// timers into events, and carries out the actions. The running attempt's
// timing is the one part the shell keeps on other goroutines, so that
// stepping down never waits for the loop: the claim's keepalive and the
// partition's watchdog cancel the handler at Window.StepDownAt as Start
// found it, an extend that finds the claim taken over cancels it at once, and the
// watchdog abandons it at AbandonAt; when the attempt ends, the shell
// steps the window with what they found (Extended at the last proof,
// Fenced, TimerFired at the step-down, the abandonment's TimerFired)
// before the Returned, so the outcome is decided here.
//
// # What stays in the shell
//
// Only the rules of one window are here. The shell keeps everything that
// spans windows or is there for throughput, and none of it changes an
// outcome:
//   - the lanes (internal/lanes): which window of a job may start, under its
//     overlap policy; their decisions come in as Admitted, Dropped and
//     Superseded events;
//   - the slots and the fair queue (lanes.Slots, lanes.Fair): WantSlot,
//     WithdrawSlot and ReleaseSlot are their calls, SlotGranted the answer;
//   - batching: Claim, Settle and Extend actions of many windows go out in
//     one ClaimBatch or Settle call; the answers come back one event per
//     window;
//   - chaining: a queue lane's next window claimed by its predecessor's
//     completion (dedupe.Settlement.Next). The window sees it as
//     ChainOffered, then the claim's answer (Claimed, AlreadyDone, Busy or
//     AheadRefused), kept until its lane admits it;
//   - the watchdog, shared runners and per-millisecond timeout contexts:
//     the shell's timers deliver TimerFired; its contexts carry Cancel.
//
// # States
//
//	Fetched   the zero Window: a record, not decoded yet
//	New       decoded, in its job's lane, not started by it
//	Ahead     its claim rides on its predecessor's completion (holds a slot)
//	Ready     started by its lane, waits for a slot
//	Claiming  holds a slot; its claim is queued or in flight
//	Running   its handler runs under its claim (holds a slot)
//	Settling  a store settlement or a dead letter of it is in flight
//	Waiting   a backoff, or a live claim of another attempt, is waited out
//	Held      claimed before its start (published ahead): holds no slot, its
//	          claim kept alive by the extend tick, until its start; then
//	          waits for a slot and starts at once under that claim. Given
//	          back (Unclaim) if the partition halts first
//	Done      settled: its record may be committed (Finish was returned)
//	Left      ends without being settled: the partition's next owner decides
//
// Done and Left are final: no event moves a window out of them.
package window
