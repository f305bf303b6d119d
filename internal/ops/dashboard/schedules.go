package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// Schedules reads the schedules topic and the change log, and submits
// changes to the producer leader under an actor. NewSchedules builds one
// on specs.Client; tests pass their own.
type Schedules interface {
	Snapshot(ctx context.Context) (*specs.Snapshot, error)
	History(ctx context.Context, job string) ([]*specs.Change, error)
	// Submit asks the leader for edits on behalf of actor (the
	// dashboard's authenticated user), with Source kind "dashboard".
	Submit(ctx context.Context, actor string, edits []specs.Edit, note string) (*specs.Result, error)
}

// NewSchedules returns Schedules over specs.Client with cfg (Opts,
// Deployment, Wait); each Submit uses a client whose Actor is the
// dashboard's user and whose Source is {Kind: "dashboard"}.
func NewSchedules(cfg specs.ClientConfig) (Schedules, error) {
	return NewSchedulesFrom(cfg, nil)
}

// SnapshotReader reads the schedules topic up to the changes committed
// before the call; *jobsource.Follower implements it.
type SnapshotReader interface {
	Snapshot(ctx context.Context) (*specs.Snapshot, error)
}

// NewSchedulesFrom is NewSchedules whose schedules page reads the topic
// through snaps (nil: its own client): kjobctl dashboard passes the
// *jobsource.Follower its job list comes from, so one consumer follows the
// topic for both and a page waits only for the changes it does not have.
func NewSchedulesFrom(cfg specs.ClientConfig, snaps SnapshotReader) (Schedules, error) {
	cfg.Source = specs.Source{Kind: specs.SourceDashboard}
	cfg.Actor = "dashboard"
	c, err := specs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if snaps == nil {
		snaps = c
	}
	return &specsSchedules{cfg: cfg, read: c, snaps: snaps}, nil
}

type specsSchedules struct {
	cfg   specs.ClientConfig
	read  *specs.Client
	snaps SnapshotReader
}

func (s *specsSchedules) Snapshot(ctx context.Context) (*specs.Snapshot, error) {
	return s.snaps.Snapshot(ctx)
}

func (s *specsSchedules) History(ctx context.Context, job string) ([]*specs.Change, error) {
	return s.read.History(ctx, job)
}

func (s *specsSchedules) Submit(ctx context.Context, actor string, edits []specs.Edit, note string) (*specs.Result, error) {
	cfg := s.cfg
	cfg.Actor = actor
	c, err := specs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return c.Submit(ctx, edits, note)
}

// ScheduleRow is one job of the schedules list (/api/schedules).
type ScheduleRow struct {
	Job      string       `json:"job"`
	Schedule string       `json:"schedule,omitempty"`
	At       string       `json:"at,omitempty"`
	Handler  string       `json:"handler"`
	Version  int64        `json:"version"`
	Paused   *specs.Pause `json:"paused,omitempty"`
	Enabled  bool         `json:"enabled"`
	SetBy    string       `json:"set_by"`
	Source   string       `json:"source"`
	SetAt    time.Time    `json:"set_at"`
	Note     string       `json:"note,omitempty"`
}

// SchedulesPage is /api/schedules.
type SchedulesPage struct {
	Jobs []ScheduleRow `json:"jobs"`
	// Deleted maps a deleted job to its tombstone's version.
	Deleted map[string]int64 `json:"deleted,omitempty"`
	// Malformed lists the records skipped (the job keeps its last good
	// version).
	Malformed []string `json:"malformed,omitempty"`
	Actions   bool     `json:"actions"`
}

// ScheduleView is /api/schedule?name=JOB: the job's current record and
// every change of it, oldest first.
type ScheduleView struct {
	Job    string            `json:"job"`
	Record *specs.Record     `json:"record,omitempty"`
	Fields map[string]string `json:"fields"`
	// FieldOrder lists the field names in the file's order (specs.Fields).
	FieldOrder []string `json:"field_order"`
	// Source describes Record.Source ("the dashboard", "file jobs.yaml
	// (sha256 1a2b3c4d)").
	Source string `json:"source,omitempty"`
	// Deleted is the tombstone's version when the job was deleted.
	Deleted      int64           `json:"deleted,omitempty"`
	History      []ScheduleEntry `json:"history"`
	HistoryError string          `json:"history_error,omitempty"`
	Actions      bool            `json:"actions"`
}

