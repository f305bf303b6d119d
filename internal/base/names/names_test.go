package names_test

import (
	"testing"

	"github.com/kjob/kjob/internal/base/names"
)

// Every derived name, for the defaults and for a deployment of its own.
func TestDerivedNames(t *testing.T) {
	for _, tc := range []struct {
		d    names.Deployment
		want []string
	}{
		{names.Deployment{}, []string{
			"kjob.windows", "kjob.windows.state", "kjob.windows.dlq", "kjob.windows.control", "kjob-workers",
			"kjob-producer-kjob", "kjob-producer-kjob", "kjob:{kjob}:producer-lease",
			"kjob:{kjob}:paused", "kjob:{kjob}:dlq-redriven", "kjob:{kjob}:published:", "kjob:{kjob}:audit",
			"kjob:{kjob:report}", "kjob:{kjob:report}:runs", "kjob:{kjob:_stalls}",
			"~kjob:{kjob}:*", "~kjob:{kjob:*", "~kjob:{kjob}:* ~kjob:{kjob:*",
		}},
		{names.Deployment{Namespace: "kjob"}, []string{
			"kjob.windows", "kjob.windows.state", "kjob.windows.dlq", "kjob.windows.control", "kjob-workers",
			"kjob-producer-kjob", "kjob-producer-kjob", "kjob:{kjob}:producer-lease",
			"kjob:{kjob}:paused", "kjob:{kjob}:dlq-redriven", "kjob:{kjob}:published:", "kjob:{kjob}:audit",
			"kjob:{kjob:report}", "kjob:{kjob:report}:runs", "kjob:{kjob:_stalls}",
			"~kjob:{kjob}:*", "~kjob:{kjob:*", "~kjob:{kjob}:* ~kjob:{kjob:*",
		}},
		// Another namespace gets topics and a group of its own.
		{names.Deployment{Namespace: "prod"}, []string{
			"kjob.prod.windows", "kjob.prod.windows.state", "kjob.prod.windows.dlq", "kjob.prod.windows.control", "kjob-workers-prod",
			"kjob-producer-prod", "kjob-producer-prod", "kjob:{prod}:producer-lease",
			"kjob:{prod}:paused", "kjob:{prod}:dlq-redriven", "kjob:{prod}:published:", "kjob:{prod}:audit",
			"kjob:{prod:report}", "kjob:{prod:report}:runs", "kjob:{prod:_stalls}",
			"~kjob:{prod}:*", "~kjob:{prod:*", "~kjob:{prod}:* ~kjob:{prod:*",
		}},
		// An explicit topic wins; the group still follows the namespace.
		{names.Deployment{Namespace: "prod", Topic: "t"}, []string{
			"t", "t.state", "t.dlq", "t.control", "kjob-workers-prod",
			"kjob-producer-prod", "kjob-producer-prod", "kjob:{prod}:producer-lease",
			"kjob:{prod}:paused", "kjob:{prod}:dlq-redriven", "kjob:{prod}:published:", "kjob:{prod}:audit",
			"kjob:{prod:report}", "kjob:{prod:report}:runs", "kjob:{prod:_stalls}",
			"~kjob:{prod}:*", "~kjob:{prod:*", "~kjob:{prod}:* ~kjob:{prod:*",
		}},
	} {
		d := tc.d
		got := []string{
			d.WindowsTopic(), d.StateTopic(), d.DeadLetterTopic(), d.ControlTopic(), d.Group(),
			d.TransactionalID(), d.LeaseName(), d.LeaseKey(),
			d.PausedKey(), d.RedrivenKey(), d.PublishedPrefix(), d.AuditKey(),
			d.JobTag("report"), d.JobKey("report", "runs"), d.StallsKey(),
			d.ProducerACLKeys(), d.WorkerACLKeys(), d.OperatorACLKeys(),
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%+v: name %d = %q, want %q", d, i, got[i], tc.want[i])
			}
		}
	}
}

// JobPartition puts these jobs where kjob always has (murmur2 of the
// name, as Kafka's Java client), and never outside the topic.
func TestJobPartition(t *testing.T) {
	for _, tc := range []struct {
		job  string
		n    int
		want int32
	}{
		{"nightly-report", 3, 0}, {"sync", 3, 2}, {"any", 1, 0}, {"any", 0, 0},
	} {
		if got := names.JobPartition(tc.job, tc.n); got != tc.want {
			t.Errorf("JobPartition(%q, %d) = %d, want %d", tc.job, tc.n, got, tc.want)
		}
	}
	for i := range 1000 {
		if p := names.JobPartition(string(rune('a'+i%26))+string(rune(i)), 7); p < 0 || p >= 7 {
			t.Fatalf("partition %d of 7", p)
		}
	}
}

func TestValidNamespace(t *testing.T) {
	for ns, want := range map[string]rune{"prod": -1, "a.b_c-1": -1, "a b": ' ', "x/y": '/', "": 0} {
		bad, ok := names.ValidNamespace(ns)
		if ok != (want == -1) || !ok && bad != want {
			t.Errorf("ValidNamespace(%q) = %q, %v", ns, bad, ok)
		}
	}
}

// Two namespaces never share a default topic or group, and the default
// namespace keeps the names every deployment used before.
func TestNamespacesKeepApart(t *testing.T) {
	nss := []string{"", "kjob", "a", "b", "a.b", "a-b", "a_b", "windows", "kjob.a"}
	topics, groups := map[string]string{}, map[string]string{}
	for _, ns := range nss {
		d := names.Deployment{Namespace: ns}.WithDefaults()
		key := d.Namespace
		for name, seen := range map[string]map[string]string{d.WindowsTopic(): topics, d.Group(): groups} {
			if other, ok := seen[name]; ok && other != key {
				t.Errorf("namespaces %q and %q share %q", other, key, name)
			}
			seen[name] = key
		}
	}
	if got := names.DefaultTopicOf(""); got != names.DefaultTopic {
		t.Errorf("DefaultTopicOf(\"\") = %q, want %q", got, names.DefaultTopic)
	}
	if got := names.DefaultGroupOf(names.DefaultNamespace); got != names.DefaultGroup {
		t.Errorf("DefaultGroupOf(%q) = %q, want %q", names.DefaultNamespace, got, names.DefaultGroup)
	}
}
