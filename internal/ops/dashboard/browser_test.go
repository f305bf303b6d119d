package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// chromium finds the browser, or skips the test where none is installed
// unless KJOB_TEST_REQUIRE_CHROMIUM=1 (CI sets it) turns that into a
// failure.
func chromium(t *testing.T) string {
	for _, name := range []string{os.Getenv("KJOB_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("KJOB_TEST_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("KJOB_TEST_REQUIRE_CHROMIUM=1 but no chromium on PATH: install it (apt-get install chromium) or set KJOB_CHROMIUM")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); the dashboard's browser test did not run")
	return ""
}

// deployment is what a dashboard looks at: the embedded broker, a real
// Redis, and optionally a leading producer and a worker running jobs.
type deployment struct {
	t       *testing.T
	ctx     context.Context
	brokers []string
	rdb     *redis.Client
	store   *dedupe.Store
	jobs    []*schedule.Job
	p       *producer.Producer
	run     func(name string, fn func(context.Context) error)
}

const ns, topic, group = "dash", "kjob.windows", "dash-workers"

func newDeployment(t *testing.T, ctx context.Context, wg *sync.WaitGroup, jobsYAML string) *deployment {
	t.Helper()
	d := &deployment{t: t, ctx: ctx, brokers: testenv.Brokers(t), rdb: testenv.NewRedis(t).Client()}
	f, err := schedule.Parse("s.yaml", []byte(jobsYAML))
	if err != nil {
		t.Fatal(err)
	}
	d.jobs = f.Jobs
	d.store, err = dedupe.New(d.rdb, dedupe.Config{Namespace: ns, ClaimTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.run = func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	return d
}

// startProducer runs a producer leading with a Redis lease.
func (d *deployment) startProducer() {
	d.t.Helper()
	log := slog.New(slog.DiscardHandler)
	lock, err := lease.NewRedisLock(d.rdb, names.Deployment{Namespace: ns}.LeaseKey())
	if err != nil {
		d.t.Fatal(err)
	}
	elector, err := lease.NewElector(lease.Config{Lock: lock, Holder: "producer-test", Logger: log})
	if err != nil {
		d.t.Fatal(err)
	}
	d.p, err = producer.New(producer.Config{Brokers: d.brokers, Topic: topic, Jobs: d.jobs, Elector: elector, TransactionalID: "dash-txn", Logger: log})
	if err != nil {
		d.t.Fatal(err)
	}
	d.run("producer", d.p.Run)
	testenv.Eventually(d.t, 30*time.Second, func() bool { return d.p.Status().Leading }, "producer not leading")
}

// startWorker runs a worker with the given handlers.
func (d *deployment) startWorker(handlers map[string]handler.HandlerFunc) {
	d.t.Helper()
	mux := handler.NewMux()
	for name, h := range handlers {
		mux.HandleFunc(name, h)
	}
	w, err := worker.New(worker.Config{Brokers: d.brokers, Topic: topic, Group: group, Store: d.store, Handler: mux,
		WorkerID: "worker-test", ClaimExtendInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		d.t.Fatal(err)
	}
	d.run("worker", w.Run)
}

// serve runs a dashboard over the deployment (with actions if a is set)
// and returns its URL.
func (d *deployment) serve(a *dashboard.Actions) string {
	d.t.Helper()
	in, err := inspect.New(inspect.Config{Brokers: d.brokers, Redis: d.rdb, Namespace: ns, Topic: topic, Group: group, Jobs: d.jobs})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(in.Close)
	tl, err := inspect.NewTimeLag(inspect.TimeLagConfig{Brokers: d.brokers, Topic: topic, Group: group, States: d.store})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(tl.Close)
	dash, err := dashboard.New(dashboard.Config{Inspector: in, States: d.store, TimeLag: tl, Runs: d.store, Brokers: d.brokers, Topic: topic, Namespace: ns,
		Interval: 250 * time.Millisecond, History: 5 * time.Minute, Actions: a, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		d.t.Fatal(err)
	}
	d.run("dashboard", dash.Run)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.t.Fatal(err)
	}
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	d.t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// browser is a headless Chromium tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	actx context.Context // the allocator: new tabs come from it
}

func newBrowser(t *testing.T, ctx context.Context) *browser {
	t.Helper()
	bin := chromium(t)
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1300),
	)...)
	t.Cleanup(acancel)
	b := &browser{t: t, actx: actx}
	b.ctx = b.tab()
	return b
}

// tab opens a new tab (the first one starts the browser), which accepts
// every confirm() dialog.
func (b *browser) tab() context.Context {
	b.t.Helper()
	parent := b.actx
	if b.ctx != nil {
		parent = b.ctx // a tab of the same browser
	}
	ctx, cancel := chromedp.NewContext(parent)
	b.t.Cleanup(cancel)
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatalf("start the browser: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			// Not from the listener's goroutine (see chromedp.Listen).
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return ctx
}

func (b *browser) navigate(ctx context.Context, url string) {
	b.t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("navigate to %s: %v", url, err)
	}
}

// wait waits, inside the page, until the predicate js holds.
func (b *browser) wait(ctx context.Context, what, js string) {
	b.t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("main")||document.body).innerText`))
		b.t.Fatalf("the page never showed %s (%v); it shows:\n%s", what, err, body)
	}
}

func (b *browser) click(ctx context.Context, sel string) {
	b.t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(sel)); err != nil {
		b.t.Fatalf("click %s: %v", sel, err)
	}
}

// screenshot saves the page as name in KJOB_TEST_ARTIFACTS (or a temp dir).
func (b *browser) screenshot(ctx context.Context, name string) {
	b.t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if !strings.HasPrefix(string(shot), "\x89PNG\r\n\x1a\n") {
		b.t.Fatalf("screenshot is not a PNG")
	}
	dir := os.Getenv("KJOB_TEST_ARTIFACTS")
	if dir == "" {
		dir = b.t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatalf("KJOB_TEST_ARTIFACTS=%s: %v", dir, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}

func text(sel string) string {
	return fmt.Sprintf(`((document.querySelector(%q)||{}).textContent||"")`, sel)
}

// TestDashboardInBrowser runs a real pipeline (a leading producer with a
// Redis lease, a worker, a 1-second job, a slow job that holds up the
// partition, and one poison record) against the embedded broker and a real
// Redis, serves the dashboard, and drives it in headless Chromium: the page
// must show the time lag (headline card and a chart line per partition),
// the live leader, the worker with its address (no ephemeral port) and the
// partition it owns, the job with its next run, windows done by the worker,
// the dead letter and the offset lag chart, pushed over the event stream.
// It saves a screenshot (dashboard.png).
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	d := newDeployment(t, ctx, &wg, `jobs:
  - name: tick
    schedule: "@every 1s"
    handler: noop
    catchup: 1m
  - name: slow
    schedule: "@every 4s"
    handler: sleep
    catchup: 1m
  - name: nightly
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    handler: noop
`)
	d.startProducer()
	d.startWorker(map[string]handler.HandlerFunc{
		"noop": func(context.Context, *handler.Job) error { return nil },
		"sleep": func(ctx context.Context, _ *handler.Job) error {
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		},
	})
	// One poison record, which the worker dead-letters.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := pcl.ProduceSync(ctx, &kgo.Record{Key: []byte("tick"), Value: []byte("not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pcl.Close()
	// A stall a worker reports (its dead-letter topic refusing letters).
	now := time.Now()
	if err := d.store.ReportStalls(ctx, "worker-stuck", []dedupe.Stall{{Partition: 0, Offset: 7, Since: now.Add(-time.Minute), Until: now.Add(10 * time.Minute),
		Reason: "its dead letter cannot be written: TOPIC_AUTHORIZATION_FAILED"}}); err != nil {
		t.Fatal(err)
	}
	url := d.serve(nil)

	b.navigate(b.ctx, url+"/")
	b.wait(b.ctx, "the stalled partition", `[...document.querySelectorAll("#stalls li")].some(li => li.textContent.startsWith("Partition 0 cannot move at offset 7") && li.textContent.includes("worker-stuck") && li.textContent.includes("TOPIC_AUTHORIZATION_FAILED"))`)
	b.wait(b.ctx, "the live event stream", text("#conn")+` === "live"`)
	b.wait(b.ctx, "the time lag headline", `/^(≥ )?[0-9.]+(µs|ms|s|m)/.test(`+text("#time-lag")+`) && `+text("#time-lag-meta")+` !== ""`)
	b.wait(b.ctx, "the leader", text("#leader-holder")+` === "producer-test"`)
	b.wait(b.ctx, "the worker at its address, without the port, owning partition 0", `[...document.querySelectorAll("#members tbody tr")].some(r => r.cells[0].textContent === "worker-test" && r.cells[1].textContent === "127.0.0.1" && r.cells[2].textContent === "0")`)
	b.wait(b.ctx, "the jobs with their next run", `[...document.querySelectorAll("#jobs tbody tr")].some(r => r.cells[0].textContent === "tick" && r.cells[0].querySelector("a") && r.cells[5].textContent.startsWith("in ")) &&
		[...document.querySelectorAll("#jobs tbody tr")].some(r => r.cells[0].textContent === "nightly" && r.cells[2].textContent === "Europe/Berlin")`)
	b.wait(b.ctx, "windows done by the worker", `[...document.querySelectorAll("#recent tbody tr")].filter(r => r.cells[0].textContent.startsWith("tick@") && r.cells[3].textContent === "done" && r.cells[6].textContent === "worker-test").length >= 3`)
	b.wait(b.ctx, "the poison record listed as invalid", `[...document.querySelectorAll("#recent tbody tr")].some(r => r.cells[0].textContent.startsWith("invalid record") && r.cells[3].textContent === "invalid")`)
	b.wait(b.ctx, "the dead letter", text("#dead-letters")+` === "1"`)
	// The slow window holds up the partition (the windows behind it wait):
	// the time lag rises above a second while it runs. 60 points: 15 s of
	// history, a few of the slow job's runs.
	b.wait(b.ctx, "a time lag line for partition 0 that rose above 1 s", `(() => { const l = document.querySelector('#age-chart polyline[data-partition="0"]'); return !!l && l.getAttribute("points").trim().split(" ").length >= 60 && /max (1|2|3|4|5|6|7|8|9)[0-9.]*s/.test(`+text("#age-span")+`) })()`)
	b.wait(b.ctx, "an offset lag line for partition 0", `(() => { const l = document.querySelector('#lag-chart polyline[data-partition="0"]'); return !!l && l.getAttribute("points").trim().split(" ").length >= 4 })()`)
	b.wait(b.ctx, "partition 0's time lag and windows", `[...document.querySelectorAll("#partitions tbody tr")].some(r => r.cells[0].textContent === "0" && r.cells[2].textContent !== "?" && /^[0-9]/.test(r.cells[3].textContent))`)
	b.screenshot(b.ctx, "dashboard.png")
}

// TestDashboardOneRunningWindow: one window running, no worker left in the
// group. The offset lag of its partition is 2 (the window and its
// transaction marker); the page shows it as 1 window behind, with the
// window and its age. Before the time lag, the card read 2.
func TestDashboardOneRunningWindow(t *testing.T) {
	b := newBrowser(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	d := newDeployment(t, ctx, &wg, "jobs:\n  - name: report\n    schedule: \"0 * * * *\"\n    handler: noop\n")
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.TransactionalID("one-window"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-20 * time.Second).Truncate(time.Second)
	rec, err := jobmsg.Record(topic, &jobmsg.Message{ID: jobmsg.WindowID("report", start), Job: "report", Handler: "noop",
		Window: jobmsg.Window{Start: start, End: start.Add(time.Hour)}, ScheduledAt: start, PublishedAt: start, Trigger: jobmsg.TriggerSchedule,
		Payload: json.RawMessage(`{}`), Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Hour), MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.Claim(ctx, jobmsg.WindowID("report", start), "worker-gone"); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: rec.Offset, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	url := d.serve(nil)
	b.navigate(b.ctx, url+"/")
	b.wait(b.ctx, "partition 0 with offset lag 2 and 1 window, the running one", `[...document.querySelectorAll("#partitions tbody tr")].some(r => r.cells[0].textContent === "0" && r.cells[7].textContent === "2" && r.cells[3].textContent === "1" && r.cells[4].textContent.endsWith("(running)"))`)
	b.wait(b.ctx, "1 window behind", text("#total-lag")+` === "1"`)
	b.wait(b.ctx, "the running window's age as the time lag", `/^(2[0-9]|3[0-9])(\.[0-9]+)?s$/.test(`+text("#time-lag")+`) && `+text("#time-lag-meta")+`.includes("report@")`)
}

// TestJobPageInBrowser: a job's page shows its runs from the run history
// with their durations, the success rate and p50/p95 duration, and a chart
// with a point per run. It saves a screenshot (dashboard-job.png).
func TestJobPageInBrowser(t *testing.T) {
	b := newBrowser(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	d := newDeployment(t, ctx, &wg, "jobs:\n  - name: report\n    schedule: \"*/1 * * * *\"\n    handler: http\n")
	d.startProducer()
	// An hour of runs, one a minute: mostly done in 0.8-2.3 s, every 9th
	// failed and retried, one dead-lettered.
	now := time.Now().UTC().Truncate(time.Minute)
	var runs []dedupe.Run
	tok := int64(0)
	for i := 60; i > 0; i-- {
		start := now.Add(-time.Duration(i) * time.Minute)
		id := jobmsg.WindowID("report", start)
		st := start.Add(15 * time.Millisecond)
		d := 800*time.Millisecond + time.Duration((i*37)%16)*100*time.Millisecond
		tok++
		switch {
		case i == 7:
			runs = append(runs, dedupe.Run{WindowID: id, Trigger: "schedule", Outcome: dedupe.RunDeadLettered, WindowStart: start, Started: st, Finished: st.Add(5 * time.Second),
				Attempt: 3, Token: tok, Worker: "worker-1", ScheduleVersion: 3, Error: "http: POST http://billing.internal/report: 500 Internal Server Error"})
			continue
		case i%9 == 0:
			runs = append(runs, dedupe.Run{WindowID: id, Trigger: "schedule", Outcome: dedupe.RunFailed, WindowStart: start, Started: st, Finished: st.Add(3 * time.Second),
				Attempt: 1, Token: tok, Worker: "worker-2", ScheduleVersion: 3, Error: "http: POST http://billing.internal/report: context deadline exceeded"})
			tok++
			st = st.Add(5 * time.Second)
			runs = append(runs, dedupe.Run{WindowID: id, Trigger: "schedule", Outcome: dedupe.RunDone, WindowStart: start, Started: st, Finished: st.Add(d),
				Attempt: 2, Token: tok, Worker: "worker-2", ScheduleVersion: 3})
			continue
		}
		runs = append(runs, dedupe.Run{WindowID: id, Trigger: "schedule", Outcome: dedupe.RunDone, WindowStart: start, Started: st, Finished: st.Add(d),
			Attempt: 1, Token: tok, Worker: "worker-1", ScheduleVersion: 3})
	}
	if err := d.store.AppendRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	stats := dedupe.SummarizeRuns(runs)
	url := d.serve(nil)

	b.navigate(b.ctx, url+"/job.html?name=report")
	b.wait(b.ctx, "the job's schedule", text("#schedule")+` === "*/1 * * * *"`)
	b.wait(b.ctx, fmt.Sprintf("%d runs, newest first, with durations", len(runs)), `(() => { const rows = [...document.querySelectorAll("#runs tbody tr")];
		return rows.length === `+fmt.Sprint(len(runs))+` && rows.every(r => /^[0-9.]+(µs|ms|s)$/.test(r.cells[5].textContent)) &&
			rows[0].cells[1].textContent === "report@`+now.Add(-time.Minute).Format(time.RFC3339)+`" })()`)
	b.wait(b.ctx, "each run's schedule version", `(() => { const c = [...document.querySelectorAll("#runs tbody tr")].map(r => r.cells[2].textContent); return c.length > 0 && c.every(v => v === "v3") })()`)
	b.wait(b.ctx, "the dead-lettered run with its error", `[...document.querySelectorAll("#runs tbody tr")].some(r => r.cells[4].textContent === "dead-lettered" && r.cells[5].textContent === "5s" && r.cells[9].textContent.includes("500 Internal Server Error"))`)
	want := fmt.Sprintf("%.1f%%", 100*stats.SuccessRate)
	want = strings.Replace(want, ".0%", "%", 1)
	b.wait(b.ctx, "the success rate "+want, text("#success-rate")+fmt.Sprintf(` === %q`, want))
	b.wait(b.ctx, "p50 and p95", text("#p50")+fmt.Sprintf(` === %q && `, fmtSecs(stats.P50))+text("#p95")+fmt.Sprintf(` === %q`, fmtSecs(stats.P95)))
	b.wait(b.ctx, "a point per run in the duration chart", `document.querySelectorAll("#duration-chart circle.run").length === `+fmt.Sprint(len(runs))+
		` && document.querySelectorAll("#duration-chart circle.run.failed").length === `+fmt.Sprint(stats.ByOutcome[dedupe.RunFailed]+stats.ByOutcome[dedupe.RunDeadLettered]))
	b.screenshot(b.ctx, "dashboard-job.png")
}

// fmtSecs formats d as the page's secs() does for 1 s to 60 s.
func fmtSecs(d time.Duration) string {
	s := fmt.Sprintf("%.2f", d.Seconds())
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "s"
}

// TestActionsInBrowser: with the actions on and a worker running, an
// operator signed in with basic auth presses "Trigger now" on a job's page
// and watches the manual window run on the main page; the audit log shows
// the action. Then a page of another origin posts a trigger with the
// operator's credentials (403), and a tab without credentials is refused
// the page and the action (401); neither publishes a window nor writes an
// audit record. It saves a screenshot (dashboard-actions.png).
func TestActionsInBrowser(t *testing.T) {
	b := newBrowser(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	d := newDeployment(t, ctx, &wg, "jobs:\n  - name: report\n    schedule: \"0 3 * * *\"\n    handler: noop\n")
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.RecordPartitioner(names.Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, tp := range []string{topic, topic + ".dlq"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, tp); err != nil {
			t.Fatal(err)
		}
	}
	d.startWorker(map[string]handler.HandlerFunc{"noop": func(context.Context, *handler.Job) error { return nil }})
	users, _ := usersFile(t)
	rd, _ := operator.NewRedrives(d.rdb, ns)
	audit, _ := operator.NewAuditLog(d.rdb, ns, 0)
	rp, err := operator.NewReplayer(operator.ReplayerConfig{Brokers: d.brokers, Topic: topic, Store: d.store, IssuedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	op, err := operator.New(operator.Config{Jobs: d.jobs, Topic: topic, DLQTopic: topic + ".dlq", Publisher: cl, Redriver: cl,
		ReadOpts: []kgo.Opt{kgo.SeedBrokers(d.brokers...)}, Store: d.store, Redrives: rd, Replayer: rp})
	if err != nil {
		t.Fatal(err)
	}
	url := d.serve(&dashboard.Actions{Operator: op, Auth: []dashboard.Authenticator{users}, Audit: audit})

	// Signed in: every request of this tab carries the credentials.
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+testPassword))
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	b.navigate(b.ctx, url+"/job.html?name=report")
	b.wait(b.ctx, "the signed-in user and the actions", text("#who")+` === "signed in as alice" && !document.querySelector("#trigger").closest("section").hidden`)
	b.click(b.ctx, "#trigger")
	b.wait(b.ctx, "the trigger's result", text("#action-result")+`.startsWith("published report@")`)
	var id string
	id, err = chromedp.Run(b.ctx, chromedp.Evaluate[string](text("#action-result")+`.replace("published ", "")`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(id, "#manual-") {
		t.Fatalf("triggered %q, want a manual window", id)
	}
	b.navigate(b.ctx, url+"/")
	b.wait(b.ctx, "the manual window done by the worker", fmt.Sprintf(`[...document.querySelectorAll("#recent tbody tr")].some(r => r.cells[0].textContent === %q && r.cells[1].textContent === "manual" && r.cells[3].textContent === "done" && r.cells[6].textContent === "worker-test")`, id))
	b.wait(b.ctx, "the audit log", `(() => { const rows = [...document.querySelectorAll("#audit tbody tr")]; return rows.length === 2 &&
		rows[0].cells[1].textContent === "alice" && rows[0].cells[2].textContent === "trigger" && rows[0].cells[4].textContent === "ok" &&
		rows[1].cells[4].textContent === "started" })()`)
	b.screenshot(b.ctx, "dashboard-actions.png")
	ends := func() int64 {
		o, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := o.Lookup(topic, 0)
		return x.Offset
	}
	before := ends()

	// Watch the statuses of the action requests the browser sends.
	var mu sync.Mutex
	statuses := map[string][]int64{} // tab -> statuses of POST /api/actions/trigger
	watch := func(tab context.Context, name string) {
		err := chromedp.Listen(tab, func(ev any) {
			if e, ok := ev.(*network.EventResponseReceived); ok && strings.HasSuffix(e.Response.URL, "/api/actions/trigger") {
				mu.Lock()
				statuses[name] = append(statuses[name], e.Response.Status)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got := func(name string) []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), statuses[name]...)
	}

	// A page of another origin posts with the operator's credentials: the
	// browser sends them (this tab adds them to every request), and the
	// Origin check refuses it.
	evil := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/blank" {
			fmt.Fprint(w, "<!doctype html><title>blank</title>")
			return
		}
		fmt.Fprintf(w, `<!doctype html><title>free prizes</title><script>
fetch(%q, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body: '{"job":"report"}'})
  .then(() => { document.title = "sent" }, (e) => { document.title = "error " + e });