// ScheduleEntry is one change with its source described.
type ScheduleEntry struct {
	*specs.Change
	SourceText string `json:"source_text"`
}

func (d *Dashboard) serveSchedules(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	snap, err := d.cfg.Schedules.Snapshot(ctx)
	if err != nil {
		writeJSONStatus(w, http.StatusBadGateway, map[string]string{"error": "reading the schedules topic: " + err.Error()})
		return
	}
	page := SchedulesPage{Jobs: []ScheduleRow{}, Deleted: snap.Deleted, Actions: d.actions != nil}
	for _, m := range snap.Malformed {
		page.Malformed = append(page.Malformed, m.Error())
	}
	for _, rec := range snap.Jobs {
		page.Jobs = append(page.Jobs, ScheduleRow{Job: rec.Job, Schedule: rec.Spec.Schedule, At: rec.Spec.At, Handler: rec.Spec.Handler,
			Version: rec.Version, Paused: rec.Paused, Enabled: rec.Spec.Enabled == nil || *rec.Spec.Enabled, SetBy: rec.SetBy,
			Source: specs.DescribeSource(rec.Source), SetAt: rec.SetAt, Note: rec.Note})
	}
	sort.Slice(page.Jobs, func(i, k int) bool { return page.Jobs[i].Job < page.Jobs[k].Job })
	writeJSONStatus(w, http.StatusOK, page)
}

func (d *Dashboard) serveSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "name: want a job's name, as in /api/schedule?name=report"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	snap, err := d.cfg.Schedules.Snapshot(ctx)
	if err != nil {
		writeJSONStatus(w, http.StatusBadGateway, map[string]string{"error": "reading the schedules topic: " + err.Error()})
		return
	}
	v := ScheduleView{Job: name, Fields: map[string]string{}, FieldOrder: specs.Fields, History: []ScheduleEntry{}, Actions: d.actions != nil}
	if rec, ok := snap.Jobs[name]; ok {
		v.Record, v.Fields, v.Source = rec, specs.Flatten(&rec.Spec, rec.Paused), specs.DescribeSource(rec.Source)
	}
	v.Deleted = snap.Deleted[name]
	hist, err := d.cfg.Schedules.History(ctx, name)
	if err != nil {
		v.HistoryError = "reading the change log: " + err.Error()
	}
	for _, c := range hist {
		v.History = append(v.History, ScheduleEntry{Change: c, SourceText: specs.DescribeSource(c.Source)})
	}
	if v.Record == nil && v.Deleted == 0 && len(v.History) == 0 && err == nil {
		writeJSONStatus(w, http.StatusNotFound, map[string]string{"error": "no schedule " + strconv.Quote(name) + " in the schedules topic or its change log"})
		return
	}
	writeJSONStatus(w, http.StatusOK, v)
}

// Schedule actions: the edit they submit, built from the request.
var scheduleOps = map[string]specs.Op{
	"schedule-create": specs.OpCreate,
	"schedule-update": specs.OpUpdate,
	"schedule-pause":  specs.OpPause,
	"schedule-resume": specs.OpResume,
	"schedule-delete": specs.OpDelete,
	"schedule-revert": specs.OpRevert,
}

func init() {
	for name, op := range scheduleOps {
		actionsByName[name] = action{check: checkScheduleEdit(op), run: runScheduleEdit(op)}
	}
}

