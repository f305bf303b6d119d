// Package builtin holds the handlers every kjob worker ships with: log
// (logs the window), noop (succeeds at once), sleep (waits
// payload.duration) and http (POSTs the window to payload.url, limited to
// an AllowList of hosts). kjob.NewWorker registers them; a user's own
// handlers sit beside them on the same mux.
package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/exec/handler"
)

// Register adds the handlers every kjob worker ships with: log, noop,
// sleep and http, through handle (a Mux's Handle). kjob.NewWorker registers them
// on every worker.
// allow limits the hosts the http handler may call (nil: any host).
func Register(handle func(name string, h handler.Handler), log *slog.Logger, client *http.Client, allow *AllowList) {
	handle("log", logHandler(log))
	handle("noop", handler.HandlerFunc(noopHandler))
	handle("sleep", handler.HandlerFunc(sleepHandler))
	handle("http", httpHandler(client, allow))
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
// timeout bounds the request through the context. A URL, or a redirect,
// to a host allow does not list fails permanently (allow nil: any host).
func httpHandler(client *http.Client, allow *AllowList) handler.Handler {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := allow.Check(req.URL); err != nil {
			return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
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
		if err := allow.Check(u); err != nil {
			return fmt.Errorf("http handler: payload.url = %q: %w: %w", u.Redacted(), err, handler.ErrPermanent)
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
		resp, err := c.Do(req)
		if errors.Is(err, errHostNotAllowed) {
			return fmt.Errorf("http handler: POST %s: %w: %w", u.Redacted(), err, handler.ErrPermanent)
		}
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

// errHostNotAllowed is wrapped by the http handler's error for a target
// host the allow-list does not list.
var errHostNotAllowed = errors.New("host not allowed")

// AllowList is the http handler's allow-list of target hosts
// (kjob.WorkerConfig.HTTPAllowHosts, cmd/worker --http-allow-hosts):
// exact host names, "*.example.com" for every name
// under example.com, and IP addresses or CIDR blocks for URLs that name
// an IP. Names are matched as written in the URL (lower-cased), not
// resolved: a listed name is trusted to resolve where its owner points it,
// and an IP entry matches only a URL that names that IP. Ports are not
// restricted. A nil list allows any host.
type AllowList struct {
	spec     string
	names    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	nets     []netip.Prefix
}

// ParseAllowList parses a comma-separated allow-list; "" is nil (any
// host).
func ParseAllowList(spec string) (*AllowList, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	a := &AllowList{spec: spec, names: map[string]bool{}}
	for _, e := range strings.Split(spec, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if p, err := netip.ParsePrefix(e); err == nil {
			a.nets = append(a.nets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			a.nets = append(a.nets, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		name, wild := strings.CutPrefix(e, "*.")
		if name == "" || strings.ContainsAny(name, "/:@?#*[] ") {
			return nil, fmt.Errorf("entry %q: want a host name (hooks.example.com), *.example.com, an IP address or a CIDR block (10.0.0.0/8), without scheme or port", e)
		}
		name = strings.TrimSuffix(name, ".")
		if wild {
			a.suffixes = append(a.suffixes, "."+name)
		} else {
			a.names[name] = true
		}
	}
	return a, nil
}

// Check is nil if a allows u's host; a nil list allows any host.
func (a *AllowList) Check(u *url.URL) error {
	if a == nil {
		return nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		for _, p := range a.nets {
			if p.Contains(ip) {
				return nil
			}
		}
	} else {
		if a.names[host] {
			return nil
		}
		for _, s := range a.suffixes {
			if strings.HasSuffix(host, s) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %q is not in the http handler's allow-list %s (add it to WorkerConfig.HTTPAllowHosts if this job may call it)", errHostNotAllowed, host, a.spec)
}
