package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kjob/kjob/schedule"
)

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// manifests use; decoding into it strictly rejects any other field (a typo
// such as "endpoint" instead of "endpoints").
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// kustomization is the part of kustomize.config.k8s.io/v1beta1 used here.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images"`
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// decode reads every YAML document of path strictly (see decodeYAML).
func decode(t *testing.T, path string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeYAML(t, path, data)
}

// decodeYAML decodes every YAML document of data (named name in errors)
// strictly: Kubernetes kinds with the client-go scheme (unknown or
// duplicate fields fail), ServiceMonitor into serviceMonitor.
func decodeYAML(t *testing.T, name string, data []byte) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var tm metav1.TypeMeta
		if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tm.Kind == "" {
			continue // comments only
		}
		if tm.Kind == "ServiceMonitor" {
			if tm.APIVersion != "monitoring.coreos.com/v1" {
				t.Fatalf("%s: ServiceMonitor apiVersion %q, want monitoring.coreos.com/v1", name, tm.APIVersion)
			}
			sm := &serviceMonitor{}
			if err := sigsyaml.UnmarshalStrict(doc, sm); err != nil {
				t.Fatalf("%s: ServiceMonitor: %v", name, err)
			}
			out = append(out, &unstructuredSM{sm})
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

// render builds the kustomization in dir (relative to deploy/) with
// kustomize's own library, as kubectl apply -k would, and decodes its
// output strictly.
func render(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return decodeYAML(t, "kustomize build "+dir, out)
}

// unstructuredSM lets a serviceMonitor travel as a runtime.Object.
type unstructuredSM struct{ *serviceMonitor }

func (u *unstructuredSM) DeepCopyObject() runtime.Object { return u }

func loadKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := sigsyaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml: %s %s", dir, k.APIVersion, k.Kind)
	}
	return k
}

// base decodes the base's resources, checking the kustomization lists
// exactly the YAML files of the directory.
func base(t *testing.T) []runtime.Object {
	t.Helper()
	dir := filepath.Join("kubernetes", "base")
	k := loadKustomization(t, dir)
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var want []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			want = append(want, filepath.Base(f))
		}
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("base kustomization resources %v, files %v: list every manifest exactly once", got, want)
	}
	var objs []runtime.Object
	for _, f := range k.Resources {
		objs = append(objs, decode(t, filepath.Join(dir, f))...)
	}
	return objs
}

func only[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func named[T interface {
	runtime.Object
	GetName() string
}](t *testing.T, objs []runtime.Object, name string) T {
	t.Helper()
	for _, o := range only[T](objs) {
		if o.GetName() == name {
			return o
		}
	}
	var zero T
	t.Fatalf("no %T named %q", zero, name)
	return zero
}

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	bad := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n")
	if _, _, err := strict.Decode(bad, nil, nil); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a Deployment with spec.replica decoded without error (%v): the strict check does not work", err)
	}
	var sm serviceMonitor
	if err := sigsyaml.UnmarshalStrict([]byte("spec:\n  endpoint: []\n"), &sm); err == nil {
		t.Fatal("a ServiceMonitor with spec.endpoint decoded without error")
	}
}

const (
	baseDir    = "kubernetes/base"
	overlayDir = "kubernetes/overlays/example"
)

// TestKubernetesBase checks the invariants on the base's files as written
// and on what kustomize renders of the base and of the example overlay.
func TestKubernetesBase(t *testing.T) {
	t.Run("files", func(t *testing.T) { checkInvariants(t, base(t), true) })
	t.Run("rendered base", func(t *testing.T) {
		objs := render(t, baseDir)
		checkInvariants(t, objs, true)
		checkRendered(t, objs, "latest")
	})
	t.Run("rendered overlay", func(t *testing.T) {
		objs := render(t, overlayDir)
		checkInvariants(t, objs, false)
		checkRendered(t, objs, "v0.1.0")
	})
}

// checkRendered checks what the kustomizations add: the part-of label on
// every object, and the image tag of every container.
func checkRendered(t *testing.T, objs []runtime.Object, tag string) {
	t.Helper()
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetLabels()["app.kubernetes.io/part-of"] != "kjob" {
			t.Errorf("%s %s: no app.kubernetes.io/part-of=kjob label (base labels transformer)", o.GetObjectKind().GroupVersionKind().Kind, m.GetName())
		}
	}
	for _, d := range only[*appsv1.Deployment](objs) {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Image != "ghcr.io/kjob/kjob:"+tag {
				t.Errorf("Deployment %s container %s: image %q, want ghcr.io/kjob/kjob:%s", d.Name, c.Name, c.Image, tag)
			}
		}
	}
}

