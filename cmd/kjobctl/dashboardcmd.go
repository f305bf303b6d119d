package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/jobsource"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

const dashboardUsage = `kjobctl dashboard: serve a live page of the deployment: how late the work is
(the time lag per partition, the headline chart), the producer leader, the
workers and the partitions they own, the offset lag, jobs with their next
run and last outcome, the most recent windows and the dead-letter count; and
per job a page of its past runs (duration chart, success rate, p50/p95).

Read-only by default. --actions adds trigger now, pause and resume (on a
job's page), dead-letter redrive and replay (a plan first, executed on a
second confirmation), through the same code as kjobctl trigger, pause,
resume, dlq redrive and replay. With --actions every request needs
authentication: --auth-users FILE (HTTP basic auth; lines USER:BCRYPT-HASH
as "htpasswd -B -n USER" prints them) and/or --auth-tokens FILE (bearer
tokens; lines NAME:TOKEN, tokens of at least 32 characters). An action must
come from the dashboard's own page (its Origin is checked; behind a proxy,
name the public origin with --allow-origin) with the session's CSRF token.
Every action is written to the audit log in Redis (stream
kjob:{<namespace>}:audit, the newest --audit-len records) before it runs and
after, and logged.

It listens on loopback by default; on another address, put it behind a TLS
proxy, since basic auth and tokens travel in the clear otherwise.

Usage: kjobctl dashboard [--listen 127.0.0.1:8080] [--actions --auth-users FILE] [flags]`

func dashboardCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		o                     opts
		listen, logLevel      string
		interval, history     time.Duration
		recent                int
		actions               bool
		tokensFile, usersFile string
		allowOrigins          string
		auditLen              int
	)
	f := cli.NewFlags("kjobctl dashboard", dashboardUsage)
	f.SetOutput(stdout)
	o.register(f)
	f.String(&listen, "listen", "KJOB_DASHBOARD_LISTEN", "127.0.0.1:8080", "address to serve the dashboard on (keep it on loopback, or behind a TLS proxy)")
	f.Duration(&interval, "interval", "", dashboard.DefaultInterval, "how often the page refreshes")
	f.Duration(&history, "history", "", dashboard.DefaultHistory, "how far back the lag charts reach")
	f.Int(&recent, "recent", "", dashboard.DefaultRecent, "how many of the newest windows to list")
	f.String(&logLevel, "log-level", "KJOB_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	f.Bool(&actions, "actions", "KJOB_DASHBOARD_ACTIONS", false, "turn on the actions (trigger, pause, resume, redrive, replay); needs --auth-users or --auth-tokens")
	f.String(&usersFile, "auth-users", "KJOB_DASHBOARD_USERS", "", "with --actions: file of USER:BCRYPT-HASH lines (htpasswd -B -n USER) for HTTP basic auth")
	f.String(&tokensFile, "auth-tokens", "KJOB_DASHBOARD_TOKENS", "", "with --actions: file of NAME:TOKEN lines for bearer tokens (at least 32 characters each)")
	f.String(&allowOrigins, "allow-origin", "KJOB_DASHBOARD_ALLOW_ORIGIN", "", "with --actions: comma-separated origins besides the dashboard's own that may send actions (e.g. https://kjob.example.com, a TLS proxy's)")
	f.Int(&auditLen, "audit-len", "", operator.DefaultAuditLen, "with --actions: how many audit records Redis keeps (about)")
	o.registerRetention(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if !actions && (usersFile != "" || tokensFile != "" || allowOrigins != "") {
		return fmt.Errorf("dashboard: --auth-users, --auth-tokens and --allow-origin go with --actions (the read-only dashboard has no login): %w", errUsage)
	}
	if actions && usersFile == "" && tokensFile == "" {
		return fmt.Errorf("dashboard: --actions needs authentication: add --auth-users FILE (htpasswd -B -n USER) and/or --auth-tokens FILE: %w", errUsage)
	}
	if auditLen < 1 {
		return fmt.Errorf("dashboard: --audit-len %d: want at least 1: %w", auditLen, errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	log, err := cli.Logger(stderr, "text", logLevel)
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	// The jobs come from the schedules topic, followed as it is written
	// (a read-committed consumer tailing it); with --schedules, from that
	// file.
	var jobs dashboardJobs = jobsOf{&o, stderr}
	var follower *jobsource.Follower
	if o.schedules == "" {
		if follower, err = jobsource.NewFollower(jobsource.FollowerConfig{Opts: o.kgoOpts(), Deployment: o.deployment(), Logger: log}); err != nil {
			return err
		}
		fctx, stopFollowing := context.WithCancel(ctx)
		followed := make(chan struct{})
		go func() { defer close(followed); _ = follower.Run(fctx) }()
		defer func() { stopFollowing(); <-followed }()
		jobs = follower
		o.warnEmptyTopic(ctx, follower, log)
	} else if _, err := o.jobSet(ctx, stderr); err != nil {
		return err
	}
	in, err := o.inspector(jobs)
	if err != nil {
		return err
	}
	defer in.Close()
	store, err := o.store()
	if err != nil {
		return err
	}
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: o.brokerList(), ClientOpts: o.kafka, Topic: o.topic, Group: o.group, States: store})
	if err != nil {
		return err
	}
	defer tl.Close()
	cfg := dashboard.Config{
		Inspector: in, States: store, TimeLag: tl, Runs: store, Brokers: o.brokerList(), ClientOpts: o.kafka, Topic: o.topic,
		Namespace: o.namespace, Interval: interval, History: history, Recent: recent, Logger: log,
	}
	// The schedules page reads the schedules topic and change log; with
	// --actions its changes go to the producer leader as the signed-in user.
	var snaps dashboard.SnapshotReader
	if follower != nil {
		snaps = follower
	}
	if cfg.Schedules, err = dashboard.NewSchedulesFrom(specs.ClientConfig{Opts: o.kgoOpts(), Deployment: o.deployment()}, snaps); err != nil {
		return err
	}
	if actions {
		a, closeActions, err := o.dashboardActions(jobs, usersFile, tokensFile, allowOrigins, int64(auditLen))
		if err != nil {
			return err
		}
		defer closeActions()
		cfg.Actions = a
	}
	d, err := dashboard.New(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("dashboard: --listen %q: %w (pick a free address, e.g. 127.0.0.1:8081)", listen, err)
	}
	switch {
	case actions && !isLoopback(ln.Addr()):
		log.Warn("the dashboard's actions are on and it listens beyond loopback: credentials travel in the clear unless a TLS proxy is in front", "listen", ln.Addr().String())
	case !isLoopback(ln.Addr()):
		// Read-only has no login: whoever reaches the address reads it.
		log.Warn("the read-only dashboard listens beyond loopback and has no login: anyone who can reach this address sees the jobs, workers and their hosts, windows, errors and dead letters; "+
			"listen on 127.0.0.1 (--listen 127.0.0.1:8081), or put an authenticating proxy in front", "listen", ln.Addr().String())
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	mode := "read-only"
	if actions {
		mode = "actions on, authentication required"
	}
	fmt.Fprintf(stdout, "kjob dashboard: http://%s/  (%s; Ctrl-C stops)\n", ln.Addr(), mode)
	return serveDashboard(ctx, ln, d, log)
}

// dashboardActions builds the dashboard's actions from the same clients
// and stores kjobctl's commands use; the returned func closes them.
func (o *opts) dashboardActions(jobs operator.JobSource, usersFile, tokensFile, allowOrigins string, auditLen int64) (*dashboard.Actions, func(), error) {
	var auth []dashboard.Authenticator
	if tokensFile != "" {
		t, err := dashboard.LoadTokens(tokensFile)
		if err != nil {
			return nil, nil, fmt.Errorf("dashboard: --auth-tokens: %w: %w", err, errUsage)
		}
		auth = append(auth, t)
	}
	if usersFile != "" {
		u, err := dashboard.LoadUsers(usersFile)
		if err != nil {
			return nil, nil, fmt.Errorf("dashboard: --auth-users: %w: %w", err, errUsage)
		}
		auth = append(auth, u) // last: its challenge makes browsers ask for a password
	}
	var origins []string
	for _, s := range strings.Split(allowOrigins, ",") {
		if s = strings.TrimSpace(s); s != "" {
			origins = append(origins, s)
		}
	}
	store, err := o.store()
	if err != nil {
		return nil, nil, err
	}
	rd, err := o.redrives()
	if err != nil {
		return nil, nil, err
	}
	audit, err := operator.NewAuditLog(o.rdb, o.namespace, auditLen)
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	pub, err := o.publisher()
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, pub.Close)
	red, err := o.redriver()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, red.Close)
	rp, err := o.replayer("kjob dashboard "+kjob.DefaultID(), 0)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, rp.Close)
	published, err := o.published()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	op, err := operator.New(operator.Config{JobSource: jobs, Topic: o.topic, DLQTopic: o.dlqTopic, Namespace: o.namespace, Publisher: pub, Redriver: red,
		ReadOpts: o.kgoOpts(), Store: store, Published: published, Redrives: rd, Replayer: rp, Now: nowFunc})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return &dashboard.Actions{Operator: op, Auth: auth, Audit: audit, AllowedOrigins: origins}, closeAll, nil
}

