package config_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
)

func TestDefaultsNeedOnlyABucket(t *testing.T) {
	t.Setenv("SLUICE_S3_BUCKET", "media")
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxInflight != 256 || c.PollInterval != 5*time.Second || c.ComputePoll != 30*time.Second ||
		c.MaxArtifactBytes != 5368709120 || c.HTTPAddr != ":9090" || c.S3Prefix != "sluice" ||
		strings.Join(c.Kinds, ",") != "video,speech,compute,container,pipeline" || c.ShutdownTimeout != 30*time.Second ||
		c.NATSMoveAfter != 10*time.Second || c.AckWait != 60*time.Second || c.SweepInterval != 10*time.Second {
		t.Errorf("defaults = %+v", c)
	}
	if c.WorkerName == "" {
		t.Error("no worker name")
	}
	// The embedded store's documented address, clear of the embedded NATS
	// and the worker's HTTP port.
	if c.DevS3Addr != "127.0.0.1:7070" || strings.HasSuffix(c.DevS3Addr, ":4222") || strings.HasSuffix(c.DevS3Addr, c.HTTPAddr) {
		t.Errorf("SLUICE_DEV_S3_ADDR default = %q", c.DevS3Addr)
	}
}

func TestEveryInvalidValueIsNamed(t *testing.T) {
	for name, value := range map[string]string{
		"SLUICE_KINDS":                 "video,audio",
		"SLUICE_MAX_INFLIGHT":          "0",
		"SLUICE_POLL_INTERVAL":         "-1s",
		"SLUICE_MEDIA_BASE_URL":        "ftp://x",
		"SLUICE_COMPUTE_BASE_URL":      "https://user:pw@host",
		"SLUICE_LOG_FORMAT":            "xml",
		"SLUICE_LOG_LEVEL":             "loud",
		"SLUICE_S3_PART_SIZE":          "1024",
		"SLUICE_S3_PREFIX":             "/abs",
		"SLUICE_ACK_WAIT":              "10ms",
		"SLUICE_MEDIA_MAX_CONCURRENCY": "-3",
		"SLUICE_NATS_CREDS":            "/nonexistent/sluice.creds",
		"SLUICE_NATS_TLS_CA":           "/nonexistent/ca.pem",
		"SLUICE_NATS_TLS_CERT":         "/nonexistent/cert.pem",
		"SLUICE_NATS_TLS_KEY":          "/nonexistent/key.pem",
		"SLUICE_NATS_MOVE_AFTER":       "-5s",
		"SLUICE_COMPUTE_ACCESS_KEY":    "ak-without-secret",
		"SLUICE_COMPUTE_SECRET_KEY":    "sk-without-access-key",
		"SLUICE_COMPUTE_CHUNK_SIZE":    "-1MiB",
		"SLUICE_COMPUTE_AUTH_URL":      "ftp://auth",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("SLUICE_S3_BUCKET", "media")
			t.Setenv(name, value)
			_, err := config.Load()
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("error %v does not name %s", err, name)
			}
		})
	}
}

func TestUnparseableValueNamesTheVariable(t *testing.T) {
	t.Setenv("SLUICE_SHUTDOWN_TIMEOUT", "soon")
	_, err := config.Load()
	if err == nil || !strings.Contains(err.Error(), "SLUICE_SHUTDOWN_TIMEOUT") || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("error = %v", err)
	}
}

func TestSeveralProblemsReportedTogether(t *testing.T) {
	t.Setenv("SLUICE_MAX_INFLIGHT", "0")
	t.Setenv("SLUICE_LOG_FORMAT", "xml")
	_, err := config.Load()
	for _, want := range []string{"SLUICE_S3_BUCKET", "SLUICE_MAX_INFLIGHT", "SLUICE_LOG_FORMAT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %s", err, want)
		}
	}
}

func TestSummaryHasNoSecrets(t *testing.T) {
	t.Setenv("SLUICE_S3_BUCKET", "media")
	t.Setenv("SLUICE_MEDIA_API_KEY", "sk-SECRET")
	t.Setenv("SLUICE_COMPUTE_PASSWORD", "pw-SECRET")
	t.Setenv("SLUICE_COMPUTE_USER", "alice")
	t.Setenv("SLUICE_COMPUTE_ACCESS_KEY", "ak-public")
	t.Setenv("SLUICE_COMPUTE_SECRET_KEY", "sk-SECRET")
	t.Setenv("SLUICE_NATS_URL", "nats://u:natsSECRET@host:4222")
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.Summary() {
		if s, ok := v.(string); ok && strings.Contains(s, "SECRET") {
			t.Errorf("summary %s = %q", k, s)
		}
	}
}

func TestMoveAfterZeroNeverMoves(t *testing.T) {
	t.Setenv("SLUICE_S3_BUCKET", "media")
	t.Setenv("SLUICE_NATS_MOVE_AFTER", "0")
	c, err := config.Load()
	if err != nil || c.NATSMoveAfter != 0 {
		t.Fatalf("SLUICE_NATS_MOVE_AFTER=0: %v, %v", c, err)
	}
}

func TestEveryUnparseableValueIsReportedOnceByName(t *testing.T) {
	t.Setenv("SLUICE_ACK_WAIT", "5")
	t.Setenv("SLUICE_MAX_INFLIGHT", "many")
	t.Setenv("SLUICE_DEV", "yes please")
	_, err := config.Load()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{`SLUICE_ACK_WAIT: cannot parse "5": want a duration`, `SLUICE_MAX_INFLIGHT: cannot parse "many": want a whole number`, `SLUICE_DEV: cannot parse "yes please": want true or false`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "SLUICE_SLUICE") {
		t.Errorf("doubled prefix in %q", msg)
	}
}

