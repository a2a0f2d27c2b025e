// Package buildinfo tells which build of sluice is running: the module
// version and the VCS commit the Go toolchain stamped into the binary. Both
// binaries print it for --version and the worker exports it as the
// sluice_build_info metric.
package buildinfo

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info describes one build.
type Info struct {
	// Version is the main module's version: a tag such as v1.2.0 for a
	// binary built with go install module@version, a pseudo-version, or
	// "(devel)" for a build from a work tree.
	Version string
	// Commit is the VCS revision the binary was built from, with
	// "-modified" when the work tree had uncommitted changes; "unknown"
	// when the build carries no VCS stamp (go run, go test, -buildvcs=false,
	// a build outside a repository).
	Commit string
	// Time is the commit's time (RFC 3339), "" when unknown.
	Time string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "(unknown)", Commit: "unknown", GoVersion: runtime.Version()}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo extracts an Info from bi.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: cmp.Or(bi.Main.Version, "(devel)"), GoVersion: cmp.Or(bi.GoVersion, runtime.Version())}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case in.Commit == "":
		in.Commit = "unknown"
	case modified:
		in.Commit += "-modified"
	}
	return in
}

// String is the --version line: "<program> <version> (commit <commit>,
// <time>, <go version>)".
func (in Info) String() string {
	when := ""
	if in.Time != "" {
		when = ", " + in.Time
	}
	return fmt.Sprintf("%s (commit %s%s, %s)", in.Version, in.Commit, when, in.GoVersion)
}