// dashboardJobs is where the dashboard's job list comes from: the
// schedules topic (*jobsource.Follower), or the --schedules file (jobsOf).
type dashboardJobs interface {
	inspect.JobSource
	operator.JobSource
}

// Job implements operator.JobSource with jobSet.
func (j jobsOf) Job(ctx context.Context, name string) (*schedule.Job, error) {
	s, err := j.o.jobSet(ctx, j.stderr)
	if err != nil {
		return nil, err
	}
	return s.Job(name)
}

// warnEmptyTopic logs a warning when the schedules topic has no jobs: the
// deployment's producer does not write it yet. The dashboard serves
// anyway (the job list follows the topic once the producer writes it).
func (o *opts) warnEmptyTopic(ctx context.Context, c *jobsource.Follower, log *slog.Logger) {
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	s, err := c.Set(cctx)
	switch {
	case err != nil:
		log.Warn("cannot read the schedules topic yet; the job list shows the jobs of the state topic only until it can", "topic", c.Topic(), "err", err)
	case s.Empty() && len(s.Deleted) == 0:
		log.Warn("the schedules topic has no jobs (it is empty or does not exist): a producer older than schedules as a log does not write it; "+
			"for such a deployment pass the producer's schedules file with --schedules FILE", "topic", c.Topic())
	}
}

func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// serveDashboard serves d on ln and runs its refresh loop until ctx ends.
func serveDashboard(ctx context.Context, ln net.Listener, d *dashboard.Dashboard, log *slog.Logger) error {
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Run(ctx); err != nil {
			runErr = err
			cancel()
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		// Event streams never end on their own: Shutdown waits for them
		// only until its deadline, then Close cuts them.
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
	}()
	err := srv.Serve(ln)
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err == nil {
		err = runErr
	}
	if err != nil {
		log.Error("dashboard stopped", "err", err)
	}
	return err
}
