package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kjob/kjob/internal/ops/dashboard"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// chromedp's allocator leaves a goroutine reading the browser's
		// output until the process is reaped by the OS.
		goleak.IgnoreTopFunction("os/exec.(*Cmd).watchCtx"),
	)
}

func TestNewRefusesBadConfig(t *testing.T) {
	in := &fakeInspector{}
	for _, tc := range []struct {
		cfg  dashboard.Config
		want string
	}{
		{dashboard.Config{Brokers: []string{"b"}, Topic: "t"}, "Config.Inspector is nil"},
		{dashboard.Config{Inspector: in, Topic: "t"}, "Config.Brokers is empty"},
		{dashboard.Config{Inspector: in, Brokers: []string{"b"}}, "Config.Topic is empty"},
		{dashboard.Config{Inspector: in, Brokers: []string{"b"}, Topic: "t", Interval: time.Millisecond}, "Config.Interval = 1ms is below 100ms"},
		{dashboard.Config{Inspector: in, Brokers: []string{"b"}, Topic: "t", Interval: time.Minute, History: time.Second}, "Config.History = 1s is shorter than Config.Interval = 1m0s"},
		{dashboard.Config{Inspector: in, Brokers: []string{"b"}, Topic: "t", Recent: 5000}, "Config.Recent = 5000 is out of range"},
	} {
		_, err := dashboard.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

type fakeInspector struct {
	mu   sync.Mutex
	lag  int64
	fail error
}

func (f *fakeInspector) Snapshot(context.Context) (*inspect.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return &inspect.Snapshot{
		At:     time.Now(),
		Leader: &inspect.Leader{Holder: "producer-a", Epoch: 3},
		Group: &inspect.Group{Name: "g", State: "Stable", TotalLag: f.lag,
			Partitions: []inspect.PartitionLag{{Partition: 0, Lag: f.lag, End: 10, Committed: 10 - f.lag, Owner: "w1"}}},
	}, nil
}

func (f *fakeInspector) set(lag int64, fail error) {
	f.mu.Lock()
	f.lag, f.fail = lag, fail
	f.mu.Unlock()
}

// TestStateAndEvents checks the JSON API and the event stream: the lag
// history grows with each refresh, a failing read shows up as an error
// without dropping the history, and only GET and HEAD are answered.
func TestStateAndEvents(t *testing.T) {
	brokers := testenv.Brokers(t)
	in := &fakeInspector{}
	in.set(4, nil)
	d, err := dashboard.New(dashboard.Config{Inspector: in, Brokers: brokers, Topic: "kjob.windows", Namespace: "ns",
		Interval: 100 * time.Millisecond, History: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()
	// No keep-alive: every connection ends with its response, so none is
	// left behind for the goroutine-leak check.
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	// Before the first refresh there is nothing to show yet.
	if r, err := cl.Get(srv.URL + "/api/state"); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /api/state before Run: %v %v, want 503", r.Status, err)
	} else {
		r.Body.Close()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(ctx) }()

	// The stream has a context of its own: it must end because Run ended.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/api/events", nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	events := make(chan dashboard.State, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var st dashboard.State
			if err := json.Unmarshal([]byte(line), &st); err != nil {
				t.Errorf("event data: %v", err)
				return
			}
			events <- st
		}
	}()
	next := func() dashboard.State {
		t.Helper()
		select {
		case st, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			return st
		case <-ctx.Done():
			t.Fatal("no event within the deadline")
		}
		return dashboard.State{}
	}
	var st dashboard.State
	for st = next(); len(st.Lag) < 3; st = next() {
	}
	if st.Snapshot.Leader.Holder != "producer-a" || st.Namespace != "ns" || st.IntervalMS != 100 || st.Lag[len(st.Lag)-1].Partitions["0"] != 4 || st.Lag[len(st.Lag)-1].Total != 4 {
		t.Fatalf("state %+v", st)
	}
	in.set(0, errors.New("kafka unreachable"))
	for st = next(); len(st.Errors) == 0; st = next() {
	}
	if st.Errors[0] != "snapshot: kafka unreachable" || len(st.Lag) < 3 {
		t.Fatalf("after a failing read: errors %v, %d lag points (want the history kept)", st.Errors, len(st.Lag))
	}

	r, err := cl.Get(srv.URL + "/api/state")
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/state: %v %v", r.Status, err)
	}
	r.Body.Close()
	r, err = cl.Post(srv.URL+"/api/state", "application/json", strings.NewReader("{}"))
	if err != nil || r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /api/state: %v %v, want 405", r.Status, err)
	}
	r.Body.Close()
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		r, err := cl.Get(srv.URL + path)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", path, r.Status, err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
			if path != "/app.js" || strings.Count(string(b), "http://www.w3.org/2000/svg") != strings.Count(string(b), "http://") {
				t.Errorf("%s refers to another origin; every asset must be embedded", path)
			}
		}
	}

	// When Run ends, open event streams end too.
	cancel()
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for range events {
	}
	if sctx.Err() != nil {
		t.Fatal("the event stream ended only at its client's deadline, not when Run returned")
	}
}
