// Package layers declares the layering of kjob's packages and finds the
// imports that run against it: a package may import packages of its own
// layer or of a lower one, never of a higher one. The test of this package
// fails on any such upward import, and on a package of the module that no
// layer lists, so a new package is placed on purpose.
//
// Print the module's import graph, layer by layer, with
//
//	go test -run TestLayers -v ./internal/testkit/layers
package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Module is the module path of kjob.
const Module = "github.com/kjob/kjob"

// Layer is a set of packages (directories relative to the module root)
// that may import each other and any lower layer.
type Layer struct {
	// Name says what the layer holds.
	Name string
	// Packages are directories relative to the module root; a trailing
	// "/..." also covers every directory below.
	Packages []string
}

// Layers is kjob's layering, lowest first. Under internal/ a folder is a
// layer: every package below internal/base is a leaf helper, every one
// below internal/store a store or codec, and so on, so the folders show
// the layers and TestFolders keeps it so. The public packages (the root,
// kjobtest, schedule and kubelease) sit in the layer of what they are.
var Layers = []Layer{
	{"leaf helpers", []string{"internal/base/..."}},
	{"stores and codecs", []string{"internal/store/...", "schedule", "kubelease"}},
	{"execution: worker, producer, control, handlers", []string{"internal/exec/..."}},
	{"operator tooling", []string{"internal/ops/..."}},
	// kjobotel, the public tracing plug-in, builds an OpenTelemetry SDK
	// provider from the OTEL_* environment; it is observability, outside
	// internal/ so that a user's main may opt in to tracing as the
	// binaries do, and apart from the root (see Apart and Outside).
	{"observability", []string{"internal/obs/...", "kjobotel"}},
	{"test infrastructure", []string{"internal/testkit/testenv", "internal/testkit/devredis", "internal/testkit/chaos", "internal/testkit/specleader"}},
	{"the public API: whole worker and producer processes, and the test kit", []string{".", "kjobtest"}},
	{"binaries, their shared flags, and the suites", []string{
		"cmd/...", "test/...", "bench/...", "deploy", "deploy/...", "internal/testkit/layers",
	}},
}

// Public lists the packages a user may import; everything else is under
// internal/ (or is a main, a suite or the manifests' test). kjobotel is
// the opt-in tracing plug-in (FromEnv), as franz-go's kotel is for its
// client: public so that a user's own main can trace as the binaries do.
var Public = []string{".", "kjobtest", "schedule", "kubelease", "kjobotel"}

// Import is one import of a package of the module by another.
type Import struct {
	// From and To are directories relative to the module root (in
	// Outside, To is the import path of another module's package).
	From, To string
}

// Graph returns the internal imports of the module rooted at root: for
// each directory with Go files, the module's packages its files import
// (test files left out: a test may use any helper). Files of every build
// tag count, so a file built only with a tag cannot hide an import.
func Graph(root string) (map[string][]string, error) {
	g := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// third_party holds other projects' modules, copied in for a
			// replace directive (third_party/kfake): not kjob's packages.
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "third_party") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := g[rel]; !ok {
			g[rel] = nil
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			to, ok := strings.CutPrefix(p, Module+"/")
			if p == Module { // the module's root package, kjob itself
				to, ok = ".", true
			}
			if ok && !slices.Contains(g[rel], to) {
				g[rel] = append(g[rel], to)
			}
		}
		return nil
	})
	for _, tos := range g {
		slices.Sort(tos)
	}
	return g, err
}

// LayerOf returns the index in layers of the layer that lists pkg, or -1.
func LayerOf(layers []Layer, pkg string) int {
	for i, l := range layers {
		for _, p := range l.Packages {
			if base, ok := strings.CutSuffix(p, "/..."); ok {
				if pkg == base || strings.HasPrefix(pkg, base+"/") {
					return i
				}
			} else if pkg == p {
				return i
			}
		}
	}
	return -1
}

// Check returns the imports of g that run up to a higher layer, and the
// packages of g that no layer lists.
func Check(layers []Layer, g map[string][]string) (upward []Import, unlisted []string) {
	for _, from := range sortedKeys(g) {
		lf := LayerOf(layers, from)
		if lf < 0 {
			unlisted = append(unlisted, from)
			continue
		}
		for _, to := range g[from] {
			if lt := LayerOf(layers, to); lt > lf {
				upward = append(upward, Import{from, to})
			}
		}
	}
	return upward, unlisted
}

