package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/specs"
)

// Operator performs the dashboard's actions; *operator.Operator implements
// it with the functions kjobctl uses, so an action does exactly what the
// kjobctl command does.
type Operator interface {
	Trigger(ctx context.Context, job string, payload json.RawMessage) (*jobmsg.Message, *kgo.Record, error)
	DeadLetters(ctx context.Context) ([]operator.DeadLetter, error)
	Redrive(ctx context.Context, id, by string) (operator.RedriveItem, []operator.Redriven, error)
	PlanBackfill(ctx context.Context, spec operator.BackfillSpec) (*operator.BackfillResult, error)
	Backfill(ctx context.Context, spec operator.BackfillSpec) (*operator.BackfillResult, error)
	PlanReplay(ctx context.Context, spec operator.ReplaySpec) (*operator.ReplayPlan, error)
	ExecuteReplay(ctx context.Context, plan *operator.ReplayPlan) error
}

// AuditLog keeps the audit records of the actions; *operator.AuditLog
// implements it.
type AuditLog interface {
	Append(ctx context.Context, rec operator.AuditRecord) error
	Recent(ctx context.Context, n int64) ([]operator.AuditRecord, error)
}

// Actions turns on the dashboard's actions: trigger a job now, pause and
// resume it, redrive a dead letter, and replay (a plan first, executed on
// a second confirmation). With Actions set, every request to the
// dashboard, its pages too, needs authentication.
//
// Each action request must be a POST from the dashboard's own page: its
// Origin (or, without one, its Referer) must be the dashboard's origin or
// one of AllowedOrigins, and it must carry the session's CSRF token (a
// header X-CSRF-Token whose value /api/session gives the page; the session
// is a cookie the dashboard sets). Every action is written to the audit
// log before it runs ("started"; if that fails, the action does not run)
// and after ("ok", "refused" or "failed"), and logged.
type Actions struct {
	// Operator performs the actions. Required.
	Operator Operator
	// Auth authenticates requests: Tokens (bearer), Users (basic auth with
	// bcrypt-hashed passwords), or both. At least one is required.
	Auth []Authenticator
	// Audit keeps the audit records. Required.
	Audit AuditLog
	// AllowedOrigins are origins ("https://kjob.example.com") that may
	// send actions besides the dashboard's own, e.g. the public origin of
	// a TLS proxy in front of it.
	AllowedOrigins []string
	// Secret keys the CSRF tokens. Default: random per process (sessions
	// then end when the process restarts).
	Secret []byte
	// ActionTimeout bounds one action. Default 90s (a replay waits up to
	// a minute for the workers' acknowledgements).
	ActionTimeout time.Duration
}

// validate checks a and applies its defaults.
func (a *Actions) validate() error {
	switch {
	case a.Operator == nil:
		return configError("Actions.Operator", nil, "is nil; pass a *operator.Operator (operator.New)")
	case len(a.Auth) == 0:
		return configError("Actions.Auth", nil, "is empty; actions need authentication: pass dashboard.LoadTokens and/or dashboard.LoadUsers")
	case a.Audit == nil:
		return configError("Actions.Audit", nil, "is nil; pass a *operator.AuditLog (operator.NewAuditLog)")
	}
	for _, o := range a.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			return configError("Actions.AllowedOrigins", nil, fmt.Sprintf(`has %q; want an origin such as "https://kjob.example.com" (scheme and host, no path)`, o))
		}
	}
	if len(a.Secret) == 0 {
		a.Secret = make([]byte, 32)
		if _, err := rand.Read(a.Secret); err != nil {
			return err
		}
	}
	if a.ActionTimeout == 0 {
		a.ActionTimeout = 90 * time.Second
	}
	return nil
}

// sessionCookie names the session cookie; csrfHeader the header that
// carries the CSRF token.
const (
	sessionCookie = "kjob_session"
	csrfHeader    = "X-CSRF-Token"
	maxBody       = 64 << 10
	planTTL       = 10 * time.Minute
)

// actionState is the dashboard's state for its actions.
type actionState struct {
	a *Actions

	mu    sync.Mutex
	plans map[string]storedPlan // replay plans waiting for their confirmation
}

