package chaos

import (
	"strings"
	"testing"
)

// Rule (m) on hand-made histories: windows run by their own namespace's
// workers (or with namespaces unknown) pass; one run by a worker of
// another namespace is a violation naming both.
func TestRuleNamespace(t *testing.T) {
	label := func(h *History, ns string) {
		for i := range h.Published {
			h.Published[i].Namespace = ns
		}
		for i := range h.Attempts {
			h.Attempts[i].Namespace = ns
		}
	}
	h := clean(3)
	label(&h, "a")
	if vs, err := Check(h); err != nil || len(vs) != 0 {
		t.Fatalf("a clean history of namespace a: %v, %v", vs, err)
	}
	unknown := clean(3)
	unknown.Attempts[1].Namespace = "b" // the records' namespace is unknown
	if vs, err := Check(unknown); err != nil || len(vs) != 0 {
		t.Fatalf("records without a namespace are not judged: %v, %v", vs, err)
	}

	// Deployment b's worker ran a's window 1 (issue 21's reproduction).
	label(&h, "a")
	h.Attempts[1].Namespace, h.Attempts[1].Worker = "b", "worker-b"
	vs, err := Check(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Rule != "m" || vs[0].Window != wid("tick", 1) ||
		!strings.Contains(vs[0].Detail, `worker worker-b of namespace "b"`) || !strings.Contains(vs[0].Detail, `namespace "a"`) {
		t.Fatalf("violations %v, want one of rule (m) for %s naming both namespaces", vs, wid("tick", 1))
	}
}
