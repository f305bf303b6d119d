package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

func testJob(handlerName, payload string) *handler.Job {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return handler.NewJob(&jobmsg.Message{
		V: 1, ID: jobmsg.WindowID("j", start), Job: "j", Handler: handlerName,
		Window:  jobmsg.Window{Start: start, End: start.Add(time.Minute)},
		Payload: json.RawMessage(payload), Trigger: jobmsg.TriggerSchedule,
		Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Second), MaxAttempts: 3},
	}, 2, 17, "w1", 0, 5)
}

func mux(t *testing.T) *handler.Mux {
	m := handler.NewMux()
	Register(m.Handle, slog.New(slog.DiscardHandler), &http.Client{}, nil)
	return m
}

func TestHTTPHandlerPostsWindow(t *testing.T) {
	var got WebhookBody
	var key string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		key = r.Header.Get("Idempotency-Key")
	}))
	defer srv.Close()
	j := testJob("http", `{"url":"`+srv.URL+`","x":1}`)
	if err := mux(t).HandleJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	if got.WindowID != j.ID() || got.Attempt != 2 || got.FencingToken != 17 || got.Worker != "w1" ||
		got.Trigger != "schedule" || got.Job != "j" || key != j.ID() || string(got.Payload) == "" {
		t.Fatalf("body = %+v key=%q", got, key)
	}
}

func TestHTTPHandlerStatuses(t *testing.T) {
	for _, tc := range []struct {
		status   int
		ok, perm bool
	}{{204, true, false}, {404, false, true}, {429, false, false}, {503, false, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) }))
		err := mux(t).HandleJob(context.Background(), testJob("http", `{"url":"`+srv.URL+`"}`))
		srv.Close()
		if (err == nil) != tc.ok || errors.Is(err, handler.ErrPermanent) != tc.perm {
			t.Errorf("status %d: err = %v", tc.status, err)
		}
	}
}

func TestHTTPHandlerTimeoutCancelsRequest(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := mux(t).HandleJob(ctx, testJob("http", `{"url":"`+srv.URL+`"}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPHandlerBadURL(t *testing.T) {
	err := mux(t).HandleJob(context.Background(), testJob("http", `{"url":"ftp://x"}`))
	if !errors.Is(err, handler.ErrPermanent) || err.Error() != `http handler: payload.url = "ftp://x": want an absolute http:// or https:// URL: permanent failure` {
		t.Fatalf("err = %v", err)
	}
}

func TestSleepHandler(t *testing.T) {
	if err := mux(t).HandleJob(context.Background(), testJob("sleep", `{"duration":"1ms"}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := mux(t).HandleJob(ctx, testJob("sleep", `{"duration":"1h"}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sleep: %v", err)
	}
	err := mux(t).HandleJob(context.Background(), testJob("sleep", `{"duration":"soon"}`))
	if !errors.Is(err, handler.ErrPermanent) {
		t.Fatalf("bad duration: %v", err)
	}
}

func TestNoopHandler(t *testing.T) {
	for _, payload := range []string{`{}`, `{"duration":"1h"}`} {
		if err := mux(t).HandleJob(context.Background(), testJob("noop", payload)); err != nil {
			t.Fatalf("payload %s: %v", payload, err)
		}
	}
}

func TestLogHandler(t *testing.T) {
	if err := mux(t).HandleJob(context.Background(), testJob("log", `{}`)); err != nil {
		t.Fatal(err)
	}
}

// The http handler calls only the hosts of --http-allow-hosts, also
// through redirects; a refused host fails permanently (dead-lettered with
// the reason), naming the flag.
func TestHTTPHandlerAllowList(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	run := func(allow, url string) error {
		a, err := ParseAllowList(allow)
		if err != nil {
			t.Fatal(err)
		}
		m := handler.NewMux()
		Register(m.Handle, slog.New(slog.DiscardHandler), &http.Client{}, a)
		return m.HandleJob(context.Background(), testJob("http", `{"url":"`+url+`"}`))
	}
	for _, tc := range []struct {
		allow, url string
		ok         bool
	}{
		{"", srv.URL, true},                                  // empty: any host
		{"127.0.0.1", srv.URL, true},                         // an IP
		{"10.0.0.0/8, 127.0.0.0/8", srv.URL, true},           // a CIDR block
		{"hooks.example.com", srv.URL, false},                // not listed
		{"*.example.com", "http://a.b.example.com/x", false}, // listed, but nothing listens: not a refusal
		{"127.0.0.1", "http://169.254.169.254/", false},
		{"localhost", "http://LOCALHOST.:1/", false}, // a name: matched case-insensitively (connection refused, not refused by the list)
		{"127.0.0.1", redirect.URL, false},           // the redirect target is checked too
	} {
		err := run(tc.allow, tc.url)
		refused := errors.Is(err, errHostNotAllowed)
		switch {
		case tc.ok && err != nil:
			t.Errorf("allow %q, url %s: %v", tc.allow, tc.url, err)
		case !tc.ok && tc.allow == "*.example.com" && refused:
			t.Errorf("allow %q, url %s: refused by the list: %v", tc.allow, tc.url, err)
		case !tc.ok && tc.allow == "localhost" && refused:
			t.Errorf("allow %q, url %s: refused by the list: %v", tc.allow, tc.url, err)
		case !tc.ok && tc.allow != "*.example.com" && tc.allow != "localhost" && (!refused || !errors.Is(err, handler.ErrPermanent) || !strings.Contains(err.Error(), "WorkerConfig.HTTPAllowHosts")):
			t.Errorf("allow %q, url %s: err = %v, want a permanent refusal naming --http-allow-hosts", tc.allow, tc.url, err)
		}
	}
	if hits != 3 {
		t.Errorf("the target was called %d times, want 3", hits)
	}
	for _, bad := range []string{"http://hooks.example.com", "hooks.example.com:443", "*", "a/b"} {
		if _, err := ParseAllowList(bad); err == nil {
			t.Errorf("ParseAllowList(%q) accepted", bad)
		}
	}
}