type storedPlan struct {
	plan    *operator.ReplayPlan
	user    string
	session string
	expires time.Time
}

// session is an authenticated request's identity.
type session struct {
	user, id string
}

// authenticate checks the request's credentials and returns its user, or
// answers 401 and returns false.
func (d *Dashboard) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	var retry time.Duration
	for _, a := range d.actions.a.Auth {
		if users, ok := a.(*Users); ok {
			u, ok, wait := users.authenticate(r)
			if ok {
				return u, true
			}
			retry = max(retry, wait)
			continue
		}
		if u, ok := a.Authenticate(r); ok {
			return u, true
		}
	}
	if retry > 0 {
		secs := int((retry + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		d.refuse(w, r, "", http.StatusTooManyRequests, fmt.Sprintf("too many failed logins from this address: retry in %ds", secs))
		return "", false
	}
	for _, a := range d.actions.a.Auth {
		w.Header().Add("WWW-Authenticate", a.Challenge())
	}
	d.refuse(w, r, "", http.StatusUnauthorized, "authentication required: the dashboard's actions are on, so every request needs a bearer token or a user and password")
	return "", false
}

// session returns the request's session id, setting a new session cookie
// if it has none.
func (d *Dashboard) session(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(sessionCookie); err == nil && len(c.Value) == 64 {
		if _, err := hex.DecodeString(c.Value); err == nil {
			return c.Value
		}
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return id
}

// csrfToken is the session's CSRF token: an HMAC of the session id and the
// user under the dashboard's secret.
func (d *Dashboard) csrfToken(s session) string {
	m := hmac.New(sha256.New, d.actions.a.Secret)
	m.Write([]byte(s.id))
	m.Write([]byte{0})
	m.Write([]byte(s.user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// origin returns the request's origin: its Origin header, or the origin of
// its Referer, or "".
func origin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		return o
	}
	if u, err := url.Parse(r.Header.Get("Referer")); err == nil && u.Scheme != "" && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return ""
}

// sameOrigin reports whether o is the dashboard's own origin as this
// request reached it, or an allowed one.
func (d *Dashboard) sameOrigin(r *http.Request, o string) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if o == scheme+"://"+r.Host {
		return true
	}
	for _, a := range d.actions.a.AllowedOrigins {
		if strings.EqualFold(o, a) {
			return true
		}
	}
	return false
}

// refuse answers a refused request with status and why, as JSON, and logs
// it (refusals are logged, not audited: no action was attempted).
func (d *Dashboard) refuse(w http.ResponseWriter, r *http.Request, user string, status int, why string) {
	d.cfg.Logger.Warn("dashboard request refused", "status", status, "method", r.Method, "path", r.URL.Path, "user", user,
		"remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "reason", why)
	writeJSONStatus(w, status, map[string]string{"error": why})
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serveSession answers GET /api/session: who is signed in, and the CSRF
// token the page sends with each action.
func (d *Dashboard) serveSession(w http.ResponseWriter, s session) {
	writeJSONStatus(w, http.StatusOK, map[string]any{"user": s.user, "csrf_token": d.csrfToken(s), "actions": true})
}

// actionRequest is the body of an action.
type actionRequest struct {
	Job    string `json:"job,omitempty"`
	Letter string `json:"letter,omitempty"`
	// Replay plan.
	Mode       string  `json:"mode,omitempty"`
	Value      string  `json:"value,omitempty"`
	Partitions []int32 `json:"partitions,omitempty"`
	Rerun      bool    `json:"rerun,omitempty"`
	Group      string  `json:"group,omitempty"`
	// Replay execute.
	Plan string `json:"plan,omitempty"`
	// Backfill: window starts in [From, To), RFC 3339 (Rerun above).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Schedule actions (schedules.go): the spec as JSON with the file's
	// keys, the version the page showed, the note, and for a revert the
	// version to go back to.
	Spec          json.RawMessage `json:"spec,omitempty"`
	ExpectVersion *int64          `json:"expect_version,omitempty"`
	Note          string          `json:"note,omitempty"`
	ToVersion     int64           `json:"to_version,omitempty"`
}

// serveAction handles POST /api/actions/<name>: checks origin, CSRF token
// and body, audits, acts.
func (d *Dashboard) serveAction(w http.ResponseWriter, r *http.Request, s session, name string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		d.refuse(w, r, s.user, http.StatusMethodNotAllowed, "actions are POST requests")
		return
	}
	if o := origin(r); o == "" || !d.sameOrigin(r, o) {
		d.refuse(w, r, s.user, http.StatusForbidden, fmt.Sprintf("cross-origin request refused: origin %q is not the dashboard's (add it to the dashboard's allowed origins, Actions.AllowedOrigins, if a proxy serves the dashboard there)", o))
		return
	}
	if got := r.Header.Get(csrfHeader); got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(d.csrfToken(s))) != 1 {
		d.refuse(w, r, s.user, http.StatusForbidden, "missing or wrong CSRF token: reload the page")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		d.refuse(w, r, s.user, http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
		return
	}
	var req actionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		d.refuse(w, r, s.user, http.StatusBadRequest, "the body is not a valid action: "+err.Error())
		return
	}
	act, ok := actionsByName[name]
	if !ok {
		d.refuse(w, r, s.user, http.StatusNotFound, fmt.Sprintf("no action %q; the actions are trigger, pause, resume, redrive, backfill-plan, backfill, replay-plan, replay-execute, schedule-create, schedule-update, schedule-pause, schedule-resume, schedule-delete, schedule-revert", name))
		return
	}
	target, params, err := act.check(&req)
	if err != nil {
		d.refuse(w, r, s.user, http.StatusBadRequest, err.Error())
		return
	}
	reqID := make([]byte, 8)
	_, _ = rand.Read(reqID)
	rec := operator.AuditRecord{Who: s.user, Remote: r.RemoteAddr, Tool: "dashboard", Action: name, Target: target, Params: params,
		Request: hex.EncodeToString(reqID)}
	ctx, cancel := context.WithTimeout(r.Context(), d.actions.a.ActionTimeout)
	defer cancel()
	// Nothing runs unaudited: the intent is written first.
	rec.At, rec.Outcome = d.cfg.Now().UTC(), "started"
	if err := d.actions.a.Audit.Append(ctx, rec); err != nil {
		d.refuse(w, r, s.user, http.StatusServiceUnavailable, "the audit log cannot be written, so the action was not performed: "+err.Error())
		return
	}
	res, status, err := act.run(ctx, d, s, &req)
	rec.At, rec.Outcome, rec.Detail = d.cfg.Now().UTC(), "ok", ""
	switch {
	case err != nil && status < 500:
		rec.Outcome, rec.Detail = "refused", err.Error()
	case err != nil:
		rec.Outcome, rec.Detail = "failed", err.Error()
	default:
		if s, ok := res["detail"].(string); ok {
			rec.Detail = s
		}
	}
	// The outcome is written even when the request was cancelled.
	actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer acancel()
	if aerr := d.actions.a.Audit.Append(actx, rec); aerr != nil {
		d.cfg.Logger.Error("dashboard: the outcome of an action could not be written to the audit log", "request", rec.Request, "action", name, "err", aerr)
	}
	d.cfg.Logger.Info("dashboard action", "request", rec.Request, "user", s.user, "action", name, "target", target, "outcome", rec.Outcome, "detail", rec.Detail)
	if err != nil {
		out := map[string]any{}
		for k, v := range res { // details of a refusal, e.g. a schedule conflict's
			out[k] = v
		}
		out["error"], out["outcome"], out["request"] = err.Error(), rec.Outcome, rec.Request
		writeJSONStatus(w, status, out)
		return
	}
	res["outcome"], res["request"] = "ok", rec.Request
	writeJSONStatus(w, http.StatusOK, res)
}

// action is one kind of action: check validates the request and names its
// target; run performs it and returns the response, or an error with the
// HTTP status that fits it.
type action struct {
	check func(*actionRequest) (target string, params map[string]string, err error)
	run   func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error)
}

var actionsByName = map[string]action{
	"trigger": {check: needJob, run: func(ctx context.Context, d *Dashboard, _ session, req *actionRequest) (map[string]any, int, error) {
		m, rec, err := d.actions.a.Operator.Trigger(ctx, req.Job, nil)
		if err != nil {
			return nil, statusOf(err), err
		}
		return map[string]any{"detail": "published " + m.ID, "window": m.ID, "partition": rec.Partition, "offset": rec.Offset}, 0, nil
	}},
	"pause": {check: checkPause, run: func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
		return pauseResume(ctx, d, s, req, specs.OpPause)
	}},
	"resume": {check: needJob, run: func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
		return pauseResume(ctx, d, s, req, specs.OpResume)
	}},
	"redrive": {check: func(req *actionRequest) (string, map[string]string, error) {
		if _, _, err := operator.ParseDeadLetterID(req.Letter); err != nil {
			return "", nil, fmt.Errorf(`letter %q: want a dead letter's id as the list shows it, e.g. "12"`, req.Letter)
		}
		return "dead letter " + req.Letter, nil, nil
	}, run: func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
		it, out, err := d.actions.a.Operator.Redrive(ctx, req.Letter, "dashboard:"+s.user)
		if err != nil {
			return nil, statusOf(err), err
		}
		detail := "redrove letter " + req.Letter
		if len(out) > 0 {
			detail += fmt.Sprintf(": window %s republished at partition %d offset %d", out[0].WindowID, out[0].Partition, out[0].Offset)
		}
		return map[string]any{"detail": detail, "letter": it, "redriven": out}, 0, nil
	}},
	"backfill-plan": {check: checkBackfill, run: func(ctx context.Context, d *Dashboard, _ session, req *actionRequest) (map[string]any, int, error) {
		return backfill(ctx, req, d.actions.a.Operator.PlanBackfill)
	}},
	"backfill": {check: checkBackfill, run: func(ctx context.Context, d *Dashboard, _ session, req *actionRequest) (map[string]any, int, error) {
		return backfill(ctx, req, d.actions.a.Operator.Backfill)
	}},
	"replay-plan": {check: checkReplay, run: func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
		spec, err := replaySpec(req, d.cfg.Now())
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		plan, err := d.actions.a.Operator.PlanReplay(ctx, spec)
		if err != nil {
			return nil, statusOf(err), err
		}
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		pid := hex.EncodeToString(id)
		d.actions.mu.Lock()
		now := time.Now()
		for k, p := range d.actions.plans {
			if now.After(p.expires) {
				delete(d.actions.plans, k)
			}
		}
		d.actions.plans[pid] = storedPlan{plan: plan, user: s.user, session: s.id, expires: now.Add(planTTL)}
		d.actions.mu.Unlock()
		return map[string]any{"detail": fmt.Sprintf("planned a replay of %d partition(s) of %s (nothing changed)", len(plan.Partitions), plan.Group),
			"plan_id": pid, "plan": plan, "expires_in_seconds": int(planTTL.Seconds())}, 0, nil
	}},
	"replay-execute": {check: func(req *actionRequest) (string, map[string]string, error) {
		if req.Plan == "" {
			return "", nil, errors.New("plan: want the plan_id of a replay-plan answer")
		}
		return "replay plan " + req.Plan, nil, nil
	}, run: func(ctx context.Context, d *Dashboard, s session, req *actionRequest) (map[string]any, int, error) {
		d.actions.mu.Lock()
		p, ok := d.actions.plans[req.Plan]
		if ok && p.user == s.user && p.session == s.id && time.Now().Before(p.expires) {
			delete(d.actions.plans, req.Plan) // a plan runs once
		} else {
			ok = false
		}
		d.actions.mu.Unlock()
		if !ok {
			return nil, http.StatusConflict, errors.New("no such replay plan for this session (it ran already, expired after 10 minutes, or was made by someone else): plan it again")
		}
		if err := d.actions.a.Operator.ExecuteReplay(ctx, p.plan); err != nil {
			return map[string]any{"plan": p.plan}, statusOf(err), err
		}
		return map[string]any{"detail": fmt.Sprintf("replayed %d partition(s) of %s", len(p.plan.Partitions), p.plan.Group), "plan": p.plan}, 0, nil
	}},
}

