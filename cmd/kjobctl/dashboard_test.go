package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// TestDashboardActions runs kjobctl dashboard --actions as an operator
// would: the page needs the password from the users file, and a trigger
// sent the way the page sends it publishes a window and is audited.
func TestDashboardActions(t *testing.T) {
	e := newOpsEnv(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("ops:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"dashboard", "--actions"}, "kjobctl: dashboard: --actions needs authentication: add --auth-users FILE (htpasswd -B -n USER) and/or --auth-tokens FILE: usage"},
		{[]string{"dashboard", "--auth-users", users}, "kjobctl: dashboard: --auth-users, --auth-tokens and --allow-origin go with --actions (the read-only dashboard has no login): usage"},
		{[]string{"dashboard", "--actions", "--auth-users", e.sched}, `kjobctl: dashboard: --auth-users: ` + e.sched + `:1: the password of "jobs" is not a bcrypt hash (crypto/bcrypt: hashedSecret too short to be a bcrypted password); make one with htpasswd -B -n jobs: usage`},
	} {
		code, _, stderr := e.kjobctl(tc.args...)
		expect(t, code, stderr, exitUsage, tc.err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dashboard", "--listen", "127.0.0.1:0", "--actions", "--auth-users", users, "--log-level", "error"}, e.flags...), &out, io.Discard)
	}()
	addr := regexp.MustCompile(`http://(127\.0\.0\.1:[0-9]+)/`)
	testenv.Eventually(t, 30*time.Second, func() bool { return addr.MatchString(out.String()) }, "the dashboard did not start: %s", &out)
	base := "http://" + addr.FindStringSubmatch(out.String())[1]
	if !strings.Contains(out.String(), "(actions on, authentication required; Ctrl-C stops)") {
		t.Fatalf("start-up line: %s", out.String())
	}
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string, user, pass string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET / without credentials: %d, want 401", code)
	}
	if code, _ := get("/", "ops", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("GET / with a wrong password: %d, want 401", code)
	}
	code, body := get("/api/session", "ops", "s3cret-pass")
	var sess map[string]any
	if err := json.Unmarshal([]byte(body), &sess); code != http.StatusOK || err != nil || sess["user"] != "ops" {
		t.Fatalf("GET /api/session: %d %s", code, body)
	}
	before := e.endOffsets()
	req, _ := http.NewRequest("POST", base+"/api/actions/trigger", strings.NewReader(`{"job":"report"}`))
	req.SetBasicAuth("ops", "s3cret-pass")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	req.Header.Set("X-CSRF-Token", sess["csrf_token"].(string))
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"window":"report@`) {
		t.Fatalf("trigger: %d %s", resp.StatusCode, b)
	}
	if e.endOffsets() <= before {
		t.Fatal("the trigger published nothing")
	}
	audit, err := operator.NewAuditLog(e.redis.Client(), "ops", 0)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := audit.Recent(context.Background(), 10)
	if err != nil || len(recs) != 2 || recs[0].Who != "ops" || recs[0].Action != "trigger" || recs[0].Outcome != "ok" || recs[0].Tool != "dashboard" {
		t.Fatalf("audit log: %+v, %v", recs, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("dashboard exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the dashboard did not stop within 30s of its context ending")
	}
}

// A read-only dashboard (no login) listening beyond loopback warns at
// start-up; on loopback it does not. Before, 0.0.0.0 started silently.
func TestReadOnlyDashboardBeyondLoopbackWarns(t *testing.T) {
	e := newOpsEnv(t)
	for _, tc := range []struct {
		listen string
		warn   bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, append([]string{"dashboard", "--listen", tc.listen}, e.flags...), &out, &errb)
		}()
		testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "kjob dashboard: http://") }, "the dashboard did not start: %s%s", &out, &errb)
		cancel()
		if code := testenv.Recv(t, done, 30*time.Second, "the dashboard's exit"); code != exitOK {
			t.Errorf("--listen %s: exit %d: %s", tc.listen, code, &errb)
		}
		const warning = "the read-only dashboard listens beyond loopback and has no login"
		if got := strings.Contains(errb.String(), warning); got != tc.warn {
			t.Errorf("--listen %s: warning %v, want %v; stderr:\n%s", tc.listen, got, tc.warn, &errb)
		}
	}
}
