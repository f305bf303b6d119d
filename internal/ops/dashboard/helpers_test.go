package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
)

// Helpers shared by the action tests (actions_test.go, schedules_test.go,
// pause_test.go).

// client is an HTTP client that keeps the session cookie and no
// connections (for the goroutine-leak check).
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Transport: &http.Transport{DisableKeepAlives: true}}
}

// csrf is the session's CSRF token for the bearer token.
func (e *actionsEnv) csrf(t *testing.T, cl *http.Client, url string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/session", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Token string `json:"csrf_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || s.Token == "" {
		t.Fatalf("GET /api/session: %v", err)
	}
	return s.Token
}

// otherToken is token with its first character changed: a token of the
// same shape that is not this session's. (Prefixing a fixed "x" gave the
// session's own token back whenever it began with x.)
func otherToken(token string) string {
	c := "x"
	if strings.HasPrefix(token, "x") {
		c = "y"
	}
	return c + token[1:]
}

// signedIn is alice signed in to the dashboard at url with basic auth:
// her Authorization header, and good, the headers an action she sends
// from the dashboard's page carries (her session's CSRF token, the page's
// Origin, a JSON body).
type signedIn struct {
	t     *testing.T
	cl    *http.Client
	url   string
	alice string
	token string
	good  hdr
}

func signInAlice(t *testing.T, url string) *signedIn {
	t.Helper()
	s := &signedIn{t: t, cl: client(t), url: url}
	req, _ := http.NewRequest("GET", url+"/", nil)
	req.SetBasicAuth("alice", testPassword)
	s.alice = req.Header.Get("Authorization")
	_, body := s.do("GET", "/api/session", hdr{"Authorization": s.alice}, "")
	var sess struct {
		Token string `json:"csrf_token"`
	}
	if err := json.Unmarshal(body, &sess); err != nil || sess.Token == "" {
		t.Fatalf("GET /api/session: %v: %s", err, body)
	}
	s.token = sess.Token
	s.good = hdr{"Authorization": s.alice, "Content-Type": "application/json", "Origin": url, "X-CSRF-Token": s.token}
	return s
}

// do sends a request with headers h and returns the status and body.
func (s *signedIn) do(method, path string, h hdr, body string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := s.cl.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
