package contract_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestEnsureIsIdempotent(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, n.JS)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, n.JS)
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s changed on the second Ensure:\n%s\n%s", name, b, after[name])
		}
	}
	jobs, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobs.CachedInfo().Config
	if cfg.Retention != jetstream.WorkQueuePolicy || cfg.Duplicates != time.Hour || cfg.Storage != jetstream.FileStorage {
		t.Errorf("jobs stream = %+v", cfg)
	}
	for _, kind := range contract.Kinds {
		c, err := n.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName(kind))
		if err != nil {
			t.Fatalf("consumer %s: %v", kind, err)
		}
		cc := c.CachedInfo().Config
		if filters(cc) != "sluice.jobs."+kind+" sluice.jobs."+kind+".t.*" || cc.AckPolicy != jetstream.AckExplicitPolicy || cc.Durable != "sluice-"+kind {
			t.Errorf("consumer %s = %+v", kind, cc)
		}
	}
	if err := contract.Present(ctx, n.JS); err != nil {
		t.Errorf("Present: %v", err)
	}
}

func snapshot(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	out := map[string]string{}
	for _, name := range []string{contract.JobsStream, contract.EventsStream, contract.DLQStream, "KV_" + contract.StateBucket, "KV_" + contract.TenantsBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info := s.CachedInfo()
		out[name] = info.Created.String() + " " + fmtConfig(info.Config)
	}
	return out
}

func fmtConfig(c jetstream.StreamConfig) string {
	return c.Name + " " + c.Description + " " + c.MaxAge.String() + " " + c.Duplicates.String()
}

func TestEnsureJobsStreamLeavesAnExistingStreamAlone(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	cfg := contract.JobsStreamConfig(contract.Options{})
	cfg.Description = "set by an operator"
	if _, err := n.JS.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := contract.EnsureJobsStream(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	if d := s.CachedInfo().Config.Description; d != "set by an operator" {
		t.Errorf("description = %q", d)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	if contract.EventSubject("video", "succeeded") != "sluice.events.video.succeeded" ||
		contract.DLQSubject("speech") != "sluice.dlq.speech" || contract.EventID("a", "failed") != "a.failed" {
		t.Error("names differ from the contract")
	}
	for subject, want := range map[string]string{"sluice.jobs.video": "video", "sluice.jobs.": "", "sluice.jobs.a.b": "", "other.video": ""} {
		got, err := contract.KindOfSubject(subject)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("KindOfSubject(%q) = %q, %v", subject, got, err)
		}
	}
}

func TestKindOfMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ subject, data, want string }{
		{"sluice.jobs.video", `{}`, "video"},
		{"sluice.jobs.speech.extra", `{"kind":"video"}`, "speech"},
		{"sluice.jobs.vidoe", `{"kind":"video"}`, "video"},
		{"sluice.jobs.foo", `{"kind":"foo"}`, contract.KindUnknown},
		{"sluice.jobs.foo", `not json`, contract.KindUnknown},
	} {
		if got := contract.KindOfMessage(c.subject, []byte(c.data)); got != c.want {
			t.Errorf("KindOfMessage(%q, %q) = %q, want %q", c.subject, c.data, got, c.want)
		}
	}
	for subject, want := range map[string]bool{
		"sluice.jobs.video": true, "sluice.jobs.compute": true, "sluice.jobs.foo": false,
		"sluice.jobs.speech.extra": false, "sluice.jobs.unknown": false,
	} {
		if got := contract.Served(subject); got != want {
			t.Errorf("Served(%q) = %v", subject, got)
		}
	}
}

// TestEnsureKeepsSizeLimits: the jobs and events streams refuse new
// messages at a limit rather than drop old ones, and a second Ensure keeps
// the byte and message limits an operator set on the streams and buckets.
func TestEnsureKeepsSizeLimits(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	limited := []string{contract.JobsStream, contract.EventsStream, "KV_" + contract.StateBucket, "KV_" + contract.SpecsBucket, "KV_" + contract.TenantsBucket}
	for _, name := range limited {
		s, err := n.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Discard != jetstream.DiscardNew {
			t.Errorf("%s discards %v at a limit, want new", name, cfg.Discard)
		}
		cfg.MaxBytes = 8 << 20
		if name == contract.JobsStream || name == contract.EventsStream {
			cfg.MaxMsgs = 1000
		}
		if _, err := n.JS.UpdateStream(ctx, cfg); err != nil {
			t.Fatalf("limit %s: %v", name, err)
		}
	}
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range limited {
		s, err := n.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		wantMsgs := int64(-1)
		if name == contract.JobsStream || name == contract.EventsStream {
			wantMsgs = 1000
		}
		if cfg.MaxBytes != 8<<20 || cfg.MaxMsgs != wantMsgs {
			t.Errorf("%s after a second Ensure: max_bytes %d, max_msgs %d; want %d, %d", name, cfg.MaxBytes, cfg.MaxMsgs, 8<<20, wantMsgs)
		}
	}
}