func TestDevModeDefaultsAreFastAndExplicitValuesWin(t *testing.T) {
	t.Setenv("SLUICE_DEV", "true")
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.PollFirst != 200*time.Millisecond || c.PollInterval != time.Second || c.ComputePoll != 500*time.Millisecond {
		t.Errorf("dev defaults: poll first %s, interval %s, compute %s", c.PollFirst, c.PollInterval, c.ComputePoll)
	}
	// Loopback, like the embedded NATS and S3 store.
	if c.HTTPAddr != "127.0.0.1:9090" {
		t.Errorf("dev SLUICE_HTTP_ADDR = %q, want 127.0.0.1:9090", c.HTTPAddr)
	}
	t.Setenv("SLUICE_COMPUTE_POLL_INTERVAL", "10s")
	t.Setenv("SLUICE_HTTP_ADDR", ":9191")
	c, err = config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.ComputePoll != 10*time.Second || c.PollInterval != time.Second || c.HTTPAddr != ":9191" {
		t.Errorf("explicit value lost: compute %s, interval %s, http %s", c.ComputePoll, c.PollInterval, c.HTTPAddr)
	}
	t.Setenv("SLUICE_DEV", "false")
	t.Setenv("SLUICE_HTTP_ADDR", "")
	os.Unsetenv("SLUICE_HTTP_ADDR")
	if c, err = config.Parse(); err != nil || c.HTTPAddr != ":9090" {
		t.Fatalf("production SLUICE_HTTP_ADDR: %+v (%v), want the contract's :9090", c, err)
	}
}

func TestComputeChunkSizeUnits(t *testing.T) {
	for value, want := range map[string]int64{"": 8 << 20, "0": 0, "1048576": 1 << 20, "512KiB": 512 << 10, "8MiB": 8 << 20, "1G": 1 << 30} {
		t.Run(value, func(t *testing.T) {
			t.Setenv("SLUICE_S3_BUCKET", "media")
			if value != "" {
				t.Setenv("SLUICE_COMPUTE_CHUNK_SIZE", value)
			}
			c, err := config.Load()
			if err != nil || int64(c.ComputeChunkSize) != want {
				t.Fatalf("SLUICE_COMPUTE_CHUNK_SIZE=%q: %v, %v; want %d", value, c, err, want)
			}
		})
	}
	t.Setenv("SLUICE_COMPUTE_CHUNK_SIZE", "lots")
	if _, err := config.Load(); err == nil || !strings.Contains(err.Error(), "SLUICE_COMPUTE_CHUNK_SIZE") {
		t.Fatalf("error = %v", err)
	}
}

func TestUsageListsEveryVariableWithItsDefaults(t *testing.T) {
	var b strings.Builder
	if err := config.Usage(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"SLUICE_HTTP_ADDR        :9090 (dev: 127.0.0.1:9090)",
		"SLUICE_POLL_FIRST       1s (dev: 200ms)",
		"SLUICE_MAX_INFLIGHT     256",
		"SLUICE_ACK_WAIT         60s",
		"SLUICE_SHUTDOWN_TIMEOUT  30s",
		"SLUICE_SWEEP_INTERVAL   10s",
		"SLUICE_PRIORITY_AGING   10m",
	} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("usage lacks %q:\n%s", want, b.String())
		}
	}
}

// TestComponentDefaultsAreTheDocumentedOnes checks the defaults Parse takes
// from the runner and the contract against docs/configuration.md's table.
func TestComponentDefaultsAreTheDocumentedOnes(t *testing.T) {
	t.Setenv("SLUICE_S3_BUCKET", "media")
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxDeliver != 20 || c.TaskTimeout != 6*time.Hour || c.MediaQuotaRetry != 5*time.Minute ||
		c.MediaQuotaWait != 24*time.Hour || c.StoreRefusalLimit != 4*time.Hour || c.ComputeTimeout != 168*time.Hour ||
		c.CopyConcurrency != 4 || c.PreflightConc != 8 || c.Preflight != "strict" || c.PresignTTL != time.Hour ||
		c.NATSReplicas != 1 || c.EventsMaxAge != 168*time.Hour || c.StateTTL != 720*time.Hour {
		t.Errorf("defaults = %+v", c)
	}
	// The consumers' AckWait is set by the worker from SLUICE_ACK_WAIT and
	// by the contract's Options when a caller leaves it out: one value.
	if consumer.DefaultAckWait != contract.DefaultAckWait {
		t.Errorf("consumer.DefaultAckWait %s, contract.DefaultAckWait %s", consumer.DefaultAckWait, contract.DefaultAckWait)
	}
}

// TestServedKindNeedsItsUpstream: a worker serving a kind whose upstream
// has no address refuses to start naming the variable, rather than
// failing each job; the embedded default points every kind at the
// simulators, and a worker not serving a kind needs none for it.
func TestServedKindNeedsItsUpstream(t *testing.T) {
	c := config.Config{Kinds: []string{"video", "container"}}
	err := c.CheckUpstreams()
	if err == nil || !strings.Contains(err.Error(), "SLUICE_MEDIA_BASE_URL") || !strings.Contains(err.Error(), "SLUICE_COMPUTE_BASE_URL") {
		t.Errorf("CheckUpstreams with no upstream = %v, want both variables named", err)
	}
	c = config.Config{Kinds: []string{"speech"}, MediaBaseURL: "https://media.example"}
	if err := c.CheckUpstreams(); err != nil {
		t.Errorf("speech with its media address: %v", err)
	}
}
