package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// Settings common to every workload; each row of the table repeats the
// ones that matter for it.
const (
	benchPolicyTimeout = 10 * time.Second
)

var benchPolicy = jobmsg.Policy{
	Timeout:     jobmsg.Duration(benchPolicyTimeout),
	MaxAttempts: 3,
	Backoff:     jobmsg.Duration(time.Second),
	MaxBackoff:  jobmsg.Duration(time.Minute),
}

// report records one figure: as a benchmark metric and, when
// KJOB_BENCH_TABLE names a file, as a tab-separated row of the table that
// `make bench` prints.
func report(b *testing.B, figure string, value float64, unit, settings string) {
	b.Helper()
	b.ReportMetric(value, strings.ReplaceAll(unit, " ", "_"))
	b.Logf("%s: %.4g %s (%s)", figure, value, unit, settings)
	path := os.Getenv("KJOB_BENCH_TABLE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	v := strconv.FormatFloat(value, 'f', -1, 64)
	if value >= 100 {
		v = strconv.FormatFloat(value, 'f', 0, 64)
	} else if value < 100 {
		v = strconv.FormatFloat(value, 'f', 2, 64)
	}
	fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", figure, v, unit, settings)
}

// redis starts a real redis-server; performance figures from the
// in-process fallback would mean nothing.
func redis(b *testing.B) *testenv.Redis {
	b.Helper()
	r := testenv.NewRedis(b)
	if !r.Real() {
		b.Fatal("make bench needs a real redis-server on PATH (apt-get install redis-server); the in-process fallback would measure nothing useful")
	}
	return r
}

// redisPID returns the process id of r's server (from INFO), whose CPU
// use the burst reports.
func redisPID(b *testing.B, r *testenv.Redis) int {
	b.Helper()
	info, err := r.Client().Info(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				b.Fatalf("redis INFO process_id:%s: %v", v, err)
			}
			return pid
		}
	}
	b.Fatalf("redis INFO server has no process_id")
	return 0
}

var machineOnce = sync.OnceValue(func() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("machine: %s, %d CPUs%s%s, %s", model, runtime.NumCPU(), mem, kernel, runtime.Version())
})

// machine describes the machine the figures were measured on: CPU model
// (from /proc/cpuinfo), CPUs, memory, kernel and Go version.
func machine() string { return machineOnce() }

// broker starts the embedded broker in this process.
func broker(b *testing.B) []string {
	b.Helper()
	return testenv.Cluster(b, kfake.GroupMinSessionTimeout(100*time.Millisecond)).ListenAddrs()
}

func admin(b *testing.B, brokers []string) (*kgo.Client, *kadm.Client) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func createTopic(b *testing.B, adm *kadm.Client, topic string, partitions int32) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic %s: %v", topic, err)
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bins builds the binaries once per benchmark run.
func bins(b *testing.B) string {
	b.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kjob-bench-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "./cmd/...")
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		// The producer without the Kubernetes Lease backend (and so
		// without client-go), for the idle-cost comparison.
		cmd = exec.Command("go", "build", "-tags", "nokubernetes", "-o", filepath.Join(binDir, "producer-lean"), "./cmd/producer")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -tags nokubernetes: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binDir
}

// workerHelp is the usage text of the worker binary under test.
var (
	workerHelpOnce sync.Once
	workerHelp     string
)

// workerHas reports whether the worker under test has the flag name
// (e.g. "concurrency"), from its --help: the workloads pass settings
// such as KJOB_CONCURRENCY through the environment, which a worker
// without the flag ignores, and their rows say so.
func workerHas(b *testing.B, name string) bool {
	b.Helper()
	bin := filepath.Join(bins(b), "worker")
	workerHelpOnce.Do(func() {
		out, _ := exec.Command(bin, "--help").CombinedOutput()
		workerHelp = string(out)
	})
	if !strings.Contains(workerHelp, "--brokers") {
		b.Fatalf("%s --help printed no usage:\n%s", bin, workerHelp)
	}
	return strings.Contains(workerHelp, "--"+name+" ")
}

// envText describes env for a row's settings, and says when the worker
// under test has no flag for one of its variables (so it ignored it).
func envText(b *testing.B, env []string) string {
	b.Helper()
	var ignored []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "KJOB_")), "_", "-")
		if !workerHas(b, flag) {
			ignored = append(ignored, "--"+flag)
		}
	}
	text := strings.Join(env, " ")
	if len(ignored) > 0 {
		text += fmt.Sprintf(" (ignored: this worker has no %s; it runs one window at a time per partition)", strings.Join(ignored, ", "))
	}
	return text
}

// proc is a kjob binary running as its own process.
type proc struct {
	cmd   *exec.Cmd
	lines chan string // stderr lines containing the watched text
	done  chan struct{}

	// Lines containing one of the tracked texts (track): how many, and
	// the first and last of them with the time= they were logged at.
	mu      sync.Mutex
	tracked map[string]*tracked
	changed chan struct{} // signalled (without blocking) on each tracked line
}

// tracked is what a proc saw of one tracked text.
type tracked struct {
	count       int
	first, last logLine
}

// logLine is one line of a process's log with the time= it carries.
type logLine struct {
	text string
	at   time.Time
}

// start runs binary name with args; stderr lines containing watch are sent
// on lines (the rest is discarded, as a log shipper would).
func start(b *testing.B, name string, watch string, args ...string) *proc {
	b.Helper()
	return startEnv(b, name, nil, watch, args...)
}

