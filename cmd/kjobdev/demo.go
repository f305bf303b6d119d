package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/testkit/devredis"
)

const demoUsage = `kjobdev demo: run kjob end to end on this machine (make demo runs it).

Starts the embedded broker (kjobdev broker), Redis (a real redis-server
when one is on PATH, else the in-process miniredis fallback, and says which),
two producers and three workers as separate processes, with example jobs that
fire every few seconds. A ledger (an HTTP endpoint the "http" jobs call)
counts executions per window, so the output shows each window ran once.
The dashboard (kjobctl dashboard) shows the deployment live at --dashboard,
and every producer and worker serves /metrics on its own loopback port.
Ctrl-C stops everything cleanly and prints a summary.

Windows are signed: the demo generates an HMAC key at start (in
DIR/signing-keys), the producers sign with it, the workers require
signatures (--signatures-required) and let the http handler call only
127.0.0.1 (--http-allow-hosts), as a production deployment should.

Every process's full log is written to DIR/logs/NAME.log (the terminal
shows the interesting lines, or all with --verbose). DIR is --dir, or a new
temp directory that is removed at exit unless --keep.

Usage: kjobdev demo [flags]`

type demoConfig struct {
	bin, dir           string
	producers, workers int
	partitions         int
	duration           time.Duration
	handoverAfter      time.Duration
	verbose            bool
	dashboard          string
	open               bool
	keep               bool
}

// selfExe is the kjobdev binary the demo runs the broker with (tests
// point it at a built kjobdev).
var selfExe = os.Executable

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c demoConfig
	f := cli.NewFlags("kjobdev demo", demoUsage)
	f.SetOutput(stdout)
	f.String(&c.bin, "bin", "", "", "directory holding the producer, worker and kjobctl binaries (default: next to kjobdev)")
	f.String(&c.dir, "dir", "", "", "working directory for data, keys and logs (DIR/logs/NAME.log; default: a new temp dir, removed at exit unless --keep)")
	f.Bool(&c.keep, "keep", "", false, "keep the temp working directory at exit (a --dir is always kept)")
	f.Int(&c.producers, "producers", "", 2, "producer replicas")
	f.Int(&c.workers, "workers", "", 3, "worker replicas")
	f.Int(&c.partitions, "partitions", "", 1, "partitions of the windows topic")
	f.Duration(&c.duration, "duration", "", 0, "stop after this long (0: run until Ctrl-C)")
	f.Duration(&c.handoverAfter, "handover-after", "", 0, "if set, SIGTERM the leading producer after this long to show a handover")
	f.Bool(&c.verbose, "verbose", "", false, "print every log line of every process")
	f.String(&c.dashboard, "dashboard", "", "127.0.0.1:8080", "serve the dashboard here (a free loopback port if it is taken; empty: no dashboard)")
	f.Bool(&c.open, "open", "", os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "", "open the dashboard in a browser (xdg-open; default: when a display is set)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if c.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.bin = filepath.Dir(exe)
	}
	need := []string{"producer", "worker"}
	if c.dashboard != "" {
		need = append(need, "kjobctl")
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			return fmt.Errorf("--bin %q: no %s binary there; build with `make build` or pass --bin: %w", c.bin, b, errUsage)
		}
	}
	temp := c.dir == ""
	if temp {
		d, err := os.MkdirTemp("", "kjob-demo-")
		if err != nil {
			return err
		}
		c.dir = d
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	d := &demoRun{cfg: c, out: stdout, seen: map[string][]execution{}, settled: map[string]int{}}
	err := d.run(ctx) // returns once every process it started has stopped
	if temp && !c.keep {
		if rerr := os.RemoveAll(c.dir); rerr != nil {
			d.say("demo: could not remove %s: %v", c.dir, rerr)
		} else {
			d.say("demo: removed the working directory %s (--keep keeps it)", c.dir)
		}
	} else {
		d.say("demo: kept the working directory %s (logs in %s)", c.dir, filepath.Join(c.dir, "logs"))
	}
	return err
}