</script>`, url+"/api/actions/trigger")
	})}
	eln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go evil.Serve(eln)
	defer evil.Close()
	watch(b.ctx, "foreign")
	b.navigate(b.ctx, "http://"+eln.Addr().String()+"/")
	b.wait(b.ctx, "the foreign page's request sent", `document.title === "sent"`)
	testenv.Eventually(t, 10*time.Second, func() bool { return len(got("foreign")) == 1 }, "no response to the foreign page's request")
	if s := got("foreign"); s[0] != http.StatusForbidden {
		t.Fatalf("the foreign origin's action: HTTP %d, want 403", s[0])
	}

	// A tab without credentials: the page and the action are refused.
	anon := b.tab()
	watch(anon, "anonymous")
	var docStatus int64
	if err := chromedp.Listen(anon, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && e.Type == network.ResourceTypeDocument {
			mu.Lock()
			docStatus = e.Response.Status
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	// Headless Chromium cannot ask for a password: the navigation ends in
	// ERR_INVALID_AUTH_CREDENTIALS after the 401.
	if err := chromedp.Do(anon, chromedp.Navigate(url+"/")); err != nil && !strings.Contains(err.Error(), "ERR_INVALID_AUTH_CREDENTIALS") {
		t.Fatalf("navigate without credentials: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return docStatus != 0 }, "no response to the page without credentials")
	mu.Lock()
	if docStatus != http.StatusUnauthorized {
		t.Fatalf("the page without credentials: HTTP %d, want 401", docStatus)
	}
	mu.Unlock()
	// The action, sent from a page that has no credentials for the
	// dashboard.
	b.navigate(anon, "http://"+eln.Addr().String()+"/blank")
	if _, err := chromedp.Run(anon, chromedp.Evaluate[any](fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"job":"report"}'}).then(() => { document.title = "sent" }, (e) => { document.title = "error " + e }), 1`, url+"/api/actions/trigger"))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return len(got("anonymous")) == 1 }, "no response to the anonymous action")
	if s := got("anonymous"); s[0] != http.StatusUnauthorized {
		t.Fatalf("the action without credentials: HTTP %d, want 401", s[0])
	}

	// Nothing happened: no window published, no audit record.
	if after := ends(); after != before {
		t.Fatalf("a refused request published: end offset %d -> %d", before, after)
	}
	recs, err := audit.Recent(ctx, 10)
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit records after the refused requests: %+v, %v; want the trigger's two only", recs, err)
	}
}

