package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// pinnedNames are the settings that fix a name the namespace otherwise
// derives (internal/base/names): a shipped manifest that set one would keep every
// copy of it on the same topics or group whatever KJOB_NAMESPACE it is
// given, which is how two deployments ended up sharing them (issue 21).
var pinnedNames = []string{"KJOB_TOPIC", "KJOB_GROUP", "KJOB_STATE_TOPIC", "KJOB_DLQ_TOPIC", "KJOB_CONTROL_TOPIC",
	"topic", "group", "state-topic", "dlq-topic", "control-topic"}

// namespaceProblems lists the processes of settings that get no
// KJOB_NAMESPACE and every setting that pins a derived name.
func namespaceProblems(settings []setting) []string {
	var out []string
	named := map[string]bool{}
	for _, s := range settings {
		if s.name == "KJOB_NAMESPACE" {
			named[s.where] = true
		}
	}
	for _, s := range settings {
		if slices.Contains(pinnedNames, s.name) {
			out = append(out, fmt.Sprintf("%s sets %s: leave it to the namespace (internal/base/names)", s.where, s.name))
		}
	}
	seen := map[string]bool{}
	for _, s := range settings {
		// A process's settings come from several places ("... env",
		// "... envFrom ConfigMap x"); it needs the namespace in one.
		proc := process(s.where)
		if seen[proc] {
			continue
		}
		seen[proc] = true
		ok := false
		for w := range named {
			ok = ok || process(w) == proc
		}
		if !ok {
			out = append(out, fmt.Sprintf("%s: no KJOB_NAMESPACE", proc))
		}
	}
	slices.Sort(out)
	return out
}

// process is the process a setting's where names: up to " env", " args",
// " envFrom", " environment" or " command".
func process(where string) string {
	for _, sep := range []string{" env", " args", " environment", " command"} {
		if i := strings.Index(where, sep); i >= 0 {
			return where[:i]
		}
	}
	return where
}

// Every kjob process the manifests and docker-compose.yml start is given
// its deployment's namespace and pins no name the namespace derives, so a
// copy given another KJOB_NAMESPACE gets topics and a group of its own.
func TestManifestsDeriveNamesFromTheNamespace(t *testing.T) {
	sets := map[string][]runtime.Object{"base files": base(t), "rendered base": render(t, baseDir), "rendered overlay": render(t, overlayDir)}
	for what, objs := range sets {
		for _, p := range namespaceProblems(kubernetesSettings(t, objs)) {
			t.Errorf("%s: %s", what, p)
		}
	}
	for _, p := range namespaceProblems(composeSettings(t)) {
		t.Error(p)
	}
	// The check catches a pinned topic and a process without a namespace.
	got := namespaceProblems([]setting{
		{bin: "worker", name: "KJOB_NAMESPACE", where: "Deployment w container worker envFrom ConfigMap c"},
		{bin: "worker", name: "KJOB_TOPIC", where: "Deployment w container worker envFrom ConfigMap c"},
		{bin: "producer", name: "KJOB_BROKERS", where: "Deployment p container producer env"},
	})
	want := []string{
		"Deployment p container producer: no KJOB_NAMESPACE",
		"Deployment w container worker envFrom ConfigMap c sets KJOB_TOPIC: leave it to the namespace (internal/base/names)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("on broken settings the check reports\n%q\nwant\n%q", got, want)
	}
}