// Apart lists packages that must not depend on others, not even through a
// package between them: what a process links that it does not need is
// code that can break it, and a wider reach than the layering shows.
var Apart = []Import{
	// The worker and producer binaries do not link the operators' code.
	{"cmd/worker", "internal/ops/operator"}, {"cmd/worker", "internal/ops/dashboard"},
	{"cmd/producer", "internal/ops/operator"}, {"cmd/producer", "internal/ops/dashboard"},
	// The read side decodes the state topic with its codec, not the producer.
	{"internal/ops/inspect", "internal/exec/producer"},
	// Operators' tools do not link the worker or producer.
	{"internal/ops/operator", "internal/exec/worker"}, {"internal/ops/operator", "internal/exec/producer"},
	// The library links no test infrastructure.
	{".", "internal/testkit/testenv"}, {".", "internal/testkit/devredis"},
	// Tracing is opt-in: the library takes a TracerProvider, and only a
	// main that wants the OTEL_* set-up imports kjobotel.
	{".", "kjobotel"}, {"kjobtest", "kjobotel"},
}

// Outside lists, as Apart does, a package of the module (From) and a
// package of another module (To, with every package below it) that From
// must not depend on, not even through other modules' packages. Graph
// sees only the module's own imports: its test asks go list -deps.
//
// Observability is opt-in: a program that imports a public package other
// than kjobotel links the OpenTelemetry API (for kotel and the
// TracerProvider fields), never its SDK, the OTLP exporter, or the gRPC
// that the exporter's protobuf types bring in (66 packages of gRPC and 50
// of OpenTelemetry, before). kjobotel, the plug-in, links all three.
var Outside = outside([]string{".", "kjobtest", "schedule", "kubelease"},
	"google.golang.org/grpc", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters")

func outside(from []string, to ...string) []Import {
	var out []Import
	for _, f := range from {
		for _, t := range to {
			out = append(out, Import{f, t})
		}
	}
	return out
}

// Unlinked lists binaries (From) that depend on a package (To) only
// through the module root, which assembles both the worker and the
// producer (kjob.Worker, kjob.Producer), and must link none of its code:
// the linker drops what a binary never calls, so the built binary, not
// the import graph, is what can show it. Its test builds each From and
// reads its symbols (go tool nm).
var Unlinked = []Import{
	// The producer binary does not link the worker's control agent.
	{"cmd/producer", "internal/exec/control"},
}

// ReachesUnder reports whether from depends in g on to or a package below
// it (to + "/..."), and returns one path to the first such package in
// sorted order.
func ReachesUnder(g map[string][]string, from, to string) ([]string, bool) {
	var under []string
	for p, imps := range g {
		for _, q := range append([]string{p}, imps...) {
			if (q == to || strings.HasPrefix(q, to+"/")) && !slices.Contains(under, q) {
				under = append(under, q)
			}
		}
	}
	slices.Sort(under)
	for _, q := range under {
		if path, ok := Reaches(g, from, q); ok {
			return path, true
		}
	}
	return nil, false
}

// Reaches reports whether from depends on to in g, directly or through
// other packages, and returns one path from one to the other.
func Reaches(g map[string][]string, from, to string) ([]string, bool) {
	seen := map[string]bool{from: true}
	var walk func(p string, path []string) ([]string, bool)
	walk = func(p string, path []string) ([]string, bool) {
		for _, q := range g[p] {
			if q == to {
				return append(path, q), true
			}
			if !seen[q] {
				seen[q] = true
				if r, ok := walk(q, append(path, q)); ok {
					return r, true
				}
			}
		}
		return nil, false
	}
	return walk(from, []string{from})
}

// Print writes g layer by layer: each package with the module's packages
// it imports, an upward import marked "UP".
func Print(w *strings.Builder, layers []Layer, g map[string][]string) {
	for i, l := range layers {
		fmt.Fprintf(w, "layer %d: %s\n", i, l.Name)
		for _, from := range sortedKeys(g) {
			if LayerOf(layers, from) != i {
				continue
			}
			var tos []string
			for _, to := range g[from] {
				if LayerOf(layers, to) > i {
					to += " (UP)"
				}
				tos = append(tos, to)
			}
			fmt.Fprintf(w, "  %s -> %s\n", from, strings.Join(tos, ", "))
		}
	}
}

// Root returns the module root: the nearest directory at or above dir with
// a go.mod.
func Root(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
	}
}

func sortedKeys(g map[string][]string) []string {
	ks := make([]string, 0, len(g))
	for k := range g {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
