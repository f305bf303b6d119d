package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Replays forward: an operator's replay (kjobctl replay, internal/ops/operator) that
// moves a partition's committed offset ahead of windows that are not
// settled (never claimed, failed and waiting for a retry, or running)
// would otherwise leave those windows unsettled for good, as nothing
// delivers them again. With the operator's explicit consent such windows
// are settled as skipped, with a reason that starts with
// ReplaySkipPrefix: a settled status (Claim reports AlreadyDone, no
// compare-and-set changes it) that status and history show as
// "skipped (replay)". The run history records them with RunSkippedReplay.

// ReplaySkipPrefix starts the reason (State.LastError) of a window settled
// as skipped because a replay moved the offsets past it.
const ReplaySkipPrefix = "replay: "

// ReplaySkipLabel is how status and history show a window settled as
// skipped by a replay.
const ReplaySkipLabel = "skipped (replay)"

// ReplaySkipReason returns the reason recorded for a window a replay
// skipped; detail says which replay (request id, operator).
func ReplaySkipReason(detail string) string {
	return ReplaySkipPrefix + "offsets moved past it by an operator's replay, settled without running: " + detail
}

// SkippedByReplay reports whether st is a window settled as skipped because
// a replay moved the offsets past it.
func SkippedByReplay(st State) bool {
	return st.Status == StatusSkipped && strings.HasPrefix(st.LastError, ReplaySkipPrefix)
}

// ReplaySkipResult is what SkipForReplay did.
type ReplaySkipResult struct {
	// Skipped are the windows it settled as skipped (replay), in order.
	Skipped []string
	// Settled are the windows it found settled already (done, dead,
	// skipped, superseded): nothing to do.
	Settled []string
	// Busy are the windows under a live claim (a handler runs them): not
	// settled; call again once the claim is released or has expired.
	Busy []string
}

// SkipForReplay settles each window of ws (ids with their run details:
// WindowID, Job, Trigger, WindowStart) that holds no live claim and is not
// settled as skipped, with reason (ReplaySkipReason), and records a run
// with outcome RunSkippedReplay by worker for each it settled. A window
// under a live claim is left alone and reported Busy. Store errors are
// returned wrapped: the windows settled before the error stay settled, and
// calling again is safe (settled windows are reported Settled).
func (s *Store) SkipForReplay(ctx context.Context, ws []Run, reason, worker string) (ReplaySkipResult, error) {
	return SkipForReplayWith(ctx, s.Settle, ws, reason, worker)
}

// SettleFunc is Store.Settle, or what wraps it (a worker's instrumented
// store).
type SettleFunc func(ctx context.Context, ss []Settlement, runs ...Run) ([]Result, error)

// SkipForReplayWith is Store.SkipForReplay through settle.
func SkipForReplayWith(ctx context.Context, settle SettleFunc, ws []Run, reason, worker string) (ReplaySkipResult, error) {
	var out ReplaySkipResult
	if !strings.HasPrefix(reason, ReplaySkipPrefix) {
		reason = ReplaySkipReason(reason)
	}
	for from := 0; from < len(ws); from += statesChunk {
		part := ws[from:min(len(ws), from+statesChunk)]
		ss := make([]Settlement, len(part))
		for i, w := range part {
			ss[i] = Settlement{ID: w.WindowID, Op: OpSkip, Reason: reason}
		}
		res, err := settle(ctx, ss)
		if err != nil {
			return out, fmt.Errorf("skip for replay: %w", err)
		}
		now := time.Now()
		var runs []Run
		for i, r := range res {
			id := part[i].WindowID
			switch {
			case r.Err == nil:
				out.Skipped = append(out.Skipped, id)
				run := part[i]
				run.Outcome, run.Started, run.Finished, run.Attempt, run.Token, run.Worker, run.Error = RunSkippedReplay, now, now, 0, 0, worker, reason
				runs = append(runs, run)
			case errors.Is(r.Err, ErrAlreadyDone):
				out.Settled = append(out.Settled, id)
			case errors.Is(r.Err, ErrBusy), errors.Is(r.Err, ErrFenced):
				out.Busy = append(out.Busy, id)
			default:
				return out, fmt.Errorf("skip for replay: %s: %w", id, r.Err)
			}
		}
		if len(runs) > 0 {
			// Best effort, as the worker's history: a history lost to an
			// outage is not a settlement lost.
			_, _ = settle(ctx, nil, runs...)
		}
	}
	return out, nil
}