// checkPause validates a job page's pause: a job and a note saying why.
func checkPause(req *actionRequest) (string, map[string]string, error) {
	target, _, err := needJob(req)
	if err != nil {
		return "", nil, err
	}
	if strings.TrimSpace(req.Note) == "" {
		return "", nil, errors.New(`note: empty; a pause needs a note saying why, e.g. "upstream down, INC-123"`)
	}
	return target, map[string]string{"note": req.Note}, nil
}

// pauseResume pauses or resumes req.Job from its page, as kjobctl pause
// and resume do: a spec change through the producer leader under the
// signed-in user, expecting the version it read, so it is versioned and in
// the change log. Pausing a paused job, or resuming one that is not, is a
// conflict that says since when and by whom.
func pauseResume(ctx context.Context, d *Dashboard, s session, req *actionRequest, op specs.Op) (map[string]any, int, error) {
	if d.cfg.Schedules == nil {
		return nil, http.StatusNotFound, errors.New("this dashboard has no schedules client (Config.Schedules): pause and resume are spec changes, so they are off")
	}
	snap, err := d.cfg.Schedules.Snapshot(ctx)
	if err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("reading the schedules topic: %w", err)
	}
	rec, ok := snap.Jobs[req.Job]
	if !ok {
		return nil, http.StatusNotFound, fmt.Errorf("%w: %q is not in the schedules topic", specs.ErrNotFound, req.Job)
	}
	switch {
	case op == specs.OpPause && rec.Paused != nil:
		return map[string]any{"paused": rec.Paused}, http.StatusConflict, fmt.Errorf("%s is already paused (since %s by %s: %s)",
			req.Job, rec.Paused.At.UTC().Format(time.RFC3339), rec.Paused.By, rec.Paused.Note)
	case op == specs.OpResume && rec.Paused == nil:
		return nil, http.StatusConflict, fmt.Errorf("%s is not paused (version %d)", req.Job, rec.Version)
	}
	v := rec.Version
	res, err := d.cfg.Schedules.Submit(ctx, s.user, []specs.Edit{{Op: op, Job: req.Job, Note: req.Note, ExpectVersion: &v}}, req.Note)
	if err != nil {
		return scheduleRefusal(err), scheduleStatus(err), err
	}
	after := v
	if len(res.Applied) > 0 {
		after = res.Applied[0].VersionAfter
	}
	out := map[string]any{"result": res, "version": after}
	if op == specs.OpPause {
		out["detail"] = fmt.Sprintf("paused %s: version %d -> %d", req.Job, v, after)
	} else {
		out["detail"] = fmt.Sprintf("resumed %s (paused since %s by %s): version %d -> %d; windows skipped meanwhile are not caught up (kjobctl resume --catchup does)",
			req.Job, rec.Paused.At.UTC().Format(time.RFC3339), rec.Paused.By, v, after)
	}
	return out, 0, nil
}

