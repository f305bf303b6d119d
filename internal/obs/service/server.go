package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health is what /healthz and /readyz answer. /healthz answers 200 from
// the moment the server starts: the process is alive. /readyz answers 503
// with the step start-up waits for (Waiting) until the process runs, then
// with its dependencies' check (Running).
type Health struct {
	mu      sync.Mutex
	waiting string
	check   func() error
}

// NewHealth returns a Health that is starting.
func NewHealth() *Health { return &Health{waiting: "starting"} }

// Waiting says what start-up waits for, e.g. "waiting for redis (checking
// the worker's Redis permissions)"; /readyz shows it.
func (h *Health) Waiting(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting, h.check = what, nil
}

// Running makes /readyz answer check() from now on.
func (h *Health) Running(check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting, h.check = "", check
}

// Ready is nil when the process is ready.
func (h *Health) Ready() error {
	h.mu.Lock()
	waiting, check := h.waiting, h.check
	h.mu.Unlock()
	if check == nil {
		return fmt.Errorf("starting: %s", waiting)
	}
	return check()
}

// Server serves a process's /healthz, /readyz and /metrics; see
// StartServer.
type Server struct {
	srv  *http.Server
	done chan struct{}
	err  error // set before done is closed
	once sync.Once
	stop error
}

// Handler serves /healthz (200 while the process runs), /readyz (200 when
// ready() is nil, else 503 with its error) and /metrics (Prometheus, from
// reg). They answer GET and HEAD only (405 otherwise).
func Handler(reg *prometheus.Registry, ready func() error) http.Handler {
	mux := http.NewServeMux()
	// "GET /path" also matches HEAD; other methods get 405 with an Allow
	// header from the mux.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// StartServer listens on addr and serves h (see Handler) until Stop. A
// process starts it first, so liveness is served while start-up still
// waits for Redis or Kafka. failed is called if serving fails after the
// start (Stop then returns why). An empty addr serves nothing.
func StartServer(log *slog.Logger, addr string, h http.Handler, failed func()) (*Server, error) {
	s := &Server{done: make(chan struct{})}
	if addr == "" {
		close(s.done)
		return s, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", addr, err)
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Info("http listening", "addr", l.Addr().String())
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			s.err = fmt.Errorf("http server on %s: %w", addr, err)
			log.Error("http server stopped; stopping the process", "err", err)
			if failed != nil {
				failed()
			}
		}
	}()
	return s, nil
}

// Stop shuts the server down (waiting 2 s at most for requests in flight)
// and returns the error that stopped it early, if one did. It may be
// called more than once.
func (s *Server) Stop() error {
	s.once.Do(func() {
		if s.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.srv.Shutdown(ctx)
			cancel()
		}
		<-s.done
		s.stop = s.err
	})
	return s.stop
}
