package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// binDir holds the binaries built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kjob-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/...")
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a child process whose output goes to a log file and whose
// lines can be waited for.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []string
	subs  []chan string
}

// start runs a binary from binDir with extra environment variables. The
// process is killed at test end if still running.
func start(t testing.TB, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, bin), args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.mu.Lock()
			p.lines = append(p.lines, line)
			for _, s := range p.subs {
				select {
				case s <- line:
				default:
				}
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		<-scanDone
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		// A process that crashed on a panic: the chaos suite would
		// otherwise take it for one of its faults (it kills and stops
		// processes with signals, which print no panic).
		if n := p.panics(); n > 0 {
			t.Errorf("%s: panicked (%d panic line(s)); see its log", name, n)
		}
		if t.Failed() {
			p.mu.Lock()
			n := len(p.lines)
			from := max(0, n-40)
			t.Logf("last %d log lines of %s:\n%s", n-from, name, strings.Join(p.lines[from:], "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// hasLine reports whether the process has logged a line containing all of parts.
func (p *process) hasLine(parts ...string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if containsAll(l, parts...) {
			return true
		}
	}
	return false
}

// countLines reports how many logged lines contain all of parts.
// panics counts the lines a Go panic starts with.
func (p *process) panics() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if strings.HasPrefix(l, "panic: ") {
			n++
		}
	}
	return n
}

func (p *process) countLines(parts ...string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if containsAll(l, parts...) {
			n++
		}
	}
	return n
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// stop sends SIGTERM and waits for the process to exit, failing the test if
// it does not within timeout or exits with an error.
func (p *process) stop(t testing.TB, timeout time.Duration) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		// Where it hangs is in its goroutines: SIGQUIT makes the Go
		// runtime print them to its log, which is saved.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("%s did not exit within %v of SIGTERM; its log, with its goroutines after a SIGQUIT: %s", p.name, timeout, p.saveLog(t, "stuck"))
	}
	if p.err != nil {
		t.Errorf("%s exited with %v", p.name, p.err)
	}
}

// saveLog writes p's whole log to KJOB_TEST_ARTIFACTS (CI keeps it) or a
// temporary directory, and returns its path or why it could not.
func (p *process) saveLog(t testing.TB, what string) string {
	dir := os.Getenv("KJOB_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "not saved: " + err.Error()
	}
	p.mu.Lock()
	body := strings.Join(p.lines, "\n")
	p.mu.Unlock()
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), p.name, what))
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return "not saved: " + err.Error()
	}
	return path
}

// alive reports whether the process has not exited.
func (p *process) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process (SIGSTOP, SIGCONT, ...).
func (p *process) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v: %v", p.name, sig, err)
	}
}

// kill sends SIGKILL and waits.
func (p *process) kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die within 10s of SIGKILL", p.name)
	}
}

// ledgerEntry is one handler invocation as the http handler reports it.
type ledgerEntry struct {
	WindowID     string    `json:"window_id"`
	Job          string    `json:"job"`
	Trigger      string    `json:"trigger"`
	Attempt      int       `json:"attempt"`
	FencingToken int64     `json:"fencing_token"`
	Worker       string    `json:"worker"`
	WindowStart  time.Time `json:"window_start"`
	Received     time.Time `json:"-"`
	// Ended is when the ledger answered, or saw the caller go away; zero
	// while the request is in flight.
	Ended time.Time `json:"-"`
	// Answered reports whether the ledger answered 200 (the handler could
	// succeed); false if the caller went away first or the ledger failed
	// the attempt (ledger.fail).
	Answered bool `json:"-"`
}

// ledger is the test's independent record of executions.
type ledger struct {
	srv *httptest.Server

	mu      sync.Mutex
	entries []ledgerEntry
	// hold, when set for a job, blocks its requests until released.
	hold map[string]chan struct{}
	// arrived is signalled (non-blocking) on every request.
	arrived chan ledgerEntry
	// delay, when set, is how long the ledger takes to answer a request:
	// the handler's run time.
	delay func(ledgerEntry) time.Duration
	// fail, when set, says which requests the ledger answers 503 (after
	// their delay): the http handler fails that attempt, and it is
	// retried.
	fail func(ledgerEntry) bool
}

func newLedger(t testing.TB) *ledger {
	l := &ledger{hold: map[string]chan struct{}{}, arrived: make(chan ledgerEntry, 1024)}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e ledgerEntry
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.Received = time.Now()
		l.mu.Lock()
		i := len(l.entries)
		l.entries = append(l.entries, e)
		h, delay, fail := l.hold[e.Job], l.delay, l.fail
		l.mu.Unlock()
		select {
		case l.arrived <- e:
		default:
		}
		answered := true
		if h != nil {
			select {
			case <-h:
			case <-r.Context().Done():
				answered = false
			}
		}
		if d := time.Duration(0); answered && delay != nil {
			if d = delay(e); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-r.Context().Done():
					answered = false
				}
				t.Stop()
			}
		}
		if answered && fail != nil && fail(e) {
			answered = false
			http.Error(w, "ledger: this attempt fails (chaos: a failing job)", http.StatusServiceUnavailable)
		}
		l.mu.Lock()
		l.entries[i].Ended, l.entries[i].Answered = time.Now(), answered
		l.mu.Unlock()
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *ledger) url() string { return l.srv.URL + "/ledger" }

func (l *ledger) snapshot() []ledgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ledgerEntry(nil), l.entries...)
}

// windows returns the distinct window ids of job executed so far.
func (l *ledger) windows(job string) map[string]int {
	out := map[string]int{}
	for _, e := range l.snapshot() {
		if e.Job == job {
			out[e.WindowID]++
		}
	}
	return out
}

func freeAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
}

func waitTCP(t testing.TB, addr string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "nothing listening on %s", addr)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