func needJob(req *actionRequest) (string, map[string]string, error) {
	if req.Job == "" {
		return "", nil, errors.New("job: want the name of a job of the schedules file")
	}
	return "job " + req.Job, nil, nil
}

// backfillSpec is req's backfill.
func backfillSpec(req *actionRequest) (operator.BackfillSpec, error) {
	from, err := time.Parse(time.RFC3339, req.From)
	if err != nil {
		return operator.BackfillSpec{}, fmt.Errorf("from %q: want an RFC 3339 time such as 2026-01-01T00:00:00Z", req.From)
	}
	to, err := time.Parse(time.RFC3339, req.To)
	if err != nil {
		return operator.BackfillSpec{}, fmt.Errorf("to %q: want an RFC 3339 time such as 2026-01-02T00:00:00Z", req.To)
	}
	return operator.BackfillSpec{Job: req.Job, From: from, To: to, Rerun: req.Rerun}, nil
}

func checkBackfill(req *actionRequest) (string, map[string]string, error) {
	if _, _, err := needJob(req); err != nil {
		return "", nil, err
	}
	if _, err := backfillSpec(req); err != nil {
		return "", nil, err
	}
	return "job " + req.Job, map[string]string{"from": req.From, "to": req.To, "rerun": strconv.FormatBool(req.Rerun)}, nil
}

