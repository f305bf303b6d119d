package pause_test

import (
	"context"
	"testing"
	"time"

	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// List returns the entries as an older kjobctl wrote them, an entry that
// does not decode with its job only; Delete removes one, twice is fine.
func TestListAndDelete(t *testing.T) {
	r := testenv.NewRedis(t)
	ps, err := pause.New(r.Client(), "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := ps.Add(ctx, pause.Pause{Job: "a", Since: since, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Client().HSet(ctx, ps.Key(), "b", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	m, err := ps.List(ctx)
	if err != nil || len(m) != 2 || m["a"] != (pause.Pause{Job: "a", Since: since, By: "alice"}) || m["b"] != (pause.Pause{Job: "b"}) {
		t.Fatalf("List = %+v %v", m, err)
	}
	for range 2 {
		if err := ps.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := ps.List(ctx); err != nil || len(m) != 1 {
		t.Fatalf("after delete: %+v %v", m, err)
	}
	if _, err := pause.New(nil, "t"); err == nil {
		t.Fatal("New(nil) accepted")
	}
}