// usersFile writes a users file with alice's bcrypt-hashed password.
func usersFile(t *testing.T) (*dashboard.Users, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users")
	hash, err := bcryptHash(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("alice:"+hash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := dashboard.LoadUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	return u, hash
}

// TestSchedulesInBrowser drives the schedules page in headless Chromium
// against the real producer leader (specleader): the list shows the jobs
// with version, pause note and who set them; a job's view shows its spec
// and history with diffs; saving an edit after bob changed the job shows
// the conflict naming bob and the version; reverting to version 2 from the
// history sets its spec as version 4. It saves schedules.png,
// schedule-conflict.png and schedule-revert.png.
func TestSchedulesInBrowser(t *testing.T) {
	b := newBrowser(t, context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, sch, srv := newSchedulesEnv(t)
	zero := int64(0)
	submit := func(actor string, e specs.Edit, note string) {
		t.Helper()
		if _, err := sch.Submit(ctx, actor, []specs.Edit{e}, note); err != nil {
			t.Fatalf("%s %s: %v", e.Op, e.Job, err)
		}
	}
	submit("alice", specs.Edit{Op: specs.OpCreate, Job: "report", ExpectVersion: &zero, Spec: &schedule.Spec{Schedule: "30 2 * * *", Timezone: "Europe/Berlin", Handler: "http",
		Payload: json.RawMessage(`{"url":"http://127.0.0.1:8080/hook"}`)}}, "nightly report")
	submit("alice", specs.Edit{Op: specs.OpUpdate, Job: "report", Spec: &schedule.Spec{Schedule: "30 3 * * *", Timezone: "Europe/Berlin", Handler: "http", Timeout: "5m",
		Payload: json.RawMessage(`{"url":"http://127.0.0.1:8080/hook"}`)}}, "an hour later")
	submit("bob", specs.Edit{Op: specs.OpCreate, Job: "cleanup", Spec: &schedule.Spec{Schedule: "*/15 * * * *", Handler: "noop"}}, "")
	submit("bob", specs.Edit{Op: specs.OpPause, Job: "cleanup", Note: "disk maintenance, INC-42"}, "disk maintenance, INC-42")
	submit("carol", specs.Edit{Op: specs.OpCreate, Job: "launch", Spec: &schedule.Spec{At: "2026-12-01T08:00:00Z", Handler: "http"}}, "one-shot")

	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+testPassword))
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	b.navigate(b.ctx, srv.URL+"/schedules.html")
	b.wait(b.ctx, "three schedules, cleanup paused", `document.querySelectorAll("#schedules tbody tr").length === 3 && `+text("#schedules")+`.includes("paused: disk maintenance, INC-42")`)
	b.wait(b.ctx, "versions and actors", text("#schedules")+`.includes("v2") && `+text("#schedules")+`.includes("bob") && `+text("#who")+` === "signed in as alice"`)
	b.screenshot(b.ctx, "schedules.png")

	b.navigate(b.ctx, srv.URL+"/schedules.html?job=report")
	b.wait(b.ctx, "the spec and history with diffs", text("#fields")+`.includes("30 3 * * *") && `+text("#history")+`.includes("30 2 * * *") && `+text("#history")+`.includes("an hour later")`)
	// bob changes the job after the page read version 2.
	v2 := int64(2)
	submit("bob", specs.Edit{Op: specs.OpUpdate, Job: "report", ExpectVersion: &v2, Spec: &schedule.Spec{Schedule: "0 4 * * *", Handler: "http"}}, "4am")
	b.click(b.ctx, "#update")
	b.wait(b.ctx, "the conflict naming bob", text("#action-result")+`.includes("Conflict") && `+text("#action-result")+`.includes("version 3, set by bob")`)
	b.screenshot(b.ctx, "schedule-conflict.png")

	// alice reverts bob's change from the history: version 4 with
	// version 2's spec.
	b.navigate(b.ctx, srv.URL+"/schedules.html?job=report")
	b.wait(b.ctx, "bob's version 3 and a revert button for versions 1 and 2", text("#job-meta")+`.includes("version 3") && document.querySelectorAll("#history button[data-version]").length === 2`)
	b.click(b.ctx, `#history button[data-version="2"]`)
	b.wait(b.ctx, "the revert applied", text("#action-result")+`.includes("revert report to version 2: version 3 -> 4, with version 2's spec") && `+text("#fields")+`.includes("30 3 * * *") && `+text("#history")+`.includes("revert")`)
	b.screenshot(b.ctx, "schedule-revert.png")
}