// backfill plans or executes req's backfill with do.
func backfill(ctx context.Context, req *actionRequest, do func(context.Context, operator.BackfillSpec) (*operator.BackfillResult, error)) (map[string]any, int, error) {
	spec, err := backfillSpec(req)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	res, err := do(ctx, spec)
	if err != nil {
		return nil, statusOf(err), err
	}
	verb := "would publish"
	if res.Executed {
		verb = "published"
	}
	return map[string]any{"detail": fmt.Sprintf("backfill %s [%s, %s): %s %d of %d windows", res.Job, res.From, res.To, verb, len(res.Published), res.Windows),
		"backfill": res}, 0, nil
}

func checkReplay(req *actionRequest) (string, map[string]string, error) {
	params := map[string]string{"mode": req.Mode, "value": req.Value, "rerun": strconv.FormatBool(req.Rerun)}
	if req.Job != "" {
		params["job"] = req.Job
	}
	if len(req.Partitions) > 0 {
		params["partitions"] = fmt.Sprint(req.Partitions)
	}
	if req.Group == "" {
		return "", nil, errors.New("group: want the workers' consumer group")
	}
	return "group " + req.Group, params, nil
}

// replaySpec turns the form of a replay into a ReplaySpec, as kjobctl
// replay turns its flags into one.
func replaySpec(req *actionRequest, now time.Time) (operator.ReplaySpec, error) {
	spec := operator.ReplaySpec{Group: req.Group, Job: req.Job, Rerun: req.Rerun, Partitions: req.Partitions, Mode: operator.Mode(req.Mode)}
	v := strings.TrimSpace(req.Value)
	switch spec.Mode {
	case operator.ToDatetime:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return spec, fmt.Errorf("value %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", v)
		}
		if t.After(now) {
			return spec, fmt.Errorf("value %s is in the future: a replay to it would skip every window not processed yet", v)
		}
		spec.Time = t
	case operator.ByDuration:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return spec, fmt.Errorf("value %q: want a positive duration such as 2h30m", v)
		}
		spec.Duration = d
	case operator.ToOffset, operator.ShiftBy:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || spec.Mode == operator.ToOffset && n < 0 {
			return spec, fmt.Errorf("value %q: want a whole number of offsets", v)
		}
		spec.Offset = n
	case operator.ToEarliest, operator.ToLatest:
	default:
		return spec, fmt.Errorf("mode %q: want to-datetime, by-duration, to-offset, shift-by, to-earliest or to-latest", req.Mode)
	}
	return spec, nil
}

