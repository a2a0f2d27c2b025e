package buildinfo_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/buildinfo"
)

func TestFromBuildInfo(t *testing.T) {
	for name, tc := range map[string]struct {
		bi   debug.BuildInfo
		want string
	}{
		"stamped": {
			bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-24T08:00:00Z"}, {Key: "vcs.modified", Value: "false"},
			}},
			want: "v1.2.0 (commit 0123abcd, 2026-11-24T08:00:00Z, go1.26.0)",
		},
		"modified work tree": {
			bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"},
			}},
			want: "(devel) (commit 0123abcd-modified, go1.26.0)",
		},
		"no stamp": {
			bi:   debug.BuildInfo{GoVersion: "go1.26.0"},
			want: "(devel) (commit unknown, go1.26.0)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := buildinfo.FromBuildInfo(&tc.bi).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadNamesTheToolchain(t *testing.T) {
	if in := buildinfo.Read(); !strings.HasPrefix(in.GoVersion, "go") || in.Version == "" || in.Commit == "" {
		t.Errorf("Read() = %+v", in)
	}
}
