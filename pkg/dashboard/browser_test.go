package dashboard_test

import (
	"context"
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

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/control"
	"github.com/kjob/kjob/pkg/dashboard"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/inspect"
	"github.com/kjob/kjob/pkg/lease"
	"github.com/kjob/kjob/pkg/producer"
	"github.com/kjob/kjob/pkg/schedule"
	"github.com/kjob/kjob/pkg/worker"
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

// TestDashboardInBrowser runs a real pipeline (a leading producer with a
// Redis lease, a worker, a 1-second job and one poison record) against the
// embedded broker and a real Redis, serves the dashboard, and drives it in
// headless Chromium: the page must show the live leader, the worker and the
// partition it owns, the job with its next run, windows done by the worker,
// the dead letter and a lag line per partition, pushed over the event
// stream. It saves a screenshot (KJOB_TEST_ARTIFACTS, or a temp dir).
func TestDashboardInBrowser(t *testing.T) {
	browser := chromium(t)
	brokers := testenv.Brokers(t)
	rdb := testenv.NewRedis(t).Client()
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const ns, topic = "dash", "kjob.windows"
	f, err := schedule.Parse("s.yaml", []byte(`jobs:
  - name: tick
    schedule: "@every 1s"
    handler: noop
    catchup: 1m
  - name: nightly
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    handler: noop
`))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := lease.NewRedisLock(rdb, inspect.ProducerLeaseKey(ns))
	if err != nil {
		t.Fatal(err)
	}
	elector, err := lease.NewElector(lease.Config{Lock: lock, Holder: "producer-test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{Brokers: brokers, Topic: topic, Jobs: f.Jobs, Elector: elector,
		TransactionalID: "dash-txn", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	store, err := dedupe.New(rdb, dedupe.Config{Namespace: ns, ClaimTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux := handler.NewMux()
	mux.HandleFunc("noop", func(context.Context, *handler.Job) error { return nil })
	w, err := worker.New(worker.Config{Brokers: brokers, Topic: topic, Group: "dash-workers", Store: store, Handler: mux,
		WorkerID: "worker-test", ClaimExtendInterval: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	pauses, err := control.NewPauses(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	in, err := inspect.New(inspect.Config{Brokers: brokers, Redis: rdb, Namespace: ns, Topic: topic, Group: "dash-workers", Jobs: f.Jobs, Pauses: pauses})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	d, err := dashboard.New(dashboard.Config{Inspector: in, States: store, Brokers: brokers, Topic: topic, Namespace: ns,
		Interval: 250 * time.Millisecond, History: 5 * time.Minute, Logger: log})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	run("producer", p.Run)
	run("worker", w.Run)
	run("dashboard", d.Run)

	// One poison record, which the worker dead-letters.
	testenv.Eventually(t, 30*time.Second, func() bool { return p.Status().Leading }, "producer not leading")
	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := pcl.ProduceSync(ctx, &kgo.Record{Key: []byte("tick"), Value: []byte("not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pcl.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"

	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
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
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate to %s: %v", url, err)
	}

	// Each check waits, inside the page, until its predicate holds
	// (chromedp.Poll), within a deadline.
	waitJS := func(what, js string) {
		t.Helper()
		_, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second)))
		if err != nil {
			body, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
			t.Fatalf("the page never showed %s (%v); it shows:\n%s", what, err, body)
		}
	}
	text := func(sel string) string { return fmt.Sprintf(`((document.querySelector(%q)||{}).textContent||"")`, sel) }
	waitJS("the live event stream", text("#conn")+` === "live"`)
	waitJS("the leader", text("#leader-holder")+` === "producer-test"`)
	waitJS("the worker owning partition 0", `[...document.querySelectorAll("#members tbody tr")].some(r => r.cells[0].textContent === "worker-test" && r.cells[2].textContent === "0")`)
	waitJS("the jobs with their next run", `[...document.querySelectorAll("#jobs tbody tr")].some(r => r.cells[0].textContent === "tick" && r.cells[5].textContent.startsWith("in ")) &&
		[...document.querySelectorAll("#jobs tbody tr")].some(r => r.cells[0].textContent === "nightly" && r.cells[2].textContent === "Europe/Berlin")`)
	waitJS("windows done by the worker", `[...document.querySelectorAll("#recent tbody tr")].filter(r => r.cells[0].textContent.startsWith("tick@") && r.cells[3].textContent === "done" && r.cells[6].textContent === "worker-test").length >= 3`)
	waitJS("the poison record listed as invalid", `[...document.querySelectorAll("#recent tbody tr")].some(r => r.cells[0].textContent.startsWith("invalid record") && r.cells[3].textContent === "invalid")`)
	waitJS("the dead letter", text("#dead-letters")+` === "1"`)
	waitJS("a lag line for partition 0", `(() => { const l = document.querySelector('#lag-chart polyline[data-partition="0"]'); return !!l && l.getAttribute("points").trim().split(" ").length >= 4 })()`)

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("KJOB_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("KJOB_TEST_ARTIFACTS=%s: %v", dir, err)
	}
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the live dashboard: %s (%d bytes)", path, len(shot))
	if !strings.HasPrefix(string(shot), "\x89PNG\r\n\x1a\n") {
		t.Fatalf("screenshot is not a PNG")
	}
}