// checkScheduleEdit validates a schedule action's request: a job, a spec
// for create and update (its name, if set, is the job), a note for pause,
// and for every op but create the version the page showed.
func checkScheduleEdit(op specs.Op) func(*actionRequest) (string, map[string]string, error) {
	return func(req *actionRequest) (string, map[string]string, error) {
		if req.Job == "" {
			return "", nil, errors.New(`job: empty; name the schedule, e.g. {"job": "report"}`)
		}
		params := map[string]string{"op": string(op)}
		if req.Note != "" {
			params["note"] = req.Note
		}
		switch op {
		case specs.OpCreate, specs.OpUpdate:
			if len(bytes.TrimSpace(req.Spec)) == 0 {
				return "", nil, fmt.Errorf(`spec: empty; send the job's spec as JSON with the file's keys, e.g. {"name": %q, "schedule": "*/5 * * * *", "handler": "http"}`, req.Job)
			}
			var s schedule.Spec
			dec := json.NewDecoder(bytes.NewReader(req.Spec))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&s); err != nil {
				return "", nil, fmt.Errorf("spec: not a schedule spec: %v; use the file's keys (name, schedule, at, handler, payload, timeout, retries, ...)", err)
			}
			if s.Name != "" && s.Name != req.Job {
				return "", nil, fmt.Errorf("spec.name %q differs from job %q: rename by creating the new job and deleting the old one", s.Name, req.Job)
			}
			var b bytes.Buffer
			_ = json.Compact(&b, req.Spec)
			params["spec"] = b.String()
		case specs.OpPause:
			if strings.TrimSpace(req.Note) == "" {
				return "", nil, errors.New("note: empty; a pause needs a note saying why, e.g. \"upstream down, INC-123\"")
			}
		case specs.OpRevert:
			if req.ToVersion < 1 {
				return "", nil, fmt.Errorf("to_version: %d; name the version to go back to (1 or more), as the history shows it", req.ToVersion)
			}
			params["to_version"] = strconv.FormatInt(req.ToVersion, 10)
		}
		if op != specs.OpCreate {
			if req.ExpectVersion == nil {
				return "", nil, fmt.Errorf("expect_version: missing; send the version the page showed, so a change made meanwhile is not overwritten")
			}
		}
		if req.ExpectVersion != nil {
			params["expect_version"] = strconv.FormatInt(*req.ExpectVersion, 10)
		}
		return "schedule " + req.Job, params, nil
	}
}

func runScheduleEdit(op specs.Op) func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
	return func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
		if d.cfg.Schedules == nil {
			return nil, http.StatusNotFound, errors.New("this dashboard has no schedules client (Config.Schedules): schedule actions are off")
		}
		e := specs.Edit{Op: op, Job: req.Job, ExpectVersion: req.ExpectVersion}
		if op == specs.OpCreate && e.ExpectVersion == nil {
			zero := int64(0)
			e.ExpectVersion = &zero
		}
		switch op {
		case specs.OpCreate, specs.OpUpdate:
			var sp schedule.Spec
			if err := json.Unmarshal(req.Spec, &sp); err != nil {
				return nil, http.StatusBadRequest, fmt.Errorf("spec: %w", err)
			}
			sp.Name = req.Job
			e.Spec = &sp
		case specs.OpPause:
			e.Note = req.Note
		case specs.OpRevert:
			e.ToVersion = req.ToVersion
		}
		res, err := d.cfg.Schedules.Submit(ctx, s.user, []specs.Edit{e}, req.Note)
		if err != nil {
			return scheduleRefusal(err), scheduleStatus(err), err
		}
		out := map[string]any{"result": res}
		detail := string(op) + " " + req.Job
		if len(res.Applied) > 0 {
			a := res.Applied[0]
			detail = fmt.Sprintf("%s %s: version %d -> %d", a.Op, a.Job, a.VersionBefore, a.VersionAfter)
			if op == specs.OpRevert {
				// A revert writes a new version; say which one it restored.
				detail = fmt.Sprintf("%s %s to version %d: version %d -> %d, with version %d's spec", a.Op, a.Job, req.ToVersion, a.VersionBefore, a.VersionAfter, req.ToVersion)
			}
			if a.Unchanged {
				detail += " (unchanged)"
			}
		}
		out["detail"] = detail
		return out, 0, nil
	}
}

// scheduleRefusal returns the leader's refusal for the page, which shows
// its field, value, reason and, for a conflict, who changed the job.
func scheduleRefusal(err error) map[string]any {
	var r *specs.RefusedError
	if !errors.As(err, &r) {
		return nil
	}
	m := map[string]any{"refusal": r.Refusal}
	if r.Source.Kind != "" {
		m["refusal_source"] = specs.DescribeSource(r.Source)
	}
	return m
}

func scheduleStatus(err error) int {
	switch {
	case errors.Is(err, specs.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, specs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, specs.ErrInvalid):
		return http.StatusUnprocessableEntity
	case errors.Is(err, specs.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, specs.ErrNoLeader):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}
