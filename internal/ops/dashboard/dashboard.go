// Package dashboard serves kjob's built-in operator page: how late the work
// is (the time lag, as the headline chart over the last minutes), who
// leads, which worker owns which partition, the offset lag, every job with
// its next run and last outcome, the most recent windows and what became
// of them, and the dead-letter count; and per job a page of its past runs
// with their durations, success rate and p50/p95 duration. It is what
// `kjobctl dashboard` runs, and it can be mounted in any other HTTP
// server:
//
//	d, err := dashboard.New(dashboard.Config{Inspector: in, States: store, TimeLag: tl, Runs: store,
//		Brokers: brokers, Topic: "kjob.windows"})
//	go d.Run(ctx)                 // refreshes every Interval until ctx ends
//	http.Handle("/", d)           // the pages, their assets and /api/...
//
// The pages' HTML, script and style are embedded in the binary (no CDN, no
// build step) and update live from a server-sent event stream; a browser
// without EventSource polls /api/state instead. By default the dashboard
// only reads: it lists the windows topic's newest records with a
// read-committed consumer that joins no group and asks Redis for each
// window's state. With Config.Actions it also triggers, pauses, resumes,
// redrives and replays, through the same functions as kjobctl (see
// Actions); every request then needs authentication.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
)

//go:embed assets
var assets embed.FS

// Defaults of Config.
const (
	DefaultInterval = 2 * time.Second
	DefaultHistory  = 10 * time.Minute
	DefaultRecent   = 25
)

// Inspector reads a deployment's state; *inspect.Inspector implements it.
type Inspector interface {
	Snapshot(ctx context.Context) (*inspect.Snapshot, error)
}

// States reads a window's record in the idempotency store; *dedupe.Store
// implements it.
type States interface {
	State(ctx context.Context, id string) (dedupe.State, error)
}

// TimeLagReader reads the time lag; *inspect.TimeLag implements it.
type TimeLagReader interface {
	Read(ctx context.Context) (*inspect.TimeLagReport, error)
}

// RunReader reads a job's past runs; *dedupe.Store implements it.
type RunReader interface {
	Runs(ctx context.Context, job string, q dedupe.RunQuery) ([]dedupe.Run, error)
}

