package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kjob/kjob/internal/obs/metrics"
)

// The Grafana dashboard and the alert rules in deploy/observability must
// only query metrics kjob exports, be valid PromQL, and the alerts must fire
// on the histories their unit tests give (promtool test rules).

type grafanaDashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadDashboard(t *testing.T) (grafanaDashboard, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("observability", "kjob-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("kjob-dashboard.json: %v", err)
	}
	exprs := map[string]string{} // name -> expr
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			exprs[fmt.Sprintf("panel %q target %d", p.Title, i)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			// label_values(metric, label) is Grafana's, not PromQL: check
			// the metric as a selector.
			m := regexp.MustCompile(`^label_values\(([a-z_:][a-z0-9_:]*),`).FindStringSubmatch(v.Definition)
			if m == nil {
				t.Fatalf("variable %s: unexpected definition %q", v.Name, v.Definition)
			}
			exprs["variable "+v.Name] = m[1]
		}
	}
	return d, exprs
}

func loadRules(t *testing.T) (ruleFile, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("observability", "kjob-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("kjob-alerts.yml: %v", err)
	}
	exprs := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	return f, exprs
}

// grafanaVars replaces the dashboard's variables with values PromQL takes.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$producer_job", ".*", "$worker_job", ".*", "$kjob_job", ".*")

// metricRefs finds the kjob metric names an expression selects: label
// matchers and grouping clauses (which name labels such as kjob_job) are
// removed first; every kjob metric starts with kjob_ and no function or
// keyword does.
func metricRefs(expr string) []string {
	expr = labelMatchers.ReplaceAllString(expr, "{}")
	expr = grouping.ReplaceAllString(expr, "")
	return metricName.FindAllString(expr, -1)
}

var (
	labelMatchers = regexp.MustCompile(`\{[^}]*\}`)
	grouping      = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	metricName    = regexp.MustCompile(`\bkjob_[a-zA-Z0-9_:]+\b`)
)

func TestObservabilityQueriesExportedMetrics(t *testing.T) {
	exported := metrics.Names()
	known := func(name string) bool {
		if slices.Contains(exported, name) {
			return true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok && slices.Contains(exported, base) {
				return true
			}
		}
		return false
	}
	d, dexprs := loadDashboard(t)
	_, rexprs := loadRules(t)
	if d.UID != "kjob" || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %q with %d panels", d.UID, len(d.Panels))
	}
	used := map[string]bool{}
	for _, set := range []map[string]string{dexprs, rexprs} {
		for where, expr := range set {
			refs := metricRefs(expr)
			if len(refs) == 0 {
				t.Errorf("%s queries no kjob metric: %s", where, expr)
			}
			for _, m := range refs {
				used[m] = true
				if !known(m) {
					t.Errorf("%s queries %s, which kjob does not export (internal/obs/metrics exports %v)", where, m, exported)
				}
			}
		}
	}
	// What the issue asks the dashboard and alerts to show.
	for _, want := range []string{"kjob_oldest_unsettled_window_age_seconds", "kjob_job_oldest_unsettled_window_age_seconds",
		"kjob_newest_settled_window_age_seconds", "kjob_handler_duration_seconds_bucket", "kjob_consumer_lag", "kjob_publish_lateness_seconds_bucket", "kjob_handler_lateness_seconds_bucket",
		"kjob_executions_total", "kjob_leadership_changes_total", "kjob_dead_lettered_total", "kjob_lease_held"} {
		if !used[want] {
			t.Errorf("neither the dashboard nor the alerts use %s", want)
		}
	}
	alerts := map[string]bool{}
	for where := range rexprs {
		alerts[strings.TrimPrefix(where, "alert ")] = true
	}
	for _, want := range []string{"KjobNoLeader", "KjobWindowsLate", "KjobNoWorker", "KjobDeadLetters", "KjobLeaderChurn", "KjobHandlerLate"} {
		if !alerts[want] {
			t.Errorf("alert %s is missing", want)
		}
	}
}

// promtool finds Prometheus' promtool, or skips unless
// KJOB_TEST_REQUIRE_PROMTOOL=1 (CI sets it) makes that a failure.
func promtool(t *testing.T) string {
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("KJOB_TEST_REQUIRE_PROMTOOL") == "1" {
		t.Fatal("KJOB_TEST_REQUIRE_PROMTOOL=1 but promtool is not on PATH: apt-get install prometheus")
	}
	t.Skip("promtool not on PATH (apt-get install prometheus): the rules were not checked")
	return ""
}

func TestAlertRulesWithPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", filepath.Join("observability", "kjob-alerts.yml")},
		{"test", "rules", filepath.Join("observability", "tests", "kjob-alerts.test.yaml")},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestDashboardPromQL checks every dashboard query's syntax with promtool,
// by writing them as recording rules.
func TestDashboardPromQL(t *testing.T) {
	bin := promtool(t)
	_, exprs := loadDashboard(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		q, _ := json.Marshal(grafanaVars.Replace(exprs[k])) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: kjob:dashboard_query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("a dashboard query is not valid PromQL: %v\n%s\nqueries:\n%s", err, out, b.String())
	}
}

func TestMetricRefs(t *testing.T) {
	got := metricRefs(`sum by (kjob_job) (rate(kjob_executions_total{kjob_job="a", outcome="done"}[1m])) / on (job) group_left (kjob_job) kjob_lease_held`)
	if !slices.Equal(got, []string{"kjob_executions_total", "kjob_lease_held"}) {
		t.Fatalf("metricRefs = %v", got)
	}
}