// checkInvariants asserts what deploy/kubernetes promises. exact asks for
// the base's replica counts (2 producers, 3 workers); otherwise they are
// minimums, which an overlay may raise.
func checkInvariants(t *testing.T, objs []runtime.Object, exact bool) {
	t.Helper()
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && o.GetObjectKind().GroupVersionKind().Kind != "Namespace" && m.GetNamespace() != "kjob" {
			t.Errorf("%T %s: namespace %q, want kjob", o, m.GetName(), m.GetNamespace())
		}
	}

	ns := named[*corev1.Namespace](t, objs, "kjob")
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Error("namespace kjob does not enforce the restricted Pod Security Standard")
	}

	// RBAC: get/update on the one Lease; no create (see role.yaml).
	lease := only[*coordinationv1.Lease](objs)
	if len(lease) != 1 {
		t.Fatalf("%d Leases in the base, want 1 (pre-created so the Role needs no create)", len(lease))
	}
	roles := only[*rbacv1.Role](objs)
	if len(roles) != 1 || len(only[*rbacv1.ClusterRole](objs)) != 0 {
		t.Fatalf("want exactly one Role and no ClusterRole")
	}
	for _, rule := range roles[0].Rules {
		if !slices.Equal(rule.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(rule.Resources, []string{"leases"}) {
			t.Errorf("rule %+v: want only coordination.k8s.io leases", rule)
		}
		if !slices.Equal(rule.ResourceNames, []string{lease[0].Name}) {
			t.Errorf("rule resourceNames %v, want exactly [%s]", rule.ResourceNames, lease[0].Name)
		}
		for _, v := range rule.Verbs {
			if v != "get" && v != "update" {
				t.Errorf("rule verb %q: only get and update are limited by resourceNames (create is not), want no other", v)
			}
		}
	}
	rb := named[*rbacv1.RoleBinding](t, objs, roles[0].Name)
	if rb.RoleRef.Name != roles[0].Name || len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != "kjob-producer" {
		t.Errorf("RoleBinding %+v: want the Role bound to ServiceAccount kjob-producer only", rb)
	}
	workerSA := named[*corev1.ServiceAccount](t, objs, "kjob-worker")
	if workerSA.AutomountServiceAccountToken == nil || *workerSA.AutomountServiceAccountToken {
		t.Error("ServiceAccount kjob-worker mounts an API token; workers never call the API server")
	}

	cfg := named[*corev1.ConfigMap](t, objs, "kjob-config")
	sched := named[*corev1.ConfigMap](t, objs, "kjob-schedules")
	if _, err := schedule.Parse("schedules.yaml", []byte(sched.Data["schedules.yaml"])); err != nil {
		t.Errorf("ConfigMap kjob-schedules: %v", err)
	}

	prod := named[*appsv1.Deployment](t, objs, "kjob-producer")
	work := named[*appsv1.Deployment](t, objs, "kjob-worker")
	for _, c := range []struct {
		d    *appsv1.Deployment
		want int32
	}{{prod, 2}, {work, 3}} {
		if r := c.d.Spec.Replicas; r == nil || *r < c.want || exact && *r != c.want {
			t.Errorf("%s replicas %v, want %s%d", c.d.Name, ptrString(r), map[bool]string{true: "", false: "at least "}[exact], c.want)
		}
	}
	if prod.Spec.Template.Spec.ServiceAccountName != "kjob-producer" || work.Spec.Template.Spec.ServiceAccountName != "kjob-worker" {
		t.Error("each Deployment must run as its own ServiceAccount")
	}
	args := strings.Join(prod.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--lease-backend=kubernetes") || !strings.Contains(args, "--lease-name="+lease[0].Name) {
		t.Errorf("producer args %q: want --lease-backend=kubernetes --lease-name=%s", args, lease[0].Name)
	}

	// terminationGracePeriodSeconds covers the worker's job grace.
	grace := 10 * time.Second // the worker's default --grace
	for _, e := range work.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "KJOB_GRACE" {
			d, err := time.ParseDuration(e.Value)
			if err != nil {
				t.Fatalf("worker KJOB_GRACE=%q: %v", e.Value, err)
			}
			grace = d
		}
	}
	if tg := work.Spec.Template.Spec.TerminationGracePeriodSeconds; tg == nil || time.Duration(*tg)*time.Second < grace+5*time.Second {
		t.Errorf("worker terminationGracePeriodSeconds %v: want at least the job grace %v plus 5s to leave the group", tg, grace)
	}

	for _, d := range []*appsv1.Deployment{prod, work} {
		checkPod(t, d, cfg)
	}

	// PDB: the worker budget selects the worker pods and allows one down.
	pdb := named[*policyv1.PodDisruptionBudget](t, objs, "kjob-worker")
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(work.Spec.Template.Labels)) || sel.Matches(labels.Set(prod.Spec.Template.Labels)) {
		t.Errorf("worker PDB selector %v must select the worker pods only", sel)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("worker PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}

	// Service and ServiceMonitor reach both Deployments' http ports.
	svc := named[*corev1.Service](t, objs, "kjob-metrics")
	for _, d := range []*appsv1.Deployment{prod, work} {
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service %s does not select %s pods", svc.Name, d.Name)
		}
	}
	sms := only[*unstructuredSM](objs)
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	sm := sms[0]
	smSel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !smSel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not match Service labels %v", smSel, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v: want port %q path /metrics", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
}