// startEnv is start with env (KEY=value) added to this process's
// environment.
func startEnv(b *testing.B, name string, env []string, watch string, args ...string) *proc {
	b.Helper()
	return startTracking(b, name, env, watch, nil, args...)
}

// startTracking is startEnv that also keeps track of the lines containing
// each of the texts in track (see proc.seen and proc.waitCount).
func startTracking(b *testing.B, name string, env []string, watch string, track []string, args ...string) *proc {
	b.Helper()
	cmd := exec.Command(filepath.Join(bins(b), name), args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 64), done: make(chan struct{}), tracked: map[string]*tracked{}, changed: make(chan struct{}, 1)}
	for _, t := range track {
		p.tracked[t] = &tracked{}
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		// KJOB_BENCH_STDERR=dir keeps each process's standard error
		// there, for looking into a run (GODEBUG=gctrace=1, say).
		var keep *os.File
		if dir := os.Getenv("KJOB_BENCH_STDERR"); dir != "" {
			keep, _ = os.CreateTemp(dir, name+"-*.log")
			defer keep.Close()
		}
		for sc.Scan() {
			if keep != nil {
				fmt.Fprintln(keep, sc.Text())
			}
			if len(track) > 0 {
				p.track(sc.Text())
			}
			if watch != "" && strings.Contains(sc.Text(), watch) {
				select {
				case p.lines <- sc.Text():
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// track notes line under each tracked text it contains.
func (p *proc) track(line string) {
	var l *logLine
	p.mu.Lock()
	for text, t := range p.tracked {
		if !strings.Contains(line, text) {
			continue
		}
		if l == nil {
			l = &logLine{text: line, at: logTime(line)}
		}
		if t.count == 0 {
			t.first = *l
		}
		t.count++
		t.last = *l
	}
	p.mu.Unlock()
	if l != nil {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
}

// logTime returns the time= of a log line in kjob's text format, or the
// zero time.
func logTime(line string) time.Time {
	v, ok := logField(line, "time")
	if !ok {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339Nano, v)
	return at
}

// logField returns the value of key=value in a text-format log line
// (unquoted if it was quoted).
func logField(line, key string) (string, bool) {
	i := strings.Index(" "+line, " "+key+"=")
	if i < 0 {
		return "", false
	}
	rest := line[i+len(key)+1:]
	if strings.HasPrefix(rest, `"`) {
		if v, err := strconv.QuotedPrefix(rest); err == nil {
			u, err := strconv.Unquote(v)
			return u, err == nil
		}
	}
	v, _, _ := strings.Cut(rest, " ")
	return v, true
}

// seen returns what p logged so far of the tracked text.
func (p *proc) seen(text string) tracked {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tracked[text]
	if !ok {
		panic(fmt.Sprintf("%q is not tracked", text))
	}
	return *t
}

// waitCount waits until p has logged at least n lines containing the
// tracked text, and returns what it saw.
func (p *proc) waitCount(b *testing.B, text string, n int, timeout time.Duration) tracked {
	b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if t := p.seen(text); t.count >= n {
			return t
		}
		select {
		case <-p.changed:
		case <-p.done:
			if t := p.seen(text); t.count >= n {
				return t
			}
			b.Fatalf("process exited after %d of %d lines %q", p.seen(text).count, n, text)
		case <-deadline.C:
			b.Fatalf("%d of %d lines %q within %v", p.seen(text).count, n, text, timeout)
		}
	}
}

// wait waits for a watched line.
func (p *proc) wait(b *testing.B, timeout time.Duration, what string) time.Time {
	b.Helper()
	select {
	case <-p.lines:
		return time.Now()
	case <-p.done:
		b.Fatalf("process exited while waiting for %s", what)
	case <-time.After(timeout):
		b.Fatalf("no %s within %v", what, timeout)
	}
	return time.Time{}
}

// usage is a process's CPU time and memory, read from /proc.
type usage struct {
	cpu      time.Duration // user + system
	rss, hwm int64         // resident and peak resident bytes
	anon     int64         // resident anonymous bytes (heap, stacks): RSS without the mapped binary
}

func readUsage(b *testing.B, pid int) usage {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	u := usage{cpu: time.Duration(utime+stime) * time.Second / ticks}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.rss = kb << 10
		case "VmHWM":
			u.hwm = kb << 10
		case "RssAnon":
			u.anon = kb << 10
		}
	}
	return u
}

// lag returns the group's total lag on topic (end offset minus committed;
// the transaction markers are committed past, see internal/exec/partition).
func lag(ctx context.Context, adm *kadm.Client, group, topic string) (int64, error) {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return 0, err
	}
	gl, ok := lags[group]
	if !ok || gl.Error() != nil {
		return -1, gl.Error()
	}
	var total int64
	committed := false
	for _, l := range gl.Lag[topic] {
		if l.Err != nil {
			return -1, l.Err
		}
		if l.Commit.At >= 0 {
			committed = true
		}
		total += l.Lag
	}
	if !committed {
		return -1, nil
	}
	return total, nil
}

// minSamples is the fewest samples a p99 is reported from: with fewer, the
// nearest-rank p99 is the maximum, reported on its own line anyway.
const minSamples = 100

// percentile returns the p-th percentile (0..100) of sorted durations by
// nearest rank: the smallest sample with at least p% of the samples at or
// below it (rank ceil(p/100 * n)), as the peers' figures use. With fewer
// than 100 samples the p99 is the maximum.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func sortDurations(ds []time.Duration) []time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds
}
