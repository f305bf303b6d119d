package kjob_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/kjob/kjob"
)

var errDownstream = errors.New("downstream")

// maxErrorBytes bounds the text of an error Recover returns.
const maxErrorBytes = 2 << 10

// The Logging middleware writes a 5 MB error as a bounded line that says
// how much was cut, and Recover returns it bounded while errors.Is still
// sees what it wraps. Before, the log line was 5 MB.
func TestHugeErrorIsBounded(t *testing.T) {
	huge := strings.Repeat("x", 5<<20)
	var logs bytes.Buffer
	h := kjob.Recover()(kjob.Logging(slog.New(slog.NewTextHandler(&logs, nil)))(kjob.HandlerFunc(func(context.Context, *kjob.Job) error {
		return errors.Join(errDownstream, errors.New(huge))
	})))
	err := h.HandleJob(context.Background(), job("a"))
	if !errors.Is(err, errDownstream) || len(err.Error()) > maxErrorBytes || !strings.HasSuffix(err.Error(), " of 5242891 bytes left out]") {
		t.Errorf("Recover's error: %d bytes, is errDownstream %v, ends %q", len(err.Error()), errors.Is(err, errDownstream), err.Error()[max(0, len(err.Error())-60):])
	}
	if n := logs.Len(); n > maxErrorBytes+1024 || !strings.Contains(logs.String(), "handler failed") || !strings.Contains(logs.String(), "bytes left out]") {
		t.Errorf("log: %d bytes: %.300s", n, logs.String())
	}
}
