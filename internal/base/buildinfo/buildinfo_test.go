package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kjob/kjob", Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "4a6d67b2c9f1e0d8a7b6c5d4e3f2a1b0c9d8e7f6"},
		{Key: "vcs.time", Value: "2026-11-24T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got, want := versionOf(bi), "v1.4.0 revision 4a6d67b2c9f1e0d8a7b6c5d4e3f2a1b0c9d8e7f6 (2026-11-24T10:00:00Z, modified), go1.26.8"; got != want {
		t.Errorf("versionOf = %q, want %q", got, want)
	}
	bi.Settings = nil
	bi.Main.Version = "(devel)"
	if got := versionOf(bi); !strings.HasPrefix(got, "(devel), revision unknown") {
		t.Errorf("without VCS information: %q", got)
	}
	if got := Version(); !strings.Contains(got, "go1.") {
		t.Errorf("Version() = %q", got)
	}
}
