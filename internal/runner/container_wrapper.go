package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
)

// containerFiles are where a container job's wrapper leaves the script's
// output on the shared storage: <work_dir>/<job id>.stdout, .stderr and
// .exit (the exit status, written last, atomically), named by the job so
// that jobs sharing a work_dir do not read each other's.
type containerFiles struct {
	stdout, stderr, exit string
}

func filesOf(workDir, jobID string) containerFiles {
	base := path.Join(workDir, jobID)
	return containerFiles{stdout: base + ".stdout", stderr: base + ".stderr", exit: base + ".exit"}
}

// ContainerStartScript returns the start script of a container job: bash
// that writes the user's script into the work directory (a quoted
// here-document, so nothing in it is expanded), runs it there with stdout
// and stderr redirected into files, and then writes its exit status to a
// temporary file renamed into place, so that a reader sees the whole
// status or none.
// The here-document's delimiter is derived from the script's hash and
// lengthened until no line of the script equals it. workDir and jobID
// contain no single quote (jobspec and the id rules make sure).
func ContainerStartScript(jobID, workDir, script string) string {
	if !strings.HasSuffix(script, "\n") {
		script += "\n"
	}
	sum := sha256.Sum256([]byte(script))
	delim := "SLUICE_SCRIPT_" + hex.EncodeToString(sum[:6])
	for lineIn(script, delim) {
		delim += "_"
	}
	f := filesOf("$SLUICE_WORK_DIR", jobID)
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	b.WriteString("# sluice container job " + jobID + ": the script's stdout, stderr and exit status go to the work directory.\n")
	b.WriteString("SLUICE_WORK_DIR='" + workDir + "'\n")
	b.WriteString(`mkdir -p "$SLUICE_WORK_DIR" || exit 1` + "\n")
	b.WriteString(`cat > "$SLUICE_WORK_DIR/` + jobID + `.sh" <<'` + delim + "'\n")
	b.WriteString(script)
	b.WriteString(delim + "\n")
	b.WriteString(`(cd "$SLUICE_WORK_DIR" && exec bash "$SLUICE_WORK_DIR/` + jobID + `.sh") >"` + f.stdout + `" 2>"` + f.stderr + `" </dev/null` + "\n")
	b.WriteString(`echo $? > "` + f.exit + `.tmp"` + "\n")
	b.WriteString(`mv -f "` + f.exit + `.tmp" "` + f.exit + `"` + "\n")
	return b.String()
}

func lineIn(text, line string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
