package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/kjob/kjob/schedule"
)

// loadCompose loads ../docker-compose.yml as docker compose would
// (interpolation, anchors and merges, schema validation, normalization).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithName("kjob"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	want := []string{"grafana", "kafka", "producer-1", "producer-2", "prometheus", "redis", "signing-key", "worker-1", "worker-2", "worker-3"}
	got := p.ServiceNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	svc := func(name string) types.ServiceConfig {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Kafka: the official image in KRaft mode (no ZooKeeper anywhere).
	kafka := svc("kafka")
	if !strings.HasPrefix(kafka.Image, "apache/kafka:") {
		t.Errorf("kafka image %q, want the official apache/kafka", kafka.Image)
	}
	env := func(s types.ServiceConfig, k string) string {
		if v, ok := s.Environment[k]; ok && v != nil {
			return *v
		}
		return ""
	}
	if env(kafka, "KAFKA_PROCESS_ROLES") != "broker,controller" || env(kafka, "KAFKA_CONTROLLER_QUORUM_VOTERS") == "" {
		t.Error("kafka must run in KRaft mode (KAFKA_PROCESS_ROLES=broker,controller with a controller quorum)")
	}
	for _, s := range p.Services {
		if strings.Contains(strings.ToLower(s.Image), "zookeeper") {
			t.Errorf("service %s runs ZooKeeper", s.Name)
		}
	}
	// Redis with AOF persistence on a volume.
	redis := svc("redis")
	cmd := strings.Join(redis.Command, " ")
	if !strings.Contains(cmd, "--appendonly yes") {
		t.Errorf("redis command %q: want --appendonly yes", cmd)
	}
	if len(redis.Volumes) == 0 || redis.Volumes[0].Target != "/data" || redis.Volumes[0].Type != types.VolumeTypeVolume {
		t.Errorf("redis must keep /data (the AOF) on a named volume: %+v", redis.Volumes)
	}

	// Every service has a health check that is not disabled.
	for _, s := range p.Services {
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 {
			t.Errorf("service %s has no health check", s.Name)
		}
	}

	// Producers and workers: the kjob image, their binary, Kafka and
	// Redis healthy before they start, ready on /readyz.
	for _, name := range []string{"producer-1", "producer-2", "worker-1", "worker-2", "worker-3"} {
		s := svc(name)
		role := strings.TrimRight(name, "-0123456789")
		if s.Build == nil || s.Image != "kjob:dev" {
			t.Errorf("%s: want built from the repository's Dockerfile as kjob:dev", name)
		}
		if !slices.Equal([]string(s.Entrypoint), []string{"/" + role}) {
			t.Errorf("%s: entrypoint %v, want [/%s]", name, s.Entrypoint, role)
		}
		for _, dep := range []string{"kafka", "redis"} {
			if d, ok := s.DependsOn[dep]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: must depend on %s with condition service_healthy, has %+v", name, dep, s.DependsOn)
			}
		}
		if !slices.Contains(s.HealthCheck.Test, "http://127.0.0.1:8080/readyz") {
			t.Errorf("%s: health check %v must probe /readyz", name, s.HealthCheck.Test)
		}
		if env(s, "KJOB_BROKERS") != "kafka:9092" || !strings.HasPrefix(env(s, "KJOB_REDIS_URL"), "redis://redis:6379") {
			t.Errorf("%s: must point at the compose kafka and redis", name)
		}
		if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: want a read-only root filesystem and all capabilities dropped", name)
		}
		// Signing on (issue 14): the generated key mounted read-only,
		// producers sign with it, workers require signatures.
		if d, ok := s.DependsOn["signing-key"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: must wait for signing-key to complete, has %+v", name, s.DependsOn)
		}
		keysMounted := false
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume && v.Source == "signing-keys" && v.Target == env(s, "KJOB_SIGNING_KEYS_DIR") && v.ReadOnly {
				keysMounted = true
			}
		}
		if !keysMounted {
			t.Errorf("%s: KJOB_SIGNING_KEYS_DIR %q is not the signing-keys volume mounted read-only", name, env(s, "KJOB_SIGNING_KEYS_DIR"))
		}
		if role == "producer" && env(s, "KJOB_SIGNING_KEY_ID") != "compose-1" {
			t.Errorf("%s: KJOB_SIGNING_KEY_ID %q, want the generated key compose-1", name, env(s, "KJOB_SIGNING_KEY_ID"))
		}
		if role == "worker" && env(s, "KJOB_SIGNATURES_REQUIRED") != "true" {
			t.Errorf("%s: KJOB_SIGNATURES_REQUIRED must be true", name)
		}
		if role == "worker" {
			grace, err := time.ParseDuration(env(s, "KJOB_GRACE"))
			if err != nil {
				t.Fatalf("%s: KJOB_GRACE: %v", name, err)
			}
			if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) < grace+5*time.Second {
				t.Errorf("%s: stop_grace_period %v must cover KJOB_GRACE %v plus leaving the group", name, s.StopGracePeriod, grace)
			}
		}
		if role == "producer" {
			var mounted bool
			for _, v := range s.Volumes {
				if v.Target == env(s, "KJOB_SCHEDULES") {
					mounted = true
					b, err := os.ReadFile(v.Source)
					if err != nil {
						t.Fatalf("%s: schedules %s: %v", name, v.Source, err)
					}
					if _, err := schedule.Parse(v.Source, b); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
			if !mounted {
				t.Errorf("%s: KJOB_SCHEDULES %q is not mounted", name, env(s, "KJOB_SCHEDULES"))
			}
		}
	}

	// Prometheus scrapes every producer and worker; Grafana waits for it
	// and is provisioned from deploy/grafana with deploy/observability.
	prom, err := os.ReadFile(filepath.Join("compose", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"producer-1", "producer-2", "worker-1", "worker-2", "worker-3"} {
		if !strings.Contains(string(prom), `"`+name+`:8080"`) {
			t.Errorf("prometheus.yml does not scrape %s:8080", name)
		}
		if d, ok := svc("prometheus").DependsOn[name]; !ok || d.Condition != types.ServiceConditionStarted {
			t.Errorf("prometheus must start after %s", name)
		}
	}
	graf := svc("grafana")
	if d, ok := graf.DependsOn["prometheus"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("grafana must wait for a healthy prometheus: %+v", graf.DependsOn)
	}
	root, _ := filepath.Abs("..")
	mounts := map[string]string{}
	for _, v := range graf.Volumes {
		rel, _ := filepath.Rel(root, v.Source)
		mounts[v.Target] = rel
	}
	if mounts["/etc/grafana/provisioning"] != filepath.Join("deploy", "grafana", "provisioning") {
		t.Errorf("grafana provisioning mount %q, want deploy/grafana/provisioning", mounts["/etc/grafana/provisioning"])
	}
	if mounts["/etc/kjob/observability"] != filepath.Join("deploy", "observability") {
		t.Errorf("grafana must mount deploy/observability (dashboards) at /etc/kjob/observability, has %v", mounts)
	}
	// Docker creates a missing bind-mount source as an empty directory, so
	// a typo or a missing directory would start a service without its
	// configuration: every source must exist.
	for _, name := range p.ServiceNames() {
		for _, v := range svc(name).Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("service %s mounts %s, which does not exist: %v", name, v.Source, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join("observability", "kjob-dashboard.json")); err != nil {
		t.Errorf("no Grafana dashboard to provision: %v", err)
	}
	prov, err := os.ReadFile(filepath.Join("grafana", "provisioning", "dashboards", "kjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(prov), "path: /etc/kjob/observability") {
		t.Error("the Grafana dashboard provider must read /etc/kjob/observability")
	}
}

// TestComposeKafkaKeepsItsLog checks that the broker's log (topics, group
// offsets, transaction state, the KRaft metadata) lives on a named volume:
// the apache/kafka image writes to /tmp/kafka-logs inside the container
// unless KAFKA_LOG_DIRS says otherwise, and `docker compose down && up`
// would then lose every topic and every window not yet run.
func TestComposeKafkaKeepsItsLog(t *testing.T) {
	p := loadCompose(t)
	kafka, err := p.GetService("kafka")
	if err != nil {
		t.Fatal(err)
	}
	dirs := ""
	if v, ok := kafka.Environment["KAFKA_LOG_DIRS"]; ok && v != nil {
		dirs = *v
	}
	if dirs == "" {
		t.Fatal("kafka: KAFKA_LOG_DIRS is not set, so the apache/kafka image keeps its log in /tmp/kafka-logs inside the container; set it to a directory on the kafka-data volume")
	}
	for _, dir := range strings.Split(dirs, ",") {
		dir = filepath.Clean(strings.TrimSpace(dir))
		var on *types.ServiceVolumeConfig
		for i, v := range kafka.Volumes {
			if dir == v.Target || strings.HasPrefix(dir, strings.TrimSuffix(v.Target, "/")+"/") {
				on = &kafka.Volumes[i]
			}
		}
		switch {
		case on == nil:
			t.Errorf("kafka: log dir %s is on no volume (mounts %+v): it is lost with the container", dir, kafka.Volumes)
		case on.Type != types.VolumeTypeVolume:
			t.Errorf("kafka: log dir %s is on a %s mount, want a named volume", dir, on.Type)
		case on.ReadOnly:
			t.Errorf("kafka: log dir %s is on a read-only mount", dir)
		default:
			if _, declared := p.Volumes[on.Source]; !declared {
				t.Errorf("kafka: log dir %s is on volume %q, which the file's volumes section does not declare", dir, on.Source)
			}
		}
	}
}
