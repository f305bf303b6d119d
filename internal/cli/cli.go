// Package cli holds what kjob's binaries share: flags that mirror
// environment variables, logging set-up, the Redis client and the HTTP
// endpoints for health and metrics.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Flags is a flag set whose flags each mirror an environment variable: the
// variable sets the value, a flag on the command line overrides it.
type Flags struct {
	fs     *flag.FlagSet
	envs   []envFlag
	ranges []intRange
}

type envFlag struct{ name, env string }

// intRange bounds an int flag: Parse rejects a value outside [lo, hi].
type intRange struct {
	name   string
	p      *int
	lo, hi int
}

// NewFlags returns a flag set for a command. usage is printed above the
// flag list by --help.
func NewFlags(name, usage string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := &Flags{fs: fs}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "%s\n\nFlags (each can also be set by the environment variable shown):\n", strings.TrimSpace(usage))
		fs.VisitAll(func(fl *flag.Flag) {
			env := ""
			for _, e := range f.envs {
				if e.name == fl.Name {
					env = e.env
				}
			}
			typ, help := flag.UnquoteUsage(fl)
			fmt.Fprintf(out, "  --%s %s\n", fl.Name, typ)
			if env != "" {
				fmt.Fprintf(out, "        [%s] ", env)
			} else {
				fmt.Fprint(out, "        ")
			}
			fmt.Fprint(out, help)
			if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "0s" && fl.DefValue != "false" {
				fmt.Fprintf(out, " (default %q)", fl.DefValue)
			}
			fmt.Fprintln(out)
		})
	}
	return f
}

// SetOutput sets where usage and errors are printed.
func (f *Flags) SetOutput(w io.Writer) { f.fs.SetOutput(w) }

func (f *Flags) env(name, env string) {
	if env != "" {
		f.envs = append(f.envs, envFlag{name, env})
	}
}

// String defines a string flag mirrored by env.
func (f *Flags) String(p *string, name, env, def, help string) {
	f.fs.StringVar(p, name, def, help)
	f.env(name, env)
}

// Int defines an int flag mirrored by env.
func (f *Flags) Int(p *int, name, env string, def int, help string) {
	f.fs.IntVar(p, name, def, help)
	f.env(name, env)
}

// IntRange defines an int flag mirrored by env whose value must lie in
// [lo, hi]: Parse rejects any other value, naming flag, variable, value and
// range (so a value cannot wrap around when converted to a narrower type).
func (f *Flags) IntRange(p *int, name, env string, def, lo, hi int, help string) {
	f.Int(p, name, env, def, help)
	f.ranges = append(f.ranges, intRange{name: name, p: p, lo: lo, hi: hi})
}

// Bool defines a bool flag mirrored by env.
func (f *Flags) Bool(p *bool, name, env string, def bool, help string) {
	f.fs.BoolVar(p, name, def, help)
	f.env(name, env)
}

// Duration defines a duration flag mirrored by env.
func (f *Flags) Duration(p *time.Duration, name, env string, def time.Duration, help string) {
	f.fs.DurationVar(p, name, def, help)
	f.env(name, env)
}

// Parse applies the environment, then the command line, then checks the
// bounds of IntRange flags. An invalid value names the variable or flag,
// the value and the expected form. It returns flag.ErrHelp for --help.
func (f *Flags) Parse(args []string) error {
	if err := f.parseEnv(); err != nil {
		return err
	}
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	return f.check()
}

// parseEnv applies the environment variables that are set.
func (f *Flags) parseEnv() error {
	for _, e := range f.envs {
		v, ok := os.LookupEnv(e.env)
		if !ok {
			continue
		}
		if err := f.fs.Set(e.name, v); err != nil {
			typ, _ := flag.UnquoteUsage(f.fs.Lookup(e.name))
			return fmt.Errorf("environment variable %s=%q: %v: want %s (flag --%s)", e.env, v, cause(err), expected[typ], e.name)
		}
	}
	return nil
}

// check enforces the IntRange bounds.
func (f *Flags) check() error {
	for _, r := range f.ranges {
		if *r.p < r.lo || *r.p > r.hi {
			return f.Errorf(r.name, "out of range: want a whole number from %d to %d", r.lo, r.hi)
		}
	}
	return nil
}

// Ref names flag name the way a user sets it, with its current value:
// "--name/ENV=value" ("--name=value" if no variable mirrors it; `""` for
// an empty value).
func (f *Flags) Ref(name string) string {
	fl := f.fs.Lookup(name)
	if fl == nil {
		return "--" + name // a programming error; still say what was meant
	}
	ref := "--" + name
	for _, e := range f.envs {
		if e.name == name {
			ref += "/" + e.env
		}
	}
	v := fl.Value.String()
	if v == "" {
		v = `""`
	}
	return ref + "=" + v
}