// Config configures a Dashboard. Inspector, Brokers and Topic are
// required.
type Config struct {
	// Inspector supplies the leader, group, lag, jobs and dead letters.
	Inspector Inspector
	// States supplies the outcome of recent windows. Nil: recent windows
	// are listed with outcome "unknown".
	States States
	// TimeLag supplies the time lag, the headline chart. Nil: the page
	// shows the offset lag only.
	TimeLag TimeLagReader
	// Runs supplies the jobs' past runs for the job pages. Nil: the job
	// pages show no runs.
	Runs RunReader
	// Schedules reads the schedules topic and change log for the
	// schedules page (/schedules.html) and, with Actions, submits the
	// schedule actions (create, update, pause, resume, delete) to the
	// producer leader under the authenticated user. Nil: no schedules
	// page. NewSchedules builds one.
	Schedules Schedules
	// Actions turns on the actions (see Actions). Nil: the dashboard is
	// read-only and answers only GET and HEAD.
	Actions *Actions
	// Brokers and ClientOpts (TLS, SASL) reach the Kafka cluster; Topic is
	// the windows topic whose newest records are listed.
	Brokers    []string
	ClientOpts []kgo.Opt
	Topic      string
	// Namespace is shown in the page's title. Optional.
	Namespace string
	// Interval is how often the state is refreshed and pushed to open
	// pages. Default 2s; at least 100ms.
	Interval time.Duration
	// History is how far back the lag chart reaches. Default 10m; at least
	// Interval.
	History time.Duration
	// Recent is how many of the newest windows are listed. Default 25,
	// at most 1000.
	Recent int
	// Logger receives refresh errors (key err). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Dashboard is the page and its data. Create it with New, run Run, serve
// it with ServeHTTP.
type Dashboard struct {
	cfg    Config
	static http.Handler
	tail   *tail

	done     chan struct{} // closed when Run returns: ends the event streams
	doneOnce sync.Once

	actions *actionState // nil: read-only

	mu      sync.Mutex
	state   *State
	history []LagPoint
	subs    map[chan []byte]struct{}
}

// State is what the page shows; /api/state returns it as JSON.
type State struct {
	// At is when it was read.
	At time.Time `json:"at"`
	// Namespace is Config.Namespace.
	Namespace string `json:"namespace,omitempty"`
	// Interval is the refresh interval in milliseconds.
	IntervalMS int64 `json:"interval_ms"`
	// Snapshot is the inspector's view: leader, group with lag and owners,
	// jobs, dead letters, and the parts it could not read (Errors).
	Snapshot *inspect.Snapshot `json:"snapshot"`
	// Lag is the total and per-partition lag and time lag over the last
	// History.
	Lag []LagPoint `json:"lag"`
	// TimeLag is the time lag now (nil without Config.TimeLag or when it
	// could not be read: see TimeLagError).
	TimeLag      *inspect.TimeLagReport `json:"time_lag,omitempty"`
	TimeLagError string                 `json:"time_lag_error,omitempty"`
	// Actions is true when the actions are on.
	Actions bool `json:"actions"`
	// Recent lists the newest windows of the topic, newest first.
	Recent []Execution `json:"recent"`
	// Errors lists what could not be read in this refresh.
	Errors []string `json:"errors,omitempty"`
}

// LagPoint is the group's lag at one refresh.
type LagPoint struct {
	At time.Time `json:"at"`
	// Partitions maps a partition (as a decimal string, for JSON) to its
	// offset lag (transaction markers included).
	Partitions map[string]int64 `json:"partitions"`
	// Total is the sum over the partitions.
	Total int64 `json:"total"`
	// Ages maps a partition to its time lag in seconds (the age of its
	// oldest unsettled due window), Windows to the window records past its
	// committed offset; both absent when the time lag was not read.
	Ages    map[string]float64 `json:"ages,omitempty"`
	Windows map[string]int     `json:"windows,omitempty"`
	// MaxAge is the largest of Ages.
	MaxAge float64 `json:"max_age"`
}

// Execution is one recent window and what became of it.
type Execution struct {
	ID          string    `json:"id"`
	Job         string    `json:"job"`
	Trigger     string    `json:"trigger"`
	Partition   int32     `json:"partition"`
	Offset      int64     `json:"offset"`
	WindowStart time.Time `json:"window_start"`
	PublishedAt time.Time `json:"published_at"`
	// Outcome is done, failed, running, dead (dead-lettered), pending
	// (published, not claimed yet, or its record expired) or unknown (no
	// States, or Redis could not be read).
	Outcome   string    `json:"outcome"`
	Token     int64     `json:"token,omitempty"`
	Attempts  int       `json:"attempts,omitempty"`
	Worker    string    `json:"worker,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	// Invalid is set for a record that is not a valid window (it is
	// dead-lettered by the workers); ID is then empty.
	Invalid string `json:"invalid,omitempty"`
}

// configError is a *configerr.Error about field of Config or Actions.
func configError(field string, value any, reason string, related ...string) error {
	return &configerr.Error{Op: "dashboard", Field: field, Value: value, Reason: reason, Related: related}
}

// New validates cfg and returns a Dashboard; nothing is read until Run. A
// setting it refuses is a *configerr.Error.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Inspector == nil {
		return nil, configError("Config.Inspector", nil, "is nil; pass an *inspect.Inspector (inspect.New)")
	}
	if len(cfg.Brokers) == 0 {
		return nil, configError("Config.Brokers", nil, `is empty; set at least one seed broker, e.g. "127.0.0.1:9092"`)
	}
	if cfg.Topic == "" {
		return nil, configError("Config.Topic", nil, `is empty; set the windows topic, e.g. "kjob.windows"`)
	}
	switch {
	case cfg.Interval == 0:
		cfg.Interval = DefaultInterval
	case cfg.Interval < 100*time.Millisecond:
		return nil, configError("Config.Interval", cfg.Interval, fmt.Sprintf("is below 100ms; set it to at least 100ms, or 0 for %v", DefaultInterval))
	}
	switch {
	case cfg.History == 0:
		cfg.History = DefaultHistory
	case cfg.History < cfg.Interval:
		return nil, configError("Config.History", cfg.History, fmt.Sprintf("is shorter than Config.Interval = %v; set it to at least the interval, or 0 for %v", cfg.Interval, DefaultHistory), "Config.Interval")
	}
	switch {
	case cfg.Recent == 0:
		cfg.Recent = DefaultRecent
	case cfg.Recent < 0 || cfg.Recent > 1000:
		return nil, configError("Config.Recent", cfg.Recent, fmt.Sprintf("is out of range; set it between 1 and 1000, or 0 for %d", DefaultRecent))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	d := &Dashboard{
		cfg:    cfg,
		static: http.FileServerFS(sub),
		tail:   newTail(cfg.Brokers, cfg.ClientOpts, cfg.Topic, cfg.Recent),
		subs:   map[chan []byte]struct{}{},
		done:   make(chan struct{}),
	}
	if cfg.Actions != nil {
		a := *cfg.Actions
		if err := a.validate(); err != nil {
			return nil, err
		}
		d.actions = &actionState{a: &a, plans: map[string]storedPlan{}}
	}
	return d, nil
}

// Run follows the windows topic and refreshes the state every Interval
// until ctx ends. It returns nil once ctx is done and its goroutines have
// stopped, or the error that keeps it from following the topic at all.
func (d *Dashboard) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer d.doneOnce.Do(func() { close(d.done) })
	var wg sync.WaitGroup
	var tailErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.tail.run(ctx); err != nil {
			tailErr = err
			cancel()
		}
	}()
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		d.refresh(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			return tailErr
		case <-t.C:
		}
	}
}

// refresh reads the state once and pushes it to the open event streams.
func (d *Dashboard) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, max(d.cfg.Interval, 5*time.Second))
	defer cancel()
	now := d.cfg.Now().UTC()
	st := &State{At: now, Namespace: d.cfg.Namespace, IntervalMS: d.cfg.Interval.Milliseconds()}
	snap, err := d.cfg.Inspector.Snapshot(rctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		st.Errors = append(st.Errors, "snapshot: "+err.Error())
		snap = &inspect.Snapshot{At: now}
	}
	st.Snapshot = snap
	st.Errors = append(st.Errors, snap.Errors...)
	st.Recent, err = d.recent(rctx)
	if err != nil && ctx.Err() == nil {
		st.Errors = append(st.Errors, "recent windows: "+err.Error())
	}
	st.Actions = d.actions != nil
	if d.cfg.TimeLag != nil {
		st.TimeLag, err = d.cfg.TimeLag.Read(rctx)
		if err != nil && ctx.Err() == nil {
			st.TimeLag, st.TimeLagError = nil, err.Error()
			st.Errors = append(st.Errors, "time lag: "+err.Error())
		}
	}
	if ctx.Err() != nil {
		return
	}
	for _, e := range st.Errors {
		d.cfg.Logger.Debug("dashboard refresh incomplete", "err", e)
	}

	d.mu.Lock()
	if g, tl := snap.Group, st.TimeLag; g != nil || tl != nil {
		p := LagPoint{At: now, Partitions: map[string]int64{}}
		if g != nil {
			for _, pl := range g.Partitions {
				p.Partitions[fmt.Sprint(pl.Partition)] = pl.Lag
				p.Total += pl.Lag
			}
		}
		if tl != nil {
			p.Ages, p.Windows = map[string]float64{}, map[string]int{}
			for _, pt := range tl.Partitions {
				k := fmt.Sprint(pt.Partition)
				p.Ages[k], p.Windows[k] = pt.AgeSeconds, pt.Windows
				p.MaxAge = max(p.MaxAge, pt.AgeSeconds)
			}
		}
		d.history = append(d.history, p)
	}
	cut := 0
	for cut < len(d.history) && now.Sub(d.history[cut].At) > d.cfg.History {
		cut++
	}
	d.history = append([]LagPoint(nil), d.history[cut:]...)
	st.Lag = d.history
	d.state = st
	msg, err := json.Marshal(st)
	if err != nil {
		d.mu.Unlock()
		d.cfg.Logger.Error("dashboard: encoding the state", "err", err)
		return
	}
	for ch := range d.subs {
		select {
		case ch <- msg:
		default: // a slow page skips a frame; the next one carries everything
		}
	}
	d.mu.Unlock()
}

// recent lists the newest windows with their outcomes, newest first.
func (d *Dashboard) recent(ctx context.Context) ([]Execution, error) {
	recs := d.tail.newest()
	out := make([]Execution, 0, len(recs))
	var errs []error
	for _, r := range recs {
		e := r.exec
		if e.ID != "" {
			e.Outcome = "unknown"
			if d.cfg.States != nil {
				s, err := d.cfg.States.State(ctx, e.ID)
				switch {
				case errors.Is(err, dedupe.ErrNotFound):
					e.Outcome = "pending"
				case err != nil:
					if len(errs) == 0 {
						errs = append(errs, err)
					}
				default:
					e.Outcome, e.Token, e.Attempts, e.Worker, e.LastError = s.Status, s.Token, s.Attempts, s.Holder, s.LastError
					if dedupe.SkippedByReplay(s) {
						e.Outcome = dedupe.ReplaySkipLabel
					}
					e.UpdatedAt = s.UpdatedAt.UTC()
				}
			}
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, k int) bool {
		if !out[i].PublishedAt.Equal(out[k].PublishedAt) {
			return out[i].PublishedAt.After(out[k].PublishedAt)
		}
		return out[i].WindowStart.After(out[k].WindowStart)
	})
	return out, errors.Join(errs...)
}

// ServeHTTP serves the page (/), the job page (/job.html?job=NAME), their
// assets, the state as JSON (/api/state), a server-sent event stream of it
// (/api/events) and a job's runs (/api/job?name=NAME). Read-only, it
// answers only GET and HEAD. With Actions, every request needs
// authentication (401 without it), and it also serves /api/session,
// /api/deadletters, /api/audit and the actions (POST /api/actions/NAME).
// Event streams end when Run returns.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	var s session
	if d.actions != nil {
		user, ok := d.authenticate(w, r)
		if !ok {
			return
		}
		s = session{user: user, id: d.session(w, r)}
		if name, ok := strings.CutPrefix(r.URL.Path, "/api/actions/"); ok {
			d.serveAction(w, r, s, name)
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		if d.actions == nil {
			http.Error(w, "the dashboard is read-only: only GET and HEAD", http.StatusMethodNotAllowed)
		} else {
			http.Error(w, "only GET and HEAD here; actions are POST /api/actions/NAME", http.StatusMethodNotAllowed)
		}
		return
	}
	switch r.URL.Path {
	case "/api/state":
		d.serveState(w)
	case "/api/events":
		d.serveEvents(w, r)
	case "/api/job":
		d.serveJob(w, r)
	case "/api/session":
		if d.actions == nil {
			writeJSONStatus(w, http.StatusOK, map[string]any{"actions": false})
			return
		}
		d.serveSession(w, s)
	case "/api/schedules", "/api/schedule":
		if d.cfg.Schedules == nil {
			http.Error(w, "this dashboard reads no schedules (Config.Schedules is nil)", http.StatusNotFound)
			return
		}
		if r.URL.Path == "/api/schedules" {
			d.serveSchedules(w, r)
		} else {
			d.serveSchedule(w, r)
		}
	case "/api/deadletters", "/api/audit":
		if d.actions == nil {
			http.Error(w, "the dashboard's actions are off", http.StatusNotFound)
			return
		}
		if r.URL.Path == "/api/audit" {
			d.serveAudit(w, r)
		} else {
			d.serveDeadLetters(w, r)
		}
	default:
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		d.static.ServeHTTP(w, r)
	}
}

func (d *Dashboard) current() *State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

func (d *Dashboard) serveState(w http.ResponseWriter) {
	st := d.current()
	if st == nil {
		http.Error(w, "no state read yet; retry in a moment", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(st)
}

func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ch := make(chan []byte, 1)
	d.mu.Lock()
	d.subs[ch] = struct{}{}
	var first []byte
	if d.state != nil {
		first, _ = json.Marshal(d.state)
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.subs, ch)
		d.mu.Unlock()
	}()
	send := func(msg []byte) bool {
		if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A comment line first, so the browser sees the stream open at once.
	if _, err := fmt.Fprint(w, ": kjob dashboard\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	if first != nil && !send(first) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-d.done:
			return
		case msg := <-ch:
			if !send(msg) {
				return
			}
		}
	}
}
