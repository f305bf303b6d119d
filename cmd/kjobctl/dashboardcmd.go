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
	"sync"
	"syscall"
	"time"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/pkg/dashboard"
)

const dashboardUsage = `kjobctl dashboard: serve a live, read-only page of the deployment: the
producer leader, the workers and the partitions they own, lag per partition
as a chart over the last minutes, jobs with their next run and last outcome,
the most recent windows and the dead-letter count.

Usage: kjobctl dashboard [--listen 127.0.0.1:8080] [flags]`

func dashboardCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		o                 opts
		listen, logLevel  string
		interval, history time.Duration
		recent            int
	)
	f := cli.NewFlags("kjobctl dashboard", dashboardUsage)
	f.SetOutput(stdout)
	o.register(f)
	f.String(&listen, "listen", "KJOB_DASHBOARD_LISTEN", "127.0.0.1:8080", "address to serve the dashboard on (it has no authentication: keep it on loopback or behind a proxy that has)")
	f.Duration(&interval, "interval", "", dashboard.DefaultInterval, "how often the page refreshes")
	f.Duration(&history, "history", "", dashboard.DefaultHistory, "how far back the lag chart reaches")
	f.Int(&recent, "recent", "", dashboard.DefaultRecent, "how many of the newest windows to list")
	f.String(&logLevel, "log-level", "KJOB_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	log, err := cli.Logger(stderr, "text", logLevel)
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	in, err := o.inspector()
	if err != nil {
		return err
	}
	defer in.Close()
	store, err := o.store()
	if err != nil {
		return err
	}
	d, err := dashboard.New(dashboard.Config{
		Inspector: in, States: store, Brokers: o.brokerList(), ClientOpts: o.kafka, Topic: o.topic,
		Namespace: o.namespace, Interval: interval, History: history, Recent: recent, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUsage)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("dashboard: --listen %q: %w (pick a free address, e.g. 127.0.0.1:8081)", listen, err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "kjob dashboard: http://%s/  (Ctrl-C stops)\n", ln.Addr())
	return serveDashboard(ctx, ln, d, log)
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
