package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// actionsEnv is a deployment's topics and Redis, and the dashboard's
// actions on them, built as kjobctl dashboard --actions builds them.
type actionsEnv struct {
	brokers []string
	rdb     *redis.Client
	redis   *testenv.Redis
	adm     *kadm.Client
	audit   *operator.AuditLog
	actions *dashboard.Actions
	users   string // the users file
	token   string
}

const testPassword = "correct horse battery staple"

func newActionsEnv(t *testing.T, ns, topic string, jobsYAML string) *actionsEnv {
	t.Helper()
	e := &actionsEnv{brokers: testenv.Brokers(t), redis: testenv.NewRedis(t)}
	e.rdb = e.redis.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := schedule.Parse("s.yaml", []byte(jobsYAML))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e.adm = kadm.NewClient(cl)
	for _, tp := range []string{topic, topic + ".dlq"} {
		if _, err := e.adm.CreateTopic(ctx, 1, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	store, err := dedupe.New(e.rdb, dedupe.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := operator.NewRedrives(e.rdb, ns)
	e.audit, err = operator.NewAuditLog(e.rdb, ns, 0)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: e.brokers, Topic: topic, Store: store, IssuedBy: "test", AckTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rp.Close)
	published, err := operator.NewPublished(e.rdb, ns, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	op, err := operator.New(operator.Config{Jobs: f.Jobs, Topic: topic, DLQTopic: topic + ".dlq", Publisher: cl, Redriver: cl,
		ReadOpts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, Store: store, Published: published, Redrives: rd, Replayer: rp})
	if err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e.users = filepath.Join(dir, "users")
	if err := os.WriteFile(e.users, []byte("# operators\nalice:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := dashboard.LoadUsers(e.users)
	if err != nil {
		t.Fatal(err)
	}
	e.token = strings.Repeat("t0k3n-", 8)
	tokFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokFile, []byte("ci-bot:"+e.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := dashboard.LoadTokens(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	e.actions = &dashboard.Actions{Operator: op, Auth: []dashboard.Authenticator{tokens, users}, Audit: e.audit}
	return e
}

func (e *actionsEnv) endOffset(t *testing.T, topic string) int64 {
	t.Helper()
	ends, err := e.adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

// committed returns group's committed offset of partition 0 (-1: none).
func (e *actionsEnv) committed(t *testing.T, group string) int64 {
	t.Helper()
	os, err := e.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := os.Lookup("kjob.windows", 0)
	if !ok {
		return -1
	}
	return o.At
}

// TestActionRefusals: with the actions on, every request needs
// credentials (401), an action needs the dashboard's own Origin (403) and
// the session's CSRF token (403), a POST (405) and a JSON body (415, 400);
// none of those refused requests changes anything or is audited. An
// accepted action is audited before and after; a failing audit log stops
// the action (503). The read-only dashboard answers every POST with 405.
func TestActionRefusals(t *testing.T) {
	const topic = "kjob.windows"
	e := newActionsEnv(t, "act", topic, "jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n")
	d, err := dashboard.New(dashboard.Config{Inspector: &fakeInspector{}, Brokers: e.brokers, Topic: topic, Actions: e.actions,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()
	cl := client(t)
	do := func(method, path string, h hdr, body string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// A refusal's reason, unescaped.
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return resp.StatusCode, resp.Header, e.Error
		}
		return resp.StatusCode, resp.Header, string(b)
	}
	basic := func(user, pass string) string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return req.Header.Get("Authorization")
	}
	alice := basic("alice", testPassword)
	before := e.endOffset(t, topic)

	// Authentication: on every path.
	for _, path := range []string{"/", "/job.html", "/api/state", "/api/session", "/api/job?name=report"} {
		code, h, _ := do("GET", path, nil, "")
		if code != http.StatusUnauthorized || !strings.Contains(strings.Join(h.Values("WWW-Authenticate"), "|"), `Basic realm="kjob dashboard"`) {
			t.Fatalf("GET %s without credentials: %d %v, want 401 with a Basic challenge", path, code, h.Values("WWW-Authenticate"))
		}
	}
	for _, auth := range []string{basic("alice", "wrong"), basic("mallory", testPassword), "Bearer " + strings.Repeat("x", 48), "Bearer " + e.token[1:]} {
		if code, _, _ := do("GET", "/api/session", hdr{"Authorization": auth}, ""); code != http.StatusUnauthorized {
			t.Fatalf("GET /api/session with %q: %d, want 401", auth, code)
		}
	}
	code, _, body := do("POST", "/api/actions/trigger", hdr{"Content-Type": "application/json", "Origin": srv.URL}, `{"job":"report"}`)
	if code != http.StatusUnauthorized {
		t.Fatalf("action without credentials: %d %s, want 401", code, body)
	}

	// A session: its CSRF token.
	code, _, body = do("GET", "/api/session", hdr{"Authorization": alice}, "")
	var sess struct {
		User  string `json:"user"`
		Token string `json:"csrf_token"`
	}
	if err := json.Unmarshal([]byte(body), &sess); code != http.StatusOK || err != nil || sess.User != "alice" || sess.Token == "" {
		t.Fatalf("GET /api/session: %d %s", code, body)
	}
	if code, _, body := do("GET", "/api/session", hdr{"Authorization": "Bearer " + e.token}, ""); code != http.StatusOK || !strings.Contains(body, `"user":"ci-bot"`) {
		t.Fatalf("GET /api/session with the bearer token: %d %s", code, body)
	}
	good := hdr{"Authorization": alice, "Content-Type": "application/json", "Origin": srv.URL, "X-CSRF-Token": sess.Token}
	with := func(k, v string) hdr {
		h := hdr{}
		for a, b := range good {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                hdr
		body               string
		want               int
		says               string
	}{
		{"foreign Origin", "POST", "/api/actions/trigger", with("Origin", "http://evil.example"), `{"job":"report"}`, http.StatusForbidden, `origin "http://evil.example" is not the dashboard's`},
		{"no Origin nor Referer", "POST", "/api/actions/trigger", with("Origin", ""), `{"job":"report"}`, http.StatusForbidden, `origin "" is not the dashboard's`},
		{"foreign Referer", "POST", "/api/actions/trigger", with("Origin", "").with2("Referer", "http://evil.example/page"), `{"job":"report"}`, http.StatusForbidden, "cross-origin request refused"},
		{"no CSRF token", "POST", "/api/actions/trigger", with("X-CSRF-Token", ""), `{"job":"report"}`, http.StatusForbidden, "missing or wrong CSRF token"},
		{"another session's CSRF token", "POST", "/api/actions/trigger", with("X-CSRF-Token", otherToken(sess.Token)), `{"job":"report"}`, http.StatusForbidden, "missing or wrong CSRF token"},
		{"GET", "GET", "/api/actions/trigger", good, "", http.StatusMethodNotAllowed, "actions are POST requests"},
		{"form body", "POST", "/api/actions/trigger", with("Content-Type", "application/x-www-form-urlencoded"), `job=report`, http.StatusUnsupportedMediaType, "the body must be JSON"},
		{"unknown field", "POST", "/api/actions/trigger", good, `{"job":"report","force":true}`, http.StatusBadRequest, `unknown field "force"`},
		{"no job", "POST", "/api/actions/pause", good, `{}`, http.StatusBadRequest, "job: want the name of a job"},
		{"unknown action", "POST", "/api/actions/delete-everything", good, `{}`, http.StatusNotFound, `no action "delete-everything"`},
	} {
		code, _, body := do(tc.method, tc.path, tc.hdr, tc.body)
		if code != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, body, tc.want, tc.says)
		}
	}
	// Nothing happened: no window, no audit record.
	if after := e.endOffset(t, topic); after != before {
		t.Fatalf("refused requests published: end offset %d -> %d", before, after)
	}
	if recs, err := e.audit.Recent(context.Background(), 10); err != nil || len(recs) != 0 {
		t.Fatalf("audit records after refused requests only: %+v, %v", recs, err)
	}

	// Accepted actions: audited before and after.
	code, _, body = do("POST", "/api/actions/trigger", good, `{"job":"report"}`)
	if code != http.StatusOK || !strings.Contains(body, `"window":"report@`) {
		t.Fatalf("trigger: %d %s", code, body)
	}
	if after := e.endOffset(t, topic); after <= before {
		t.Fatal("trigger published nothing")
	}
	// Pause and resume are spec changes (TestPauseResumeActions): without
	// a schedules client they are off.
	if code, _, body = do("POST", "/api/actions/pause", good, `{"job":"report","note":"why"}`); code != http.StatusNotFound || !strings.Contains(body, "no schedules client") {
		t.Fatalf("pause without schedules: %d %s", code, body)
	}
	if code, _, body = do("POST", "/api/actions/trigger", good, `{"job":"nope"}`); code != http.StatusNotFound || !strings.Contains(body, `unknown job "nope"`) {
		t.Fatalf("trigger of an unknown job: %d %s, want 404", code, body)
	}
	if code, _, body = do("POST", "/api/actions/redrive", good, `{"letter":"7"}`); code != http.StatusNotFound || !strings.Contains(body, "no such dead letter") {
		t.Fatalf("redrive of a missing letter: %d %s, want 404", code, body)
	}
	if code, _, body = do("POST", "/api/actions/replay-execute", good, `{"plan":"0123"}`); code != http.StatusConflict {
		t.Fatalf("replay-execute of an unknown plan: %d %s, want 409", code, body)
	}
	recs, err := e.audit.Recent(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(recs) - 1; i >= 0; i-- {
		got = append(got, recs[i].Who+" "+recs[i].Action+" "+recs[i].Target+" "+recs[i].Outcome)
	}
	want := []string{"alice trigger job report started", "alice trigger job report ok",
		"alice pause job report started", "alice pause job report refused", "alice trigger job nope started", "alice trigger job nope refused",
		"alice redrive dead letter 7 started", "alice redrive dead letter 7 refused", "alice replay-execute replay plan 0123 started", "alice replay-execute replay plan 0123 refused"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if recs[len(recs)-2].Detail == "" || !strings.HasPrefix(recs[len(recs)-2].Detail, "published report@") {
		t.Fatalf("the trigger's audit record does not name the window: %+v", recs[len(recs)-2])
	}

	// A replay: the plan first, then its execution, once, by the session
	// that planned it. The group has no members, so the offsets are
	// committed directly.
	var offs kadm.Offsets
	end := e.endOffset(t, topic)
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: end, LeaderEpoch: -1})
	if err := e.adm.CommitAllOffsets(context.Background(), "kjob-workers", offs); err != nil {
		t.Fatal(err)
	}
	code, _, body = do("POST", "/api/actions/replay-plan", good, `{"group":"kjob-workers","mode":"to-earliest"}`)
	var planned struct {
		PlanID string               `json:"plan_id"`
		Plan   *operator.ReplayPlan `json:"plan"`
	}
	if err := json.Unmarshal([]byte(body), &planned); code != http.StatusOK || err != nil || planned.PlanID == "" ||
		len(planned.Plan.Partitions) != 1 || planned.Plan.Partitions[0].Before != end || planned.Plan.Partitions[0].Target != 0 {
		t.Fatalf("replay-plan: %d %s", code, body)
	}
	if committed := e.committed(t, "kjob-workers"); committed != end {
		t.Fatalf("planning moved the committed offset to %d", committed)
	}
	other := client(t)
	req, _ := http.NewRequest("POST", srv.URL+"/api/actions/replay-execute", strings.NewReader(`{"plan":"`+planned.PlanID+`"}`))
	for k, v := range good {
		req.Header.Set(k, v)
	}
	if resp, err := other.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("replay-execute from another session: %v %v, want 403 (its CSRF token is not this session's)", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	if code, _, body = do("POST", "/api/actions/replay-execute", good, `{"plan":"`+planned.PlanID+`"}`); code != http.StatusOK {
		t.Fatalf("replay-execute: %d %s", code, body)
	}
	if committed := e.committed(t, "kjob-workers"); committed != 0 {
		t.Fatalf("after the replay the committed offset is %d, want 0", committed)
	}
	if code, _, body = do("POST", "/api/actions/replay-execute", good, `{"plan":"`+planned.PlanID+`"}`); code != http.StatusConflict || !strings.Contains(body, "ran already") {
		t.Fatalf("replay-execute twice: %d %s, want 409", code, body)
	}
	if code, _, body = do("POST", "/api/actions/replay-plan", good, `{"group":"kjob-workers","mode":"to-datetime","value":"2999-01-01T00:00:00Z"}`); code != http.StatusBadRequest || !strings.Contains(body, "is in the future") {
		t.Fatalf("replay-plan into the future: %d %s, want 400", code, body)
	}

	// A redrive of a dead letter, once: the second is left out.
	j, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	_, letter, err := window.Record(j.Jobs[0], topic+".dlq", window.Publication{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	letter.Headers = append(letter.Headers, kgo.RecordHeader{Key: worker.HeaderDLQReason, Value: []byte("boom")}, kgo.RecordHeader{Key: worker.HeaderDLQTopic, Value: []byte(topic)})
	pcl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(context.Background(), letter).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before = e.endOffset(t, topic)
	if code, _, body = do("POST", "/api/actions/redrive", good, `{"letter":"0"}`); code != http.StatusOK || !strings.Contains(body, "redrove letter 0: window report@2026-11-22T10:00:00Z republished") {
		t.Fatalf("redrive: %d %s", code, body)
	}
	if after := e.endOffset(t, topic); after <= before {
		t.Fatal("the redrive republished nothing")
	}
	if code, _, body = do("POST", "/api/actions/redrive", good, `{"letter":"0"}`); code != http.StatusConflict || !strings.Contains(body, "redriven before") {
		t.Fatalf("redrive twice: %d %s, want 409", code, body)
	}

	// The audit log cannot be written: the action does not run.
	e.redis.Kill()
	before = e.endOffset(t, topic)
	if code, _, body = do("POST", "/api/actions/trigger", good, `{"job":"report"}`); code != http.StatusServiceUnavailable || !strings.Contains(body, "the audit log cannot be written, so the action was not performed") {
		t.Fatalf("trigger with the audit log down: %d %s, want 503", code, body)
	}
	if after := e.endOffset(t, topic); after != before {
		t.Fatal("an action ran without its audit record")
	}

	// The read-only dashboard refuses every write.
	ro, err := dashboard.New(dashboard.Config{Inspector: &fakeInspector{}, Brokers: e.brokers, Topic: topic, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rsrv := httptest.NewServer(ro)
	defer rsrv.Close()
	req, _ = http.NewRequest("POST", rsrv.URL+"/api/actions/trigger", strings.NewReader(`{"job":"report"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST to the read-only dashboard: %d, want 405", resp.StatusCode)
	}
}

func TestNewRefusesBadActions(t *testing.T) {
	in := &fakeInspector{}
	base := dashboard.Config{Inspector: in, Brokers: []string{"b"}, Topic: "t"}
	tokens, err := dashboard.NewTokens(map[string]string{"ci": strings.Repeat("k", 40)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a    dashboard.Actions
		want string
	}{
		{dashboard.Actions{Auth: []dashboard.Authenticator{tokens}}, "Actions.Operator is nil"},
		{dashboard.Actions{Operator: &operator.Operator{}}, "Actions.Auth is empty"},
		{dashboard.Actions{Operator: &operator.Operator{}, Auth: []dashboard.Authenticator{tokens}}, "Actions.Audit is nil"},
		{dashboard.Actions{Operator: &operator.Operator{}, Auth: []dashboard.Authenticator{tokens}, Audit: &operator.AuditLog{}, AllowedOrigins: []string{"kjob.example.com"}},
			`Actions.AllowedOrigins has "kjob.example.com"`},
	} {
		cfg := base
		cfg.Actions = &tc.a
		if _, err := dashboard.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %+v = %v, want %q", tc.a, err, tc.want)
		}
	}
	if _, err := dashboard.NewTokens(map[string]string{"ci": "short"}); err == nil || !strings.Contains(err.Error(), "use at least 32") {
		t.Errorf("NewTokens with a short token: %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "users")
	os.WriteFile(bad, []byte("alice:plaintext-password\n"), 0o600)
	if _, err := dashboard.LoadUsers(bad); err == nil || !strings.Contains(err.Error(), bad+`:1: the password of "alice" is not a bcrypt hash`) {
		t.Errorf("LoadUsers with a plain password: %v", err)
	}
}

type hdr map[string]string

func (h hdr) with2(k, v string) hdr { h[k] = v; return h }

// bcryptHash hashes a password at bcrypt's lowest cost, to keep tests
// quick.
func bcryptHash(pass string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	return string(h), err
}

// Failed logins are throttled per client: after LoginBurstPerClient wrong
// passwords a client gets 429 with Retry-After and no bcrypt check, even
// with the right password, while another client still signs in; a bearer
// token is not throttled. Before, every guess was checked (about 80 ms of
// CPU each) without limit.
func TestFailedLoginsThrottled(t *testing.T) {
	e := newActionsEnv(t, "thr", "kjob.windows", "jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n")
	d, err := dashboard.New(dashboard.Config{Inspector: &fakeInspector{}, Brokers: e.brokers, Topic: "kjob.windows", Actions: e.actions,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(remote, user, pass, bearer string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/api/session", nil)
		req.RemoteAddr = remote
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		} else {
			req.SetBasicAuth(user, pass)
		}
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		return rec
	}
	const attacker, other = "192.0.2.7:40000", "198.51.100.9:40000"
	for i := range dashboard.LoginBurstPerClient {
		if rec := get(attacker, "alice", fmt.Sprintf("guess-%d", i), ""); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i+1, rec.Code)
		}
	}
	rec := get(attacker, "alice", "guess-next", "")
	retry, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != http.StatusTooManyRequests || retry < 1 || !strings.Contains(rec.Body.String(), "too many failed logins from this address") {
		t.Fatalf("guess after %d failures: %d, Retry-After %q, body %s; want 429 with Retry-After", dashboard.LoginBurstPerClient, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := get(attacker, "alice", testPassword, ""); rec.Code != http.StatusTooManyRequests {
		t.Errorf("right password from the throttled address: %d, want 429 (not checked)", rec.Code)
	}
	if rec := get(other, "alice", testPassword, ""); rec.Code != http.StatusOK {
		t.Errorf("right password from another address: %d, want 200", rec.Code)
	}
	if rec := get(attacker, "", "", e.token); rec.Code != http.StatusOK {
		t.Errorf("bearer token from the throttled address: %d, want 200", rec.Code)
	}
}

// TestBackfillAction: the dashboard plans and executes a backfill through
// the operator API, as kjobctl backfill does: the plan publishes nothing,
// the execution publishes each window once, and both are audited; a bad
// range is refused (400) before anything is audited.
func TestBackfillAction(t *testing.T) {
	const topic = "kjob.windows"
	e := newActionsEnv(t, "bf", topic, "jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n")
	d, err := dashboard.New(dashboard.Config{Inspector: &fakeInspector{}, Brokers: e.brokers, Topic: topic, Actions: e.actions,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()
	cl := client(t)
	post := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", srv.URL)
		if path != "/api/session" {
			req.Header.Set("X-CSRF-Token", e.csrf(t, cl, srv.URL))
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	before := e.endOffset(t, topic)
	body := `{"job":"report","from":"2026-01-01T00:00:00Z","to":"2026-01-01T03:00:00Z"}`
	code, out := post("/api/actions/backfill-plan", body)
	if code != http.StatusOK || !strings.Contains(out, "would publish 3 of 3 windows") || e.endOffset(t, topic) != before {
		t.Fatalf("backfill-plan: %d %s", code, out)
	}
	code, out = post("/api/actions/backfill", body)
	if code != http.StatusOK || !strings.Contains(out, "published 3 of 3 windows") || !strings.Contains(out, "report@2026-01-01T02:00:00Z#backfill") ||
		e.endOffset(t, topic) != before+3 {
		t.Fatalf("backfill: %d %s", code, out)
	}
	code, out = post("/api/actions/backfill", body)
	if code != http.StatusOK || !strings.Contains(out, "published 0 of 3 windows") || e.endOffset(t, topic) != before+3 {
		t.Fatalf("second backfill: %d %s", code, out)
	}
	for _, bad := range []string{`{"job":"report","from":"yesterday","to":"2026-01-01T03:00:00Z"}`, `{"job":"report","from":"2026-01-01T03:00:00Z","to":"2026-01-01T00:00:00Z"}`} {
		if code, out := post("/api/actions/backfill", bad); code != http.StatusBadRequest {
			t.Fatalf("backfill %s: %d %s, want 400", bad, code, out)
		}
	}
	recs, err := e.audit.Recent(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if strings.HasPrefix(r.Action, "backfill") {
			n++
		}
	}
	if n != 8 { // three accepted actions (started and ok each) and the refused range (started and refused)
		t.Errorf("%d backfill audit records, want 8: %+v", n, recs)
	}
}
