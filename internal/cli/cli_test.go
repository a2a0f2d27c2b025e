package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestWaitOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		counts  jobclient.Counts
		err     error
		outcome string
		code    int
	}{
		{"all succeeded", jobclient.Counts{Total: 2, Succeeded: 2}, nil, "succeeded", ExitOK},
		{"failed and cancelled", jobclient.Counts{Total: 3, Succeeded: 1, Failed: 1, Cancelled: 1}, nil, "failed", ExitFailed},
		{"cancelled", jobclient.Counts{Total: 2, Succeeded: 1, Cancelled: 1}, nil, "cancelled", ExitCancelled},
		{"timeout", jobclient.Counts{Total: 2, Succeeded: 1, Running: 1}, fmt.Errorf("wait: %w", jobclient.ErrTimeout), "timeout", ExitTimeout},
		{"timeout with a failure", jobclient.Counts{Total: 2, Failed: 1, Running: 1}, jobclient.ErrTimeout, "failed", ExitFailed},
		{"timeout with a cancel", jobclient.Counts{Total: 2, Cancelled: 1, Queued: 1}, jobclient.ErrTimeout, "timeout", ExitTimeout},
		{"interrupted", jobclient.Counts{Total: 1, Queued: 1}, context.Canceled, "interrupted", ExitInterrupted},
		{"connection lost", jobclient.Counts{Total: 1, Queued: 1}, errors.New("connection closed"), "error", ExitRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			outcome, code := waitOutcome(tt.counts, tt.err)
			if outcome != tt.outcome || code != tt.code {
				t.Errorf("waitOutcome = %s, %d; want %s, %d", outcome, code, tt.outcome, tt.code)
			}
		})
	}
}

func TestFlagFor(t *testing.T) {
	t.Parallel()
	names := flagNames{"video.input": "--prompt", "video.input.media[1]": "--ref-image", "video.input.media": "--media"}
	tests := []struct{ path, want string }{
		{"video.input.prompt", "--prompt"},
		{"video.input.media[1]", "--ref-image"},
		{"video.input.media[1].url", "--ref-image"},
		{"video.input.media[10]", "--media"},
		{"video.inputs", ""},
		{"speech", ""},
	}
	for _, tt := range tests {
		if got := names.flagFor(tt.path); got != tt.want {
			t.Errorf("flagFor(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestParseAllowsFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		pos  string
		json bool
	}{
		{[]string{"a", "--json", "b"}, "[a b]", true},
		{[]string{"--json", "a"}, "[a]", true},
		{[]string{"a", "--", "--json"}, "[a --json]", false},
		{nil, "[]", false},
	}
	for _, tt := range tests {
		a := &app{env: Env{Stdout: io.Discard}}
		fs := newFlagSet("status")
		var cf connFlags
		cf.register(fs)
		pos, err := a.parse(fs, func(io.Writer) {}, tt.args)
		if err != nil || fmt.Sprint(pos) != tt.pos || cf.json != tt.json {
			t.Errorf("parse(%q) = %q, json %v, %v; want %s, json %v", tt.args, pos, cf.json, err, tt.pos, tt.json)
		}
	}
}

// TestProgressOnTerminal runs a bulk submit with --wait in process, with a
// terminal for stderr, for jobs whose state records say they have ended: the
// bars are drawn and the summary is printed.
func TestProgressOnTerminal(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewStore(kv, "test", nil)
	for i := range 3 {
		if _, err := store.Update(ctx, fmt.Sprintf("p-%d", i), func(r *state.Record) error {
			r.Kind, r.Status, r.Attempts = "speech", state.StatusSucceeded, 1
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var in strings.Builder
	for i := range 3 {
		fmt.Fprintf(&in, `{"id":"p-%d","kind":"speech","speech":{"model":"m","input":{"text":"t","voice":"v"}}}`+"\n", i)
	}
	var stdout, stderr bytes.Buffer
	env := Env{
		Stdin:      strings.NewReader(in.String()),
		Stdout:     &stdout,
		Stderr:     &stderr,
		Getenv:     func(k string) string { return map[string]string{"SLUICE_NATS_URL": n.URL}[k] },
		IsTerminal: func(w io.Writer) bool { return w == &stderr },
		Now:        time.Now,
		Rand:       strings.NewReader(""),
	}
	code := Run(ctx, []string{"submit", "-f", "-", "--wait", "--timeout", "60s"}, env)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	for _, want := range []string{"publishing", "/3)", "queued", "running 0 · done"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q: %q", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "3 published, 0 duplicates") || !strings.Contains(stdout.String(), "3 succeeded, 0 failed") {
		t.Errorf("stdout: %s", &stdout)
	}
}

// An invalid spec's problems are shown one per line, by status and by
// --wait, not as one long line.
func TestErrorProblemsOnePerLine(t *testing.T) {
	t.Parallel()
	j := &jobclient.Job{ID: "clip-1", Kind: "video", Status: "failed"}
	j.Error = &state.Error{Code: "invalid_spec", Stage: state.StageValidate,
		Message: "video.model: required; video.parameters.duration: must be an integer in [4, 15]; video.parameters.ratio: required"}
	var status, wait bytes.Buffer
	printStatus(&status, j)
	printJobLine(&wait, j)
	for name, out := range map[string]string{"status": status.String(), "wait": wait.String()} {
		for _, want := range []string{"invalid_spec (validate):\n", "video.model: required\n", "video.parameters.duration: must be an integer in [4, 15]\n", "video.parameters.ratio: required\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s output lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "; ") {
			t.Errorf("%s output joins problems on one line:\n%s", name, out)
		}
	}
	// Another error stays on its line.
	j.Error = &state.Error{Code: "upstream_rejected", Stage: state.StageSubmit, Message: "bad thing; really"}
	status.Reset()
	printStatus(&status, j)
	if !strings.Contains(status.String(), "upstream_rejected (submit): bad thing; really\n") {
		t.Errorf("status:\n%s", status.String())
	}
}

// TestRefusalTextNamesTheFlag: a refusal that --force would lift says so
// by the flag's name.
func TestRefusalTextNamesTheFlag(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w x: %w", jobclient.ErrNotRetryable, jobclient.ErrSucceeded), "cannot retry x: it succeeded (--force runs it anyway)"},
		{fmt.Errorf("retry x: %w", jobclient.ErrMayPayTwice), "retry x: its submission may have reached upstream: running it again may pay twice (--force runs it anyway)"},
		{fmt.Errorf("%w x: it has not ended", jobclient.ErrNotRetryable), "cannot retry x: it has not ended"},
	} {
		if got := refusalText(tt.err); got != tt.want {
			t.Errorf("refusalText = %q, want %q", got, tt.want)
		}
	}
}
