package dashboard

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// JobPage is what a job's page shows; /api/job?name=NAME returns it.
type JobPage struct {
	Name string `json:"name"`
	// Job is the job's schedule and last window from the latest refresh;
	// nil if the job is unknown to it.
	Job *inspect.JobStatus `json:"job,omitempty"`
	// TimeLag is the job's time lag from the latest refresh (nil if the
	// job had no window past the committed offset or near it).
	TimeLag *inspect.JobTimeLag `json:"time_lag,omitempty"`
	// Runs are its newest runs, newest first; Stats summarises them.
	Runs  []JobRun        `json:"runs"`
	Stats dedupe.RunStats `json:"stats"`
	// P50Seconds and P95Seconds are Stats' percentiles in seconds.
	P50Seconds float64 `json:"p50_seconds"`
	P95Seconds float64 `json:"p95_seconds"`
	// RunsError says why the runs could not be read.
	RunsError string `json:"runs_error,omitempty"`
	// Actions is true when the actions are on.
	Actions bool `json:"actions"`
}

// JobRun is one run with its duration in seconds.
type JobRun struct {
	dedupe.Run
	DurationSeconds float64 `json:"duration_seconds"`
}

// defaultJobRuns is how many runs a job page shows unless ?limit= says.
const defaultJobRuns = 200

func (d *Dashboard) serveJob(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "name: want a job's name, as in /api/job?name=report"})
		return
	}
	limit := defaultJobRuns
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > dedupe.MaxRunsLimit {
			writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "limit " + strconv.Quote(s) + ": want 1 to " + strconv.Itoa(dedupe.MaxRunsLimit)})
			return
		}
		limit = n
	}
	page := JobPage{Name: name, Runs: []JobRun{}, Actions: d.actions != nil}
	if st := d.current(); st != nil {
		if st.Snapshot != nil {
			for i := range st.Snapshot.Jobs {
				if st.Snapshot.Jobs[i].Name == name {
					j := st.Snapshot.Jobs[i]
					page.Job = &j
				}
			}
		}
		if st.TimeLag != nil {
			for i := range st.TimeLag.Jobs {
				if st.TimeLag.Jobs[i].Job == name {
					j := st.TimeLag.Jobs[i]
					page.TimeLag = &j
				}
			}
		}
	}
	var runs []dedupe.Run
	if d.cfg.Runs != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		var err error
		if runs, err = d.cfg.Runs.Runs(ctx, name, dedupe.RunQuery{Limit: limit}); err != nil {
			page.RunsError = err.Error()
		}
	} else {
		page.RunsError = "no run history configured"
	}
	if page.Job == nil && len(runs) == 0 && page.RunsError == "" {
		writeJSONStatus(w, http.StatusNotFound, map[string]string{"error": "no job " + strconv.Quote(name) + " and no runs of it"})
		return
	}
	for _, run := range runs {
		page.Runs = append(page.Runs, JobRun{Run: run, DurationSeconds: run.Duration().Seconds()})
	}
	page.Stats = dedupe.SummarizeRuns(runs)
	page.P50Seconds, page.P95Seconds = page.Stats.P50.Seconds(), page.Stats.P95.Seconds()
	writeJSONStatus(w, http.StatusOK, page)
}
