package schedule

import "github.com/kjob/kjob/internal/store/jobmsg"

// Overlap is a job's overlap policy: what the workers do with a window of
// the job while an earlier window of the same job still runs or waits. Its
// values are the words of the schedules file's overlap key, and the same
// strings are written in every window record. The values follow Temporal's
// schedule overlap policies and Kubernetes' CronJob concurrencyPolicy.
type Overlap string

// The overlap policies.
const (
	// OverlapQueue runs the job's windows one at a time, in window order:
	// a window starts only after the previous one is settled (done or
	// dead-lettered). Temporal BUFFER_ALL. The default.
	OverlapQueue Overlap = "queue"
	// OverlapSkip does not run a window that comes up while the job's
	// previous window still runs: it is settled as skipped, with its
	// reason. Temporal SKIP, Kubernetes Forbid.
	OverlapSkip Overlap = "skip"
	// OverlapLatest keeps, while one window runs, only the newest waiting
	// window; older waiting windows are settled as skipped, with their
	// reason. Temporal BUFFER_ONE.
	OverlapLatest Overlap = "latest"
	// OverlapReplace cancels the running window when a newer one comes up
	// (its context is cancelled with a cause saying it was superseded);
	// the cancelled window is settled as superseded and not retried, and
	// the newer one runs once the cancelled one has returned. Temporal
	// CANCEL_OTHER, Kubernetes Replace.
	OverlapReplace Overlap = "replace"
	// OverlapAllow runs the job's windows concurrently, each exactly once.
	// Temporal ALLOW_ALL, Kubernetes Allow.
	OverlapAllow Overlap = "allow"
)

// Valid reports whether o is one of the five overlap policies. The empty
// value is not valid.
func (o Overlap) Valid() bool {
	// The workers decide what a policy means, so the record format's list
	// is the one list; TestOverlapsMatchRecords pins the two together.
	return jobmsg.Overlap(o).Valid()
}