// orDefault is v, or Kubernetes' default def for a probe field left 0.
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// checkPod asserts probes, resources, the restricted security context and
// that every credential file the configuration names comes from a mounted
// Secret.
func checkPod(t *testing.T, d *appsv1.Deployment, cfg *corev1.ConfigMap) {
	t.Helper()
	ps := d.Spec.Template.Spec
	if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
		ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext must set runAsNonRoot and the RuntimeDefault seccomp profile", d.Name)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", d.Name, len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: readiness probe must GET /readyz", d.Name)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: liveness probe must GET /healthz", d.Name)
	}
	// A startup probe holds the liveness probe off while the process
	// starts (issue 14: pods started during an outage were restarted in a
	// loop). The binaries serve /healthz before they wait for Kafka and
	// Redis, so it probes /healthz and needs only to cover the process's
	// own start.
	if sp := c.StartupProbe; sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: startup probe must GET /healthz", d.Name)
	} else if budget := time.Duration(orDefault(sp.PeriodSeconds, 10)*orDefault(sp.FailureThreshold, 3)) * time.Second; budget < 30*time.Second {
		t.Errorf("%s: startup probe allows %v (periodSeconds x failureThreshold); want at least 30s for a large schedules file", d.Name, budget)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("%s: no %s request", d.Name, res)
		}
		if _, ok := c.Resources.Limits[res]; !ok {
			t.Errorf("%s: no %s limit", d.Name, res)
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: container securityContext must forbid privilege escalation, make the root filesystem read-only and drop ALL capabilities", d.Name)
	}

	// Credentials: every file path in the config is under a read-only
	// mount of a Secret volume.
	secretVols := map[string]bool{}
	for _, v := range ps.Volumes {
		if v.Secret != nil {
			secretVols[v.Name] = true
		}
	}
	fromSecret := func(path string) bool {
		for _, m := range c.VolumeMounts {
			if secretVols[m.Name] && m.ReadOnly && strings.HasPrefix(path, m.MountPath+"/") {
				return true
			}
		}
		return false
	}
	for k, v := range cfg.Data {
		if strings.HasSuffix(k, "_FILE") || strings.HasSuffix(k, "_CA") || strings.HasSuffix(k, "_CERT") || strings.HasSuffix(k, "_KEY") || strings.HasSuffix(k, "_KEYS_DIR") {
			if !fromSecret(strings.TrimSuffix(v, "/")+"/") && !fromSecret(v) {
				t.Errorf("%s: %s=%s is not in a read-only Secret mount", d.Name, k, v)
			}
		}
	}
	for _, e := range c.Env {
		if strings.Contains(e.Name, "PASSWORD") && e.Value != "" {
			t.Errorf("%s: %s has a literal value; reference a Secret", d.Name, e.Name)
		}
	}
	refs := 0
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs++
		}
	}
	if refs < 2 {
		t.Errorf("%s: want the Kafka SASL user and the Redis URL from Secrets, have %d secretKeyRefs", d.Name, refs)
	}
}

// TestKubernetesExampleOverlay checks the overlay's own files and that
// its changes show in what kustomize renders.
func TestKubernetesExampleOverlay(t *testing.T) {
	k := loadKustomization(t, overlayDir)
	if !slices.Equal(k.Resources, []string{"../../base"}) {
		t.Errorf("overlay resources %v, want [../../base]", k.Resources)
	}
	for _, img := range k.Images {
		if img.Name != "ghcr.io/kjob/kjob" || img.NewTag == "" || img.NewTag == "latest" {
			t.Errorf("overlay image %+v: pin a tag of ghcr.io/kjob/kjob", img)
		}
	}
	objs := render(t, overlayDir)
	if w := named[*appsv1.Deployment](t, objs, "kjob-worker"); w.Spec.Replicas == nil || *w.Spec.Replicas != 6 {
		t.Errorf("rendered overlay: worker replicas %v, want the overlay's 6", ptrString(w.Spec.Replicas))
	}
	if got := named[*corev1.ConfigMap](t, objs, "kjob-config").Data["KJOB_BROKERS"]; got != "my-cluster-kafka-bootstrap.kafka:9093" {
		t.Errorf("rendered overlay: KJOB_BROKERS %q, want the overlay's brokers", got)
	}
	if got := named[*corev1.ConfigMap](t, objs, "kjob-producer-config").Data["KJOB_PARTITIONS"]; got != "24" {
		t.Errorf("rendered overlay: KJOB_PARTITIONS %q, want the overlay's 24", got)
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}
