package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile checks the Dockerfile's promises without a Docker engine:
// a Go build stage producing static binaries of every command, copied into
// a distroless image that runs as non-root. (The build itself runs where
// Docker exists: make test-containers.)
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
		if strings.HasPrefix(l, "FROM ") {
			from = append(from, l)
		}
	}
	if len(from) != 2 || !regexp.MustCompile(`^FROM golang:\S+ AS build$`).MatchString(from[0]) ||
		!regexp.MustCompile(`^FROM gcr\.io/distroless/static(-debian\d+)?:nonroot$`).MatchString(from[1]) {
		t.Fatalf("stages %q: want a golang build stage and a distroless/static:nonroot final stage", from)
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "CGO_ENABLED=0") {
		t.Error("the build must set CGO_ENABLED=0: distroless/static has no libc")
	}
	cmds, _ := filepath.Glob(filepath.Join("..", "cmd", "*"))
	for _, c := range cmds {
		if filepath.Base(c) == "internal" {
			continue // the binaries' shared code, not a command
		}
		if filepath.Base(c) == "kjobdev" {
			continue // the demo and the development broker: not for a production image
		}
		if !strings.Contains(all, "./cmd/"+filepath.Base(c)) {
			t.Errorf("the image does not build ./cmd/%s", filepath.Base(c))
		}
	}
	var user string
	for _, l := range lines {
		if strings.HasPrefix(l, "USER ") {
			user = strings.TrimPrefix(l, "USER ")
		}
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("USER %q: the image must run as a non-root user", user)
	}
	if !strings.Contains(all, "COPY --from=build /out/ /") {
		t.Error("the final stage must copy the binaries from the build stage")
	}
	// testcontainers (make test-containers) builds through the Docker
	// engine's build API, whose default builder has no BuildKit syntax.
	if strings.Contains(all, "--mount") || regexp.MustCompile(`(?m)^#\s*syntax=`).Match(b) {
		t.Error("the Dockerfile uses BuildKit-only syntax (RUN --mount or a # syntax= line); test/containers builds it with the engine's build API, which lacks it")
	}
}
