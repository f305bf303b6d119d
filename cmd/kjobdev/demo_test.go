package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// buildDemoBinaries builds producer, worker, kjobctl and kjobdev into a temp dir.
func buildDemoBinaries(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./cmd/producer", "./cmd/worker", "./cmd/kjobctl", "./cmd/kjobdev")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// make demo signs its windows with a key it generates (the workers require
// signatures, so a window that runs proves it), removes its temp directory
// at exit, and with --dir keeps it with every process's full log. Before,
// signing was off, /tmp/kjob-demo-* stayed behind and --dir got no logs.
func TestDemo(t *testing.T) {
	bin := buildDemoBinaries(t)
	selfExe = func() (string, error) { return filepath.Join(bin, "kjobdev"), nil }
	t.Cleanup(func() { selfExe = os.Executable })
	tmp := t.TempDir()
	kept := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	args := []string{"--bin", bin, "--dashboard", "", "--open=false", "--producers", "1", "--workers", "1", "--partitions", "1"}

	var out lockedWriter
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := demo(ctx, append(args, "--duration", "25s"), &out, io.Discard); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	o := out.String()
	for _, want := range []string{"windows are signed with the key demo-", "KJOB_SIGNING_KEY_ID=demo-", "executed once", "removed the working directory " + tmp} {
		if !strings.Contains(o, want) {
			t.Errorf("demo output lacks %q:\n%s", want, o)
		}
	}
	if strings.Contains(o, "EXECUTED 2 TIMES") || strings.Contains(o, "signature") && strings.Contains(o, "dead-letter") {
		t.Errorf("a window ran twice or was dead-lettered for its signature:\n%s", o)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "kjob-demo-*")); len(left) != 0 {
		t.Errorf("demo left %v behind", left)
	}

	// With the dashboard, as make demo runs it (on a free port here).
	out = lockedWriter{}
	dash := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	if err := demo(ctx, append(args, "--duration", "8s", "--dir", kept, "--dashboard", dash), &out, io.Discard); err != nil {
		t.Fatalf("demo --dir --dashboard %s: %v\n%s", dash, err, out.String())
	}
	if want := "demo: dashboard: http://" + dash + "/"; !strings.Contains(out.String(), want) {
		t.Errorf("demo output lacks %q:\n%s", want, out.String())
	}
	for name, want := range map[string]string{"worker-1": "worker starting", "producer-1": "producer starting", "broker": "dev-broker: listening", "dashboard": "dashboard"} {
		b, err := os.ReadFile(filepath.Join(kept, "logs", name+".log"))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s.log (%v) lacks %q:\n%s", name, err, want, b)
		}
	}
	if keys, _ := os.ReadDir(filepath.Join(kept, "signing-keys")); len(keys) != 1 {
		t.Errorf("signing-keys holds %d keys, want 1", len(keys))
	}
	if !strings.Contains(out.String(), "kept the working directory "+kept) {
		t.Errorf("demo --dir output:\n%s", out.String())
	}
}