// signingKey writes a new random HMAC key into dir/signing-keys and returns
// the directory and the key's id.
func signingKey(dir string) (keysDir, id string, err error) {
	keysDir = filepath.Join(dir, "signing-keys")
	if err := os.MkdirAll(keysDir, 0o700); err != nil {
		return "", "", err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", "", err
	}
	id = "demo-" + time.Now().UTC().Format("20060102T150405")
	if err := os.WriteFile(filepath.Join(keysDir, id), []byte(base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return keysDir, id, nil
}

type execution struct {
	Job     string
	Worker  string
	Trigger string
	Token   int64
	Late    time.Duration
}

type demoRun struct {
	cfg demoConfig
	out io.Writer

	outMu   sync.Mutex
	mu      sync.Mutex
	seen    map[string][]execution
	settled map[string]int // "job status": windows settled without running (overlap policies)
	procs   []*proc
	leader  string
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (d *demoRun) say(format string, args ...any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.out, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (d *demoRun) run(ctx context.Context) (err error) {
	d.say("demo: working directory %s", d.cfg.dir)
	defer d.stopAll()
	if err := os.MkdirAll(filepath.Join(d.cfg.dir, "logs"), 0o755); err != nil {
		return err
	}

	// Kafka: the embedded broker as its own process.
	bport, err := freePort()
	if err != nil {
		return err
	}
	broker := fmt.Sprintf("127.0.0.1:%d", bport)
	self, err := selfExe()
	if err != nil {
		return err
	}
	if err := d.start("broker", self, "broker", "--listen", broker, "--data-dir", filepath.Join(d.cfg.dir, "kafka")); err != nil {
		return err
	}
	if err := waitTCP(ctx, broker); err != nil {
		return fmt.Errorf("broker did not start: %w", err)
	}
	d.say("demo: Kafka: embedded broker (kfake) at %s", broker)

	// Redis: a real server if installed, else the labelled fallback.
	rport, err := freePort()
	if err != nil {
		return err
	}
	redisAddr := fmt.Sprintf("127.0.0.1:%d", rport)
	if bin, lerr := exec.LookPath("redis-server"); lerr == nil {
		if err := d.start("redis", bin, "--port", strconv.Itoa(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d.cfg.dir); err != nil {
			return err
		}
		if err := waitTCP(ctx, redisAddr); err != nil {
			return fmt.Errorf("redis-server did not start: %w", err)
		}
		d.say("demo: Redis: real redis-server (%s) at %s", bin, redisAddr)
	} else {
		m, err := devredis.Start(redisAddr)
		if err != nil {
			return fmt.Errorf("miniredis: %w", err)
		}
		defer m.Close()
		d.say("demo: Redis: redis-server not found on PATH; using the in-process miniredis FALLBACK at %s (install redis-server for the real thing)", redisAddr)
	}

	// The ledger: the http handler POSTs every execution here.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(d.ledger), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	ledgerURL := "http://" + ln.Addr().String() + "/ledger"

	schedules := filepath.Join(d.cfg.dir, "schedules.yaml")
	if err := os.WriteFile(schedules, []byte(strings.ReplaceAll(demoSchedules, "LEDGER", ledgerURL)), 0o644); err != nil {
		return err
	}
	d.say("demo: schedules file %s: heartbeat (every 2s) and report (every 5s) call the ledger at once; export (every 10s) holds for 8s; "+
		"digest (skip), sync (latest), refresh (replace) and fanout (allow) call a ledger that answers after a few seconds, so their windows overlap", schedules)
	d.say("demo: %d partition(s): a worker runs windows of different jobs at once (--concurrency, default 100), so heartbeat runs on time beside export; "+
		"windows of one job follow its overlap policy (see the summary and kjobctl status)", d.cfg.partitions)

	keysDir, keyID, err := signingKey(d.cfg.dir)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	d.say("demo: windows are signed with the key %s generated in %s; workers require signatures and call only 127.0.0.1", keyID, keysDir)
	env := []string{
		"KJOB_BROKERS=" + broker,
		"KJOB_REDIS_URL=redis://" + redisAddr,
		"KJOB_PARTITIONS=" + strconv.Itoa(d.cfg.partitions),
		"KJOB_NAMESPACE=demo",
		"KJOB_SESSION_TIMEOUT=6s",
		"KJOB_SIGNING_KEYS_DIR=" + keysDir,
	}
	roleEnv := map[string][]string{
		// Only the producers read the file (they import it into the
		// schedules topic); kjobctl and the dashboard read the topic.
		"producer": {"KJOB_SIGNING_KEY_ID=" + keyID, "KJOB_SCHEDULES=" + schedules},
		"worker":   {"KJOB_SIGNATURES_REQUIRED=true", "KJOB_HTTP_ALLOW_HOSTS=127.0.0.1"},
	}
	// Each process serves /healthz, /readyz and /metrics on a loopback
	// port of its own.
	var metricsURLs []string
	startRole := func(role string, n int) error {
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("%s-%d", role, i)
			port, err := freePort()
			if err != nil {
				return err
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			metricsURLs = append(metricsURLs, fmt.Sprintf("%s http://%s/metrics", name, addr))
			penv := append(append(slices.Clone(env), roleEnv[role]...), "KJOB_ID="+name, "KJOB_HTTP_ADDR="+addr)
			if err := d.startEnv(name, penv, filepath.Join(d.cfg.bin, role)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := startRole("producer", d.cfg.producers); err != nil {
		return err
	}
	if err := startRole("worker", d.cfg.workers); err != nil {
		return err
	}
	d.say("demo: started %d producers and %d workers; Ctrl-C stops everything", d.cfg.producers, d.cfg.workers)
	d.say("demo: Prometheus metrics: %s", strings.Join(metricsURLs, ", "))
	if d.cfg.dashboard != "" {
		// The dashboard's actions (trigger, backfill) publish windows, which
		// the workers accept only signed.
		if err := d.startDashboard(ctx, filepath.Join(d.cfg.bin, "kjobctl"), append(env, "KJOB_SIGNING_KEY_ID="+keyID)); err != nil {
			return err
		}
	}
	d.say("demo: operate it from another shell: export KJOB_BROKERS=%s KJOB_REDIS_URL=redis://%s KJOB_NAMESPACE=demo KJOB_SIGNING_KEYS_DIR=%s KJOB_SIGNING_KEY_ID=%s; then kjobctl status, lag, replay, trigger, pause, dlq list, schedule list",
		broker, redisAddr, keysDir, keyID)

	var handover <-chan time.Time
	if d.cfg.handoverAfter > 0 {
		handover = time.After(d.cfg.handoverAfter)
	}
	summary := time.NewTicker(15 * time.Second)
	defer summary.Stop()
	for {
		select {
		case <-ctx.Done():
			d.say("demo: stopping")
			d.stopAll()
			d.summary(true)
			return nil
		case <-summary.C:
			d.summary(false)
		case <-handover:
			d.handover()
		}
	}
}

// demoSchedules are the demo's jobs (LEDGER is replaced by the ledger's
// URL). They all share the default single partition: export holds for 8 s
// every 10 s beside heartbeat, which still runs on time, and one job per
// overlap policy has windows that outlast its cadence.
const demoSchedules = `# kjob demo schedules. heartbeat and report call the demo's ledger through the
# http handler; export stands for a slow job; the ledger answers the other
# jobs after ?sleep=, so their windows overlap and their overlap policies show.
jobs:
  - name: heartbeat
    schedule: "@every 2s"
    handler: http
    payload: {url: "LEDGER"}
    timeout: 5s
    catchup: 1m
  - name: report
    schedule: "*/5 * * * * *"   # seconds field: every 5 s
    timezone: Europe/Berlin
    handler: http
    payload: {url: "LEDGER"}
    timeout: 5s
    catchup: 1m
  - name: export
    schedule: "@every 10s"
    handler: sleep
    payload: {duration: 8s}
    timeout: 20s
    catchup: 1m
  - name: digest               # skip: a window due while the last one runs is skipped
    schedule: "@every 3s"
    handler: http
    payload: {url: "LEDGER?sleep=5s"}
    timeout: 20s
    overlap: skip
  - name: sync                 # latest: only the newest waiting window runs next
    schedule: "@every 2s"
    handler: http
    payload: {url: "LEDGER?sleep=5s"}
    timeout: 20s
    overlap: latest
  - name: refresh              # replace: a new window cancels the running one
    schedule: "@every 4s"
    handler: http
    payload: {url: "LEDGER?sleep=6s"}
    timeout: 20s
    overlap: replace
  - name: fanout               # allow: windows run side by side
    schedule: "@every 2s"
    handler: http
    payload: {url: "LEDGER?sleep=3s"}
    timeout: 20s
    overlap: allow
`

func (d *demoRun) ledger(w http.ResponseWriter, r *http.Request) {
	var b struct {
		WindowID     string    `json:"window_id"`
		Job          string    `json:"job"`
		Trigger      string    `json:"trigger"`
		Worker       string    `json:"worker"`
		FencingToken int64     `json:"fencing_token"`
		WindowStart  time.Time `json:"window_start"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	late := time.Since(b.WindowStart)
	d.mu.Lock()
	d.seen[b.WindowID] = append(d.seen[b.WindowID], execution{Job: b.Job, Worker: b.Worker, Trigger: b.Trigger, Token: b.FencingToken, Late: late})
	n := len(d.seen[b.WindowID])
	d.mu.Unlock()
	mark := "executed once"
	if n > 1 {
		mark = fmt.Sprintf("EXECUTED %d TIMES", n)
	}
	d.say("ledger: %-40s by %-9s token %-4d %s (%.1f ms after window start)", b.WindowID, b.Worker, b.FencingToken, mark, float64(late.Microseconds())/1000)
	// A job's run time: the ledger answers after ?sleep= (the handler's
	// context cancels the request early under overlap replace).
	if sleep, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil && sleep > 0 {
		t := time.NewTimer(sleep)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	}
}

func (d *demoRun) summary(final bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var lates, fast []time.Duration
	dups := 0
	for _, ex := range d.seen {
		if len(ex) > 1 {
			dups++
		}
		// Operators' windows (kjobctl trigger, backfill, resume
		// --catchup) start long before they run, and so do the producer's
		// own catch-up windows: only windows published on time measure
		// lateness.
		if ex[0].Trigger == "schedule" {
			lates = append(lates, ex[0].Late)
			if ex[0].Job == "heartbeat" {
				fast = append(fast, ex[0].Late)
			}
		}
	}
	q := func(ds []time.Duration, p float64) string {
		if len(ds) == 0 {
			return "-"
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return fmt.Sprintf("%.1f ms", float64(ds[int(p*float64(len(ds)-1))].Microseconds())/1000)
	}
	label := "summary"
	if final {
		label = "final summary"
	}
	d.say("demo %s: %d windows executed via the ledger, %d executed more than once (kjobctl replay --rerun and dlq redrive run windows again on purpose); lateness of trigger=schedule windows (start -> handler; catch-up, backfill and manual windows left out) p50 %s, p99 %s, max %s",
		label, len(d.seen), dups, q(lates, 0.5), q(lates, 0.99), q(lates, 1))
	d.say("demo %s: heartbeat, the fast job beside the slow export on the same partition: %d windows, lateness p50 %s, p99 %s, max %s",
		label, len(fast), q(fast, 0.5), q(fast, 0.99), q(fast, 1))
	var settled []string
	for _, k := range slices.Sorted(maps.Keys(d.settled)) {
		settled = append(settled, fmt.Sprintf("%s %d", k, d.settled[k]))
	}
	if len(settled) == 0 {
		settled = append(settled, "none yet")
	}
	d.say("demo %s: settled without running by their overlap policy: %s", label, strings.Join(settled, ", "))
}

// handover stops the producer that currently leads (the one whose log last
// said it is publishing as leader) to show a standby taking over.
func (d *demoRun) handover() {
	d.mu.Lock()
	leader := d.leader
	d.mu.Unlock()
	for _, p := range d.procs {
		if p.name == leader {
			d.say("demo: sending SIGTERM to the leading producer %s to show a handover", leader)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			return
		}
	}
	d.say("demo: no leading producer known yet; skipping the handover")
}

// startDashboard runs kjobctl dashboard as a child, on --dashboard or, if
// that address is taken, on a free loopback port, and opens it if asked.
func (d *demoRun) startDashboard(ctx context.Context, kjobctl string, env []string) error {
	addr := d.cfg.dashboard
	if l, err := net.Listen("tcp", addr); err != nil {
		port, perr := freePort()
		if perr != nil {
			return perr
		}
		d.say("demo: %s is taken (%v); serving the dashboard on a free port instead", addr, err)
		addr = fmt.Sprintf("127.0.0.1:%d", port)
	} else {
		l.Close()
	}
	if err := d.startEnv("dashboard", env, kjobctl, "dashboard", "--listen", addr, "--interval", "1s", "--history", "5m"); err != nil {
		return err
	}
	if err := waitTCP(ctx, addr); err != nil {
		return fmt.Errorf("dashboard did not start: %w", err)
	}
	url := "http://" + addr + "/"
	d.say("demo: dashboard: %s", url)
	if d.cfg.open {
		if err := exec.Command("xdg-open", url).Start(); err != nil {
			d.say("demo: could not open a browser (%v); open %s yourself", err, url)
		}
	}
	return nil
}

func (d *demoRun) start(name, bin string, args ...string) error {
	return d.startEnv(name, nil, bin, args...)
}

func (d *demoRun) startEnv(name string, env []string, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr() // Ctrl-C reaches only us; we stop children in order
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	logf, err := os.Create(filepath.Join(d.cfg.dir, "logs", name+".log"))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("log of %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		d.relay(name, io.TeeReader(pr, logf))
		_, _ = io.Copy(logf, pr) // whatever relay left (a line too long to scan)
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		<-relayed // the log holds everything the process wrote
		logf.Close()
		close(p.done)
	}()
	d.mu.Lock()
	d.procs = append(d.procs, p)
	d.mu.Unlock()
	return nil
}

// interesting picks the log lines the demo shows by default: leadership,
// partition ownership, publications and failures.
var interesting = []string{
	"lease acquired", "lease lost", "lease released", "acquired", "publishing as leader", "published",
	"assigned", "revoked", "lost", "dead-letter", "level=WARN", "level=ERROR", "listening", "skipping",
	"window skipped", "replaced it",
}

// skippedLine matches a worker's log line for a window settled without
// running (job, status).
var skippedLine = regexp.MustCompile(`msg="window skipped".* job=(\S+) .*status=(\S+)`)

func (d *demoRun) relay(name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "publishing as leader") {
			d.mu.Lock()
			d.leader = name
			d.mu.Unlock()
		}
		if m := skippedLine.FindStringSubmatch(line); m != nil {
			d.mu.Lock()
			d.settled[m[1]+" "+m[2]]++
			d.mu.Unlock()
		}
		show := d.cfg.verbose
		for _, s := range interesting {
			if strings.Contains(line, s) {
				show = true
				break
			}
		}
		if show {
			d.say("[%s] %s", name, line)
		}
	}
}

// stopAll stops workers and producers first (SIGTERM, so they finish
// in-flight work, commit and leave), then Redis and the broker.
func (d *demoRun) stopAll() {
	d.mu.Lock()
	procs := d.procs
	d.procs = nil
	d.mu.Unlock()
	order := func(p *proc) int {
		switch {
		case strings.HasPrefix(p.name, "worker"), strings.HasPrefix(p.name, "producer"), p.name == "dashboard":
			return 0
		case p.name == "redis":
			return 1
		}
		return 2
	}
	for stage := 0; stage <= 2; stage++ {
		var wait []*proc
		for _, p := range procs {
			if order(p) == stage {
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
				wait = append(wait, p)
			}
		}
		for _, p := range wait {
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				d.say("demo: %s did not stop within 20s; killing it", p.name)
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	}
}

func waitTCP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
