package kjob

import (
	"context"
	"fmt"
	"testing"

	"github.com/kjob/kjob/internal/store/lease"
)

// termsElector leads once per term: a term whose lost flag is set ends
// with lead's context cancelled, as when a lease is not renewed in time.
type termsElector struct{ lost []bool }

func (e termsElector) Run(ctx context.Context, lead func(context.Context) error) error {
	for _, lost := range e.lost {
		lctx, cancel := context.WithCancel(ctx)
		if lost {
			cancel()
		}
		_ = lead(lctx)
		cancel()
	}
	return nil
}

// A user's Elector reports acquired, then lost or released, as the Redis
// lease does, so the producer's lease metrics follow it.
func TestReportingElector(t *testing.T) {
	var got []string
	r := reporting{el: termsElector{lost: []bool{false, true}}, holder: "p1", onChange: func(e lease.Event) {
		if e.Record.Holder != "p1" {
			t.Errorf("holder %q", e.Record.Holder)
		}
		got = append(got, e.Kind.String())
	}}
	if err := r.Run(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if want := "[acquired released acquired lost]"; fmt.Sprint(got) != want {
		t.Errorf("events %v, want %s", got, want)
	}
	// Shutdown: Run's context ends while leading.
	got = nil
	ctx, cancel := context.WithCancel(context.Background())
	_ = reporting{el: termsElector{lost: []bool{false}}, holder: "p1", onChange: func(e lease.Event) { got = append(got, e.Kind.String()) }}.
		Run(ctx, func(context.Context) error { cancel(); return nil })
	if want := "[acquired released]"; fmt.Sprint(got) != want {
		t.Errorf("events on shutdown %v, want %s", got, want)
	}
}