// statusOf maps an action's error to an HTTP status: the caller's mistake
// (400, 404), the state of things (409), or a failure upstream (502).
func statusOf(err error) int {
	switch {
	case errors.Is(err, operator.ErrUnknownJob), errors.Is(err, operator.ErrUnknownLetter),
		errors.Is(err, operator.ErrNoGroup), errors.Is(err, operator.ErrNoPartition):
		return http.StatusNotFound
	case errors.Is(err, operator.ErrLeftOut),
		errors.Is(err, operator.ErrRebalancing), errors.Is(err, operator.ErrUnsettled):
		// ErrUnsettled: a replay forward past unsettled windows; the
		// dashboard offers no skip-unsettled, kjobctl replay does.
		return http.StatusConflict
	case errors.Is(err, operator.ErrInvalidSpec), errors.Is(err, operator.ErrInvalidBackfill), errors.Is(err, operator.ErrTooManyWindows):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// serveDeadLetters answers GET /api/deadletters.
func (d *Dashboard) serveDeadLetters(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ls, err := d.actions.a.Operator.DeadLetters(ctx)
	if err != nil {
		writeJSONStatus(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	items := operator.PlanRedrive(ls, false)
	writeJSONStatus(w, http.StatusOK, map[string]any{"letters": items})
}

// serveAudit answers GET /api/audit: the newest audit records.
func (d *Dashboard) serveAudit(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	recs, err := d.actions.a.Audit.Recent(ctx, 50)
	if err != nil {
		writeJSONStatus(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]any{"records": recs})
}