// Errorf returns an error about flag name's value: its Ref, ": ", then the
// formatted message (which may wrap with %w). Say what is wrong and how
// to fix it.
func (f *Flags) Errorf(name, format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{f.Ref(name)}, args...)...)
}

// Explain prefixes a library's configuration error with the flags the
// user set it through: fields maps what the library's messages call a
// setting (e.g. "Config.RenewInterval") to the flag that feeds it (e.g.
// "lease-renew"). Each field err mentions adds its flag's Ref, in the order
// they appear; an error naming none is returned as is. The result wraps
// err.
func (f *Flags) Explain(err error, fields map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	type hit struct {
		at   int
		flag string
	}
	var hits []hit
	for field, name := range fields {
		if i := strings.Index(msg, field); i >= 0 {
			hits = append(hits, hit{i, name})
		}
	}
	if len(hits) == 0 {
		return err
	}
	slices.SortFunc(hits, func(a, b hit) int { return a.at - b.at })
	refs := make([]string, 0, len(hits))
	for _, h := range hits {
		if r := f.Ref(h.flag); !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	return fmt.Errorf("%s: %w", strings.Join(refs, ", "), err)
}

var expected = map[string]string{
	"duration": `a duration such as "5s" or "1m30s"`,
	"int":      "a whole number",
	"":         "true or false",
	"string":   "a string",
}

func cause(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// Args returns the non-flag arguments.
func (f *Flags) Args() []string { return f.fs.Args() }

// Logger builds the process logger: format "text" or "json", level "debug",
// "info", "warn" or "error".
func Logger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// DefaultID is the replica id used when none is configured: hostname-pid.
func DefaultID() string {
	h, err := os.Hostname()
	if err != nil {
		h = "kjob"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}

// RedisOptions selects a Redis deployment.
type RedisOptions struct {
	// URL is redis:// or rediss:// for a single server.
	URL string
	// Addrs, comma-separated, selects a Cluster (one address or more), or a
	// Sentinel set when MasterName is set; it overrides URL's address.
	Addrs string
	// MasterName is the Sentinel master name.
	MasterName string
	// Security holds the TLS files and the password file (security.go).
	Security RedisSecurity
}

// Register adds the Redis flags.
func (o *RedisOptions) Register(f *Flags) {
	f.String(&o.URL, "redis-url", "KJOB_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss:// for TLS; user:password@ for ACL users)")
	f.String(&o.Addrs, "redis-addrs", "KJOB_REDIS_ADDRS", "", "comma-separated Redis Cluster nodes, or Sentinels with --redis-master (overrides the URL's address)")
	f.String(&o.MasterName, "redis-master", "KJOB_REDIS_MASTER", "", "Sentinel master name")
	o.Security.register(f)
}

// User returns the Redis ACL user the URL names ("default" when it names
// none), for messages.
func (o RedisOptions) User() string {
	if opt, err := redis.ParseURL(o.URL); err == nil && opt.Username != "" {
		return opt.Username
	}
	return "default"
}

// Client returns a go-redis UniversalClient: a single server, a Sentinel
// failover client or a Cluster client, per the options.
func (o RedisOptions) Client() (redis.UniversalClient, error) {
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url %q: %v; want redis://[user:password@]host:port/db", o.URL, err)
	}
	u := &redis.UniversalOptions{
		Addrs: []string{opt.Addr}, DB: opt.DB, Username: opt.Username, Password: opt.Password,
		TLSConfig: opt.TLSConfig, MasterName: o.MasterName,
		// Honour context deadlines, so a hung server cannot hold up the
		// lease's renewals or the worker's claims past their deadlines.
		ContextTimeoutEnabled: true,
	}
	if o.Addrs != "" {
		u.Addrs = strings.Split(o.Addrs, ",")
		if o.MasterName == "" {
			// Without a Sentinel master name the addresses are Cluster
			// nodes, even one (a configuration endpoint): go-redis would
			// otherwise treat a single address as a plain server and every
			// script would be answered with MOVED.
			u.IsClusterMode = true
			if u.DB != 0 {
				return nil, fmt.Errorf("--redis-url %q selects db %d, but --redis-addrs selects a Redis Cluster, which has only db 0: drop the /%d from the URL", o.URL, u.DB, u.DB)
			}
		}
	}
	if err := o.Security.apply(u); err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(u), nil
}

// Serve runs the process's HTTP endpoints on addr until ctx is done:
// /healthz (alive), /readyz (ready() == nil) and /metrics (Prometheus).
// An empty addr serves nothing and returns when ctx is done.
func Serve(ctx context.Context, log *slog.Logger, addr string, reg *prometheus.Registry, ready func() error) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http-addr %q: %w (use another address, or empty to turn the HTTP server off)", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("http listening", "addr", l.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-errc
	return nil
}
