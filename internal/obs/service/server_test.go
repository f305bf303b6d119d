package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Liveness is served from the start; readiness says what start-up waits
// for, then reflects the dependencies; anything but GET and HEAD is 405.
func TestServerHealthAndMethods(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	h := NewHealth()
	s, err := StartServer(slog.New(slog.NewTextHandler(io.Discard, nil)), addr, Handler(prometheus.NewRegistry(), h.Ready), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	base := "http://" + addr

	h.Waiting("waiting for redis (checking permissions)")
	if code, _ := get(t, "GET", base+"/healthz"); code != 200 {
		t.Errorf("/healthz while starting: %d, want 200", code)
	}
	if code, body := get(t, "GET", base+"/readyz"); code != 503 || !strings.Contains(body, "starting: waiting for redis") {
		t.Errorf("/readyz while starting: %d %q, want 503 naming what it waits for", code, body)
	}
	down := errors.New("redis: connection refused")
	h.Running(func() error { return down })
	if code, body := get(t, "GET", base+"/readyz"); code != 503 || !strings.Contains(body, "redis: connection refused") {
		t.Errorf("/readyz with a dependency down: %d %q", code, body)
	}
	h.Running(func() error { return nil })
	if code, _ := get(t, "GET", base+"/readyz"); code != 200 {
		t.Errorf("/readyz when ready: %d", code)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(t, "HEAD", base+path); code != 200 {
			t.Errorf("HEAD %s: %d, want 200", path, code)
		}
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			if code, _ := get(t, m, base+path); code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, path, code)
			}
		}
	}
	if err := s.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func TestStartServerAddressInUse(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := StartServer(log, addr, Handler(prometheus.NewRegistry(), NewHealth().Ready), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if _, err := StartServer(log, addr, Handler(prometheus.NewRegistry(), NewHealth().Ready), nil); err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("second server on %s: %v, want an error naming --http-addr", addr, err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// go-redis's own lines go through slog (JSON here) and are rate-limited
// per kind.
func TestRedisLogger(t *testing.T) {
	var out syncBuffer
	l := RedisLogger(slog.New(slog.NewJSONHandler(&out, nil)), time.Minute)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	const dial = "redis: connection pool: failed to dial after %d attempts: %v"
	for i := range 10 { // five seconds of go-redis's lines at 2/s
		l.Printf(context.Background(), dial, 5, "dial tcp 127.0.0.1:6379: connect: connection refused")
		now = now.Add(500 * time.Millisecond)
		if i == 3 {
			l.Printf(context.Background(), "redis: other %s", "thing")
		}
	}
	now = now.Add(time.Minute)
	l.Printf(context.Background(), dial, 5, "refused")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (first dial line, other, one dial line a minute later):\n%s", len(lines), out.String())
	}
	for _, want := range []string{
		`"level":"WARN","msg":"redis client: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:6379: connect: connection refused","source":"go-redis"}`,
		`"msg":"redis client: other thing"`,
		`"suppressed":9`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, out.String())
		}
	}
}
