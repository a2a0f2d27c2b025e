package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// knownSecrets are the values no output may carry: the credentials the
// worker is given and the parts of a presigned URL that make it a
// credential.
var knownSecrets = []string{secretMediaKey, secretComputePass, secretComputeSK, secretS3Key, secretConsole, "X-Amz-Signature", "X-Amz-Credential"}

// leaks returns a description of every secret found in hay.
func leaks(hay string, secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		if i := strings.Index(hay, s); i >= 0 {
			out = append(out, fmt.Sprintf("%q: ...%s...", s, hay[max(0, i-200):min(len(hay), i+100)]))
		}
	}
	return out
}

// stateDump returns every record in SLUICE_STATE as it is stored, error
// messages included.
func (b *bundle) stateDump(t *testing.T) string {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := b.nats.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		return ""
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Errorf("list state keys: %v", err)
		return ""
	}
	var out strings.Builder
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			t.Errorf("state %s: %v", k, err)
			continue
		}
		out.Write(e.Value())
		out.WriteByte('\n')
	}
	return out.String()
}

// An upstream that echoes everything it was sent (the bearer key, the
// presigned input URLs) in its error messages and result addresses, a
// compute job (tokens) and the enqueue CLI reading the outcome back: no
// secret reaches a log line, an event, a dead letter, a state record or
// the CLI's output.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h := newHostileMedia(t)
	_, err := b.s3.Client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String("inputs/frame.png"), Body: bytes.NewReader(testmedia.Fixture(t, "image-384x256.png")),
	})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t, func(c *config.Config) { c.MediaBaseURL = h.srv.URL })
	ids := []string{"echo-refused", "echo-failed", "echo-result"}
	for _, id := range ids {
		spec := videoSpec(id, id)
		spec["video"].(map[string]any)["input"] = map[string]any{
			"prompt": id,
			"media":  []map[string]string{{"type": "first_frame", "url": "s3://" + b.s3.Bucket + "/inputs/frame.png"}},
		}
		b.publish(t, "video", id, spec)
	}
	b.publish(t, "compute", "secret-hpc", computeSpec(t, b, "secret-hpc", "#!/bin/sh\necho hi\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))
	ids = append(ids, "secret-hpc")

	for _, c := range []struct{ id, status, code string }{
		{"echo-refused", "failed", "invalid_parameter"},
		{"echo-failed", "failed", "bad_input"},
		{"echo-result", "succeeded", ""},
		{"secret-hpc", "succeeded", ""},
	} {
		ev := b.await(t, c.id, 30*time.Second)
		if ev.Data.Status != c.status || (c.code != "" && (ev.Data.Error == nil || ev.Data.Error.Code != c.code)) {
			t.Errorf("%s: %s %+v, want %s %s", c.id, ev.Data.Status, ev.Data.Error, c.status, c.code)
		}
		for _, a := range ev.Data.Artifacts {
			b.objectSHA(t, a)
		}
	}
	if e := h.echo("echo-refused"); h.submitCount("echo-refused") != 1 || !strings.Contains(e, "X-Amz-Signature") {
		t.Fatalf("the upstream never saw a presigned URL to echo: %q", e)
	}

	// The CLI, reading the outcome back over a NATS URL with credentials.
	natsPassword := "natspw-SECRET-5e1"
	natsURL := strings.Replace(b.nats.URL, "nats://", "nats://sluice:"+natsPassword+"@", 1)
	var out bytes.Buffer
	env := cli.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out,
		Getenv:     func(k string) string { return map[string]string{"SLUICE_NATS_URL": natsURL}[k] },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now, Rand: strings.NewReader(strings.Repeat("r", 64)),
	}
	ctx := testenv.Context(t, 30*time.Second)
	for _, args := range [][]string{
		append([]string{"status"}, ids...),
		append([]string{"status", "--json"}, ids...),
		{"status", "--nats-url", "nats://sluice:" + natsPassword + "@127.0.0.1:1", "echo-failed"},
	} {
		code := cli.Run(ctx, args, env)
		fmt.Fprintf(&out, "\n[exit %d]\n", code)
	}
	if !strings.Contains(out.String(), "echo-failed") || !strings.Contains(out.String(), "bad_input") {
		t.Errorf("the CLI did not show the jobs:\n%s", out.String())
	}
	t.Logf("CLI output:\n%s", out.String())
	secrets := append(append([]string{natsPassword}, knownSecrets...), b.compute.Tokens()...)
	for _, l := range leaks(out.String(), secrets) {
		t.Errorf("CLI output leaks %s", l)
	}
	hay := b.logs.String() + b.stateDump(t)
	for _, ev := range b.events(t) {
		j, _ := json.Marshal(ev)
		hay += string(j)
	}
	for _, m := range b.deadLetters(t) {
		hay += fmt.Sprint(m.Header)
	}
	for _, l := range leaks(hay, secrets) {
		t.Errorf("leak: %s", l)
	}
}
