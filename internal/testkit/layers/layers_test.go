package layers

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// No package imports one of a higher layer, and every package of the
// module is in a layer.
func TestLayers(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Graph(root)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Print(&b, Layers, g)
	t.Logf("import graph of %s:\n%s", Module, b.String())
	upward, unlisted := Check(Layers, g)
	for _, imp := range upward {
		t.Errorf("%s (layer %q) imports %s (layer %q), a higher layer: move the code it needs down, or have the caller pass it in",
			imp.From, Layers[LayerOf(Layers, imp.From)].Name, imp.To, Layers[LayerOf(Layers, imp.To)].Name)
	}
	for _, p := range unlisted {
		t.Errorf("package %s is in no layer: add it to Layers in layers.go", p)
	}
}

// The packages of Apart do not reach each other.
func TestApart(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Graph(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range Apart {
		if _, ok := g[a.From]; !ok {
			t.Errorf("Apart names %s, which is not a package of the module", a.From)
		}
		if path, ok := Reaches(g, a.From, a.To); ok {
			t.Errorf("%s depends on %s: %s", a.From, a.To, strings.Join(path, " -> "))
		}
	}
}

// The packages of Outside do not depend on the other modules' packages
// they must keep out of a user's program, and kjobotel, which exists to
// bring them in, does: the check sees them where they are.
func TestOutside(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	deps := func(dir string) (string, map[string][]string) {
		t.Helper()
		// The build's import graph, other modules' packages and the
		// standard library included; test files left out, as Graph does.
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./"+dir)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", dir, err)
		}
		g := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			g[f[0]] = f[1:]
		}
		pkg := Module
		if dir != "." {
			pkg += "/" + dir
		}
		return pkg, g
	}
	type build struct {
		pkg string
		g   map[string][]string
	}
	builds := map[string]build{}
	for _, o := range Outside {
		b, ok := builds[o.From]
		if !ok {
			b.pkg, b.g = deps(o.From)
			builds[o.From] = b
		}
		if path, ok := ReachesUnder(b.g, b.pkg, o.To); ok {
			t.Errorf("%s depends on %s: %s; only kjobotel (or the user's own main) may bring it in", o.From, o.To, strings.Join(path, " -> "))
		}
	}
	pkg, g := deps("kjobotel")
	for _, o := range Outside {
		if _, ok := ReachesUnder(g, pkg, o.To); !ok {
			t.Errorf("kjobotel does not depend on %s: the check looks for a package no longer there; update Outside", o.To)
		}
	}
}

// Check finds an upward import and an unlisted package.
func TestCheckFindsUpwardImports(t *testing.T) {
	ls := []Layer{{"low", []string{"a", "b/..."}}, {"high", []string{"c"}}}
	g := map[string][]string{"a": {"b/x"}, "b/x": {"c"}, "c": {"a"}, "d": nil}
	up, unlisted := Check(ls, g)
	if len(up) != 1 || up[0] != (Import{"b/x", "c"}) {
		t.Errorf("upward = %v, want [{b/x c}]", up)
	}
	if len(unlisted) != 1 || unlisted[0] != "d" {
		t.Errorf("unlisted = %v, want [d]", unlisted)
	}
	if path, ok := Reaches(g, "a", "c"); !ok || strings.Join(path, " ") != "a b/x c" {
		t.Errorf("Reaches(a, c) = %v %v, want a b/x c", path, ok)
	}
	if _, ok := Reaches(g, "d", "a"); ok {
		t.Error("Reaches(d, a) = true")
	}
	if path, ok := ReachesUnder(g, "a", "b"); !ok || strings.Join(path, " ") != "a b/x" {
		t.Errorf("ReachesUnder(a, b) = %v %v, want a b/x", path, ok)
	}
	if _, ok := ReachesUnder(g, "a", "d"); ok {
		t.Error("ReachesUnder(a, d) = true")
	}
}

// The binaries of Unlinked hold no symbol of the packages they must not
// link.
func TestUnlinked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range Unlinked {
		bin := filepath.Join(t.TempDir(), filepath.Base(u.From))
		build := exec.Command("go", "build", "-o", bin, "./"+u.From)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./%s: %v\n%s", u.From, err, out)
		}
		out, err := exec.Command("go", "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", bin, err)
		}
		var syms []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, Module+"/"+u.To+".") {
				syms = append(syms, strings.TrimSpace(line))
			}
		}
		if len(syms) > 0 {
			t.Errorf("%s links %d symbols of %s, e.g. %s: call it only from code %s never reaches", u.From, len(syms), u.To, syms[0], u.From)
		}
	}
}

// Under internal/ each top folder is one layer, and nothing outside
// internal/ is importable but the public packages.
func TestFolders(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Graph(root)
	if err != nil {
		t.Fatal(err)
	}
	folderLayer := map[string]int{}
	for _, p := range sortedKeys(g) {
		if p == "internal/testkit/layers" {
			continue // the lint itself runs with the suites
		}
		rest, ok := strings.CutPrefix(p, "internal/")
		if !ok {
			if strings.HasPrefix(p, "cmd/") || p == "cmd" || strings.HasPrefix(p, "test") || strings.HasPrefix(p, "bench") || strings.HasPrefix(p, "deploy") {
				continue
			}
			if !slices.Contains(Public, p) {
				t.Errorf("package %s is importable from outside the module but is not in Public: move it under internal/, or add it to Public on purpose", p)
			}
			continue
		}
		folder, _, _ := strings.Cut(rest, "/")
		l := LayerOf(Layers, p)
		if prev, ok := folderLayer[folder]; ok && prev != l {
			t.Errorf("internal/%s holds packages of two layers (%d and %d), e.g. %s: a folder is one layer", folder, prev, l, p)
		}
		folderLayer[folder] = l
	}
}
