package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/kjob/kjob/internal/clock"
	"github.com/kjob/kjob/pkg/handler"
)

// registerBuiltins adds the handlers every kjob worker ships with. A user's
// own worker main copies this file's pattern: one Handle call per handler.
func registerBuiltins(mux *handler.Mux, log *slog.Logger, client *http.Client) {
	mux.Handle("log", logHandler(log))
	mux.Handle("noop", handler.HandlerFunc(noopHandler))
	mux.Handle("sleep", handler.HandlerFunc(sleepHandler))
	mux.Handle("http", httpHandler(client))
}

// logHandler logs the window and succeeds.
func logHandler(log *slog.Logger) handler.Handler {
	return handler.HandlerFunc(func(ctx context.Context, j *handler.Job) error {
		log.InfoContext(ctx, "log handler", "job", j.Name(), "window", j.ID(), "trigger", string(j.Trigger()),
			"attempt", j.Attempt(), "token", j.FencingToken(), "payload", string(j.Payload()))
		return nil
	})
}

// noopHandler succeeds at once without reading its payload: the handler
// of benchmarks that measure kjob's own cost per window, and of jobs kept
// only for their schedule (e.g. while a real handler is being written).
func noopHandler(context.Context, *handler.Job) error { return nil }

// sleepHandler sleeps for payload.duration (a Go duration string), or until
// its context ends.
func sleepHandler(ctx context.Context, j *handler.Job) error {
	var p struct {
		Duration string `json:"duration"`
	}
	if err := j.DecodePayload(&p); err != nil {
		return fmt.Errorf("%w: %w", err, handler.ErrPermanent)
	}
	d, err := time.ParseDuration(p.Duration)
	if err != nil || d < 0 {
		return fmt.Errorf("sleep handler: payload.duration = %q: want a duration such as \"2s\": %w", p.Duration, handler.ErrPermanent)
	}
	return clock.Sleep(ctx, d)
}

// WebhookBody is the JSON body the http handler POSTs.
type WebhookBody struct {
	WindowID     string          `json:"window_id"`
	Job          string          `json:"job"`
	Trigger      string          `json:"trigger"`
	Attempt      int             `json:"attempt"`
	FencingToken int64           `json:"fencing_token"`
	Worker       string          `json:"worker"`
	WindowStart  time.Time       `json:"window_start"`
	WindowEnd    time.Time       `json:"window_end"`
	Payload      json.RawMessage `json:"payload"`
}

// httpHandler POSTs the window to payload.url. A 2xx answer succeeds; 4xx
// (except 408 and 429) fails permanently; anything else is retried. The job
// timeout bounds the request through the context.
func httpHandler(client *http.Client) handler.Handler {
	return handler.HandlerFunc(func(ctx context.Context, j *handler.Job) error {
		var p struct {
			URL string `json:"url"`
		}
		if err := j.DecodePayload(&p); err != nil {
			return fmt.Errorf("%w: %w", err, handler.ErrPermanent)
		}
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("http handler: payload.url = %q: want an absolute http:// or https:// URL: %w", p.URL, handler.ErrPermanent)
		}
		w := j.Window()
		body, err := json.Marshal(WebhookBody{
			WindowID: j.ID(), Job: j.Name(), Trigger: string(j.Trigger()), Attempt: j.Attempt(),
			FencingToken: j.FencingToken(), Worker: j.Worker(), WindowStart: w.Start, WindowEnd: w.End, Payload: j.Payload(),
		})
		if err != nil {
			return fmt.Errorf("http handler: encode body: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("http handler: %w: %w", err, handler.ErrPermanent)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", j.ID())
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("http handler: POST %s: %w", p.URL, err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return nil
		case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429:
			return fmt.Errorf("http handler: POST %s: %s: %q: %w", p.URL, resp.Status, msg, handler.ErrPermanent)
		default:
			return fmt.Errorf("http handler: POST %s: %s: %q", p.URL, resp.Status, msg)
		}
	})
}
