package deploy_test

import (
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// registered is what one binary accepts: its flags and the environment
// variables that mirror them.
type registered struct {
	flags, envs map[string]bool
}

var (
	reHelpFlag = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`)
	reHelpEnv  = regexp.MustCompile(`(?m)^\s+\[(KJOB_[A-Z0-9_]+)\]`)
)

// binaries builds producer and worker and reads what each registers from
// its --help (cli.Flags prints every flag with its variable).
func binaries(t *testing.T) map[string]registered {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/producer", "./cmd/worker")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := map[string]registered{}
	for _, bin := range []string{"producer", "worker"} {
		help, err := exec.Command(filepath.Join(dir, bin), "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", bin, err, help)
		}
		r := registered{flags: map[string]bool{}, envs: map[string]bool{}}
		for _, m := range reHelpFlag.FindAllStringSubmatch(string(help), -1) {
			r.flags[m[1]] = true
		}
		for _, m := range reHelpEnv.FindAllStringSubmatch(string(help), -1) {
			r.envs[m[1]] = true
		}
		// Not vacuous: every binary has brokers and the Redis URL.
		if !r.flags["brokers"] || !r.envs["KJOB_BROKERS"] || !r.envs["KJOB_REDIS_URL"] {
			t.Fatalf("%s --help: cannot read its flags and variables:\n%s", bin, help)
		}
		out[bin] = r
	}
	return out
}

// setting is one KJOB_* variable or flag a manifest gives a binary.
type setting struct {
	bin, name, where string
	flag             bool
}

// kubernetesSettings lists the variables (env, and the keys of envFrom
// ConfigMaps) and flags (args) each Deployment gives its binary.
func kubernetesSettings(t *testing.T, objs []runtime.Object) []setting {
	t.Helper()
	maps := map[string]*corev1.ConfigMap{}
	for _, cm := range only[*corev1.ConfigMap](objs) {
		maps[cm.Name] = cm
	}
	var out []setting
	for _, d := range only[*appsv1.Deployment](objs) {
		for _, c := range d.Spec.Template.Spec.Containers {
			if len(c.Command) == 0 {
				t.Fatalf("Deployment %s container %s: no command; name the binary (/producer or /worker)", d.Name, c.Name)
			}
			bin := path.Base(c.Command[0])
			where := fmt.Sprintf("Deployment %s container %s", d.Name, c.Name)
			for _, e := range c.Env {
				out = append(out, setting{bin: bin, name: e.Name, where: where + " env"})
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef == nil {
					continue
				}
				cm := maps[ef.ConfigMapRef.Name]
				if cm == nil {
					t.Fatalf("%s: envFrom ConfigMap %s does not exist", where, ef.ConfigMapRef.Name)
				}
				for k := range cm.Data {
					out = append(out, setting{bin: bin, name: ef.Prefix + k, where: where + " envFrom ConfigMap " + cm.Name})
				}
			}
			for _, a := range c.Args {
				out = append(out, argSetting(bin, a, where+" args"))
			}
		}
	}
	return out
}

// argSetting reads "--name=value" or "--name" (a value in the next
// argument is not a flag and is skipped by the caller's check).
func argSetting(bin, arg, where string) setting {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	if !strings.HasPrefix(arg, "-") {
		name = ""
	}
	return setting{bin: bin, name: name, where: where, flag: true}
}

// composeSettings lists the variables and command-line flags each kjob
// service of docker-compose.yml gives its binary (its entrypoint).
func composeSettings(t *testing.T) []setting {
	t.Helper()
	p := loadCompose(t)
	var out []setting
	for _, s := range p.Services {
		if len(s.Entrypoint) == 0 || s.Image != "kjob:dev" {
			continue
		}
		bin := path.Base(s.Entrypoint[0])
		for k := range s.Environment {
			out = append(out, setting{bin: bin, name: k, where: "docker-compose.yml service " + s.Name + " environment"})
		}
		for _, a := range s.Command {
			out = append(out, argSetting(bin, a, "docker-compose.yml service "+s.Name+" command"))
		}
	}
	if len(out) == 0 {
		t.Fatal("docker-compose.yml: no kjob service found (image kjob:dev with an entrypoint)")
	}
	return out
}

// unknown returns every KJOB_* variable and flag a binary does not
// register: a misspelled name is silently ignored at run time.
func unknown(settings []setting, bins map[string]registered) []string {
	var out []string
	for _, s := range settings {
		r, ok := bins[s.bin]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: unknown binary %q", s.where, s.bin))
		case s.flag && s.name != "" && !r.flags[s.name]:
			out = append(out, fmt.Sprintf("%s: %s does not register flag --%s", s.where, s.bin, s.name))
		case !s.flag && strings.HasPrefix(s.name, "KJOB_") && !r.envs[s.name]:
			out = append(out, fmt.Sprintf("%s: %s does not register %s", s.where, s.bin, s.name))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestSettingsAreRegistered checks that every KJOB_* variable and flag
// the Kubernetes manifests (files, rendered base, rendered overlay) and
// docker-compose.yml give producer and worker is one that binary
// registers, reading what it registers from the built binary's --help.
func TestSettingsAreRegistered(t *testing.T) {
	bins := binaries(t)
	sets := map[string][]runtime.Object{"base files": base(t), "rendered base": render(t, baseDir), "rendered overlay": render(t, overlayDir)}
	for what, objs := range sets {
		settings := kubernetesSettings(t, objs)
		if len(settings) < 10 {
			t.Fatalf("%s: only %d settings found; is the reading broken?", what, len(settings))
		}
		for _, u := range unknown(settings, bins) {
			t.Errorf("%s: %s", what, u)
		}
	}
	for _, u := range unknown(composeSettings(t), bins) {
		t.Error(u)
	}

	// The check itself catches a misspelling, a variable of the other
	// binary and an unknown flag.
	grace := int64(45)
	bad := []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"KJOB_BROKER": "x", "OTHER": "y"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "worker", Command: []string{"/worker"}, Args: []string{"--signature-required"},
				Env:     []corev1.EnvVar{{Name: "KJOB_GRACE", Value: "30s"}, {Name: "KJOB_PARTITIONS", Value: "3"}},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}},
		}}}},
	}
	got := unknown(kubernetesSettings(t, bad), bins)
	want := []string{
		"Deployment w container worker args: worker does not register flag --signature-required",
		"Deployment w container worker env: worker does not register KJOB_PARTITIONS",
		"Deployment w container worker envFrom ConfigMap cfg: worker does not register KJOB_BROKER",
	}
	if !slices.Equal(got, want) {
		t.Errorf("on a broken Deployment the check reports\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
