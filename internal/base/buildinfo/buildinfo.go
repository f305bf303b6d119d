// Package buildinfo says which build of kjob is running, for --version.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version describes the build of the running binary, from the module and
// VCS information the go command records (debug.ReadBuildInfo): the main
// module's version ("(devel)" for a build from a checkout, the tag for
// "go install ...@v1.2.3"), the VCS revision, its commit time and whether
// the tree had uncommitted changes, and the Go version, e.g.
// "(devel) revision 4a6d67b2c9f1e0... (2026-11-24T10:00:00Z, modified), go1.26.8".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(no build information: built without module support)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "modified"
			}
		}
	}
	v := bi.Main.Version
	if v == "" {
		v = "(unknown version)"
	}
	if rev == "" {
		return fmt.Sprintf("%s, revision unknown (built without VCS information, e.g. by go run or go test), %s", v, bi.GoVersion)
	}
	var detail []string
	for _, d := range []string{at, modified} {
		if d != "" {
			detail = append(detail, d)
		}
	}
	if len(detail) > 0 {
		rev += " (" + strings.Join(detail, ", ") + ")"
	}
	return fmt.Sprintf("%s revision %s, %s", v, rev, bi.GoVersion)
}
