package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
)

// marshalLine encodes v as compact JSON without HTML escaping.
func marshalLine(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// printArtifacts writes one line per artifact: URL, size, sha256.
func printArtifacts(w io.Writer, indent string, arts []state.Artifact) {
	for _, art := range arts {
		fmt.Fprintf(w, "%s%s  %d bytes  sha256 %s\n", indent, art.URL, art.Size, art.SHA256)
	}
}

// errorText is "code (stage): message".
func errorText(e *state.Error) string {
	if e == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s): %s", e.Code, e.Stage, e.Message)
}

// errorLines is errorText for people: an invalid spec's problems, which
// the message joins with "; ", come one per line after the first, so a
// spec with ten problems is not one 1,000-character line.
func errorLines(e *state.Error) []string {
	if e == nil {
		return nil
	}
	if e.Code != "invalid_spec" || !strings.Contains(e.Message, "; ") {
		return []string{errorText(e)}
	}
	return append([]string{fmt.Sprintf("%s (%s):", e.Code, e.Stage)}, strings.Split(e.Message, "; ")...)
}

// lastErrorText is a retried step's last error in one line: the step,
// since when it fails, the code if any, and the error.
func lastErrorText(e *state.StepError) string {
	if e == nil {
		return ""
	}
	text := fmt.Sprintf("%s since %s: ", e.Step, e.Since.UTC().Format(time.RFC3339))
	if e.Code != "" {
		text += e.Code + ": "
	}
	return text + e.Message
}

// upstreamText lists the upstream ids that are set.
func upstreamText(u *state.Upstream) string {
	if u == nil {
		return ""
	}
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("task_id", u.TaskID)
	add("request_id", u.RequestID)
	add("cluster_id", u.ClusterID)
	add("job_id", u.JobID)
	add("status", u.Status)
	add("state", u.State)
	if u.ExitCode != nil {
		add("exit_code", *u.ExitCode)
	}
	return strings.Join(parts, ", ")
}

// printJobLine writes a job's outcome: its id and status, its error, its
// artifacts.
func printJobLine(w io.Writer, j *jobclient.Job) {
	switch {
	case j.Error != nil:
		lines := errorLines(j.Error)
		fmt.Fprintf(w, "%s  %s  %s\n", j.ID, j.Status, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "    %s\n", l)
		}
	case !j.Terminal() && j.LastError != nil:
		fmt.Fprintf(w, "%s  %s  (not finished; retrying %s)\n", j.ID, j.Status, lastErrorText(j.LastError))
	case !j.Terminal():
		fmt.Fprintf(w, "%s  %s  (not finished)\n", j.ID, j.Status)
	default:
		fmt.Fprintf(w, "%s  %s\n", j.ID, j.Status)
	}
	printArtifacts(w, "    ", j.Artifacts)
	printSteps(w, "    ", j.Steps)
}

// printSteps writes a pipeline's steps as a table: name, status, job,
// then what it produced or why it failed.
func printSteps(w io.Writer, indent string, steps []state.PipelineStep) {
	if len(steps) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range steps {
		var note string
		switch {
		case s.Error != nil:
			note = s.Error.Code + ": " + s.Error.Message
		case len(s.Artifacts) > 0:
			note = fmt.Sprintf("%d artifact(s)", len(s.Artifacts))
		}
		if s.Reused {
			note = strings.TrimSpace("reused " + note)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, s.Name, s.Status, s.JobID, note)
	}
	_ = tw.Flush()
	// Below the table, so its columns stay aligned: where each step's
	// results are, the last step's being often what the user came for.
	for _, s := range steps {
		if len(s.Artifacts) > 0 {
			fmt.Fprintf(w, "%s%s artifacts\n", indent, s.Name)
			printArtifacts(w, indent+"  ", s.Artifacts)
		}
	}
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	_, err := w.Write(append(marshalLine(v), '\n'))
	return err
}
