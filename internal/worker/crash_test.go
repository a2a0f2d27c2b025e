package worker_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
)

var workerBin, enqueueBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-worker-bin-")
	if err != nil {
		panic(err)
	}
	workerBin, enqueueBin = filepath.Join(dir, "worker"), filepath.Join(dir, "enqueue")
	for bin, pkg := range map[string]string{workerBin: "./cmd/worker", enqueueBin: "./cmd/enqueue"} {
		build := exec.Command("go", "build", "-o", bin, "github.com/sluice-dev/sluice/"+pkg[2:])
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a worker running as a separate process.
type proc struct {
	cmd *exec.Cmd
	log string
}

// spawn starts the worker binary configured like b's in-process workers.
func (b *bundle) spawn(t *testing.T, name string) *proc {
	t.Helper()
	c := b.cfg
	env := append(os.Environ(),
		"SLUICE_NATS_URL="+c.NATSURL, "SLUICE_S3_ENDPOINT="+c.S3Endpoint, "SLUICE_S3_BUCKET="+c.S3Bucket,
		"SLUICE_S3_PATH_STYLE=true", "AWS_ACCESS_KEY_ID=sluice", "AWS_SECRET_ACCESS_KEY="+secretS3Key, "AWS_REGION=us-east-1",
		"SLUICE_MEDIA_BASE_URL="+c.MediaBaseURL, "SLUICE_MEDIA_API_KEY="+c.MediaAPIKey,
		"SLUICE_COMPUTE_BASE_URL="+c.ComputeBaseURL, "SLUICE_COMPUTE_USER="+c.ComputeUser,
		"SLUICE_COMPUTE_PASSWORD="+c.ComputePassword, "SLUICE_COMPUTE_ORGID="+c.ComputeOrgID,
		"SLUICE_POLL_INTERVAL=200ms", "SLUICE_POLL_FIRST=50ms", "SLUICE_COMPUTE_POLL_INTERVAL=100ms",
		"SLUICE_ALLOW_PRIVATE_URLS=true", "SLUICE_HTTP_ADDR=127.0.0.1:0", "SLUICE_LOG_LEVEL=debug",
		"SLUICE_ACK_WAIT=2s", "SLUICE_WORKER_NAME="+name, "SLUICE_SHUTDOWN_TIMEOUT=5s",
	)
	env = append(env, b.spawnEnv...)
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(workerBin)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logPath}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
		logs, _ := os.ReadFile(logPath)
		_, _ = b.logs.Write(logs)
	})
	return p
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// awaitRecord waits until id's state record satisfies ok.
func (b *bundle) awaitRecord(t *testing.T, id string, within time.Duration, ok func(*state.Record) bool) *state.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if kv, err := b.nats.JS.KeyValue(t.Context(), contract.StateBucket); err == nil {
			if rec, _, err := state.NewStore(kv, "", nil).Get(t.Context(), id); err == nil && ok(rec) {
				return rec
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s: state never reached the awaited step", id)
	return nil
}

func TestCrashAfterSubmitResumesWithoutResubmitting(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 3 * time.Second})
	first := b.spawn(t, "doomed")
	prompt := "crash after submit"
	b.publish(t, "video", "crash-1", videoSpec("crash-1", prompt))
	b.awaitRecord(t, "crash-1", 30*time.Second, func(r *state.Record) bool { return r.Upstream.TaskID != "" })
	first.kill(t)

	b.spawn(t, "heir")
	ev := b.await(t, "crash-1", 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s: %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	a := ev.Data.Artifacts[0]
	if got, want := b.objectSHA(t, a), sha(apisim.ResultBytes(ev.Data.Upstream.TaskID, 0, a.Size)); got != want {
		t.Errorf("sha %s, want %s", got, want)
	}
	if rec := b.record(t, "crash-1"); rec.Attempts != 2 || rec.Submits != 1 {
		t.Errorf("record attempts %d submits %d, want 2 and 1", rec.Attempts, rec.Submits)
	}
}

func TestCrashWhileCollectingResumesTheCopy(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// Result downloads hang long enough to kill the worker mid-copy.
	b.media.Faults().Set(apisim.EndpointResult, apisim.Fault{Latency: 30 * time.Second})
	first := b.spawn(t, "doomed")
	prompt := "crash while collecting [sim:size=2000000]"
	b.publish(t, "video", "crash-2", videoSpec("crash-2", prompt))
	b.awaitRecord(t, "crash-2", 30*time.Second, func(r *state.Record) bool { return r.Status == state.StatusCollecting })
	first.kill(t)
	b.media.Faults().Reset()

	b.spawn(t, "heir")
	ev := b.await(t, "crash-2", 60*time.Second)
	if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 {
		t.Fatalf("event %+v", ev.Data)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	a := ev.Data.Artifacts[0]
	if got, want := b.objectSHA(t, a), sha(apisim.ResultBytes(ev.Data.Upstream.TaskID, 0, 2000000)); got != want || a.Size != 2000000 {
		t.Errorf("artifact %+v: sha %s, want %s", a, got, want)
	}
	var terminal int
	for _, e := range b.events(t) {
		if e.Subject == "crash-2" && state.Status(e.Data.Status).Terminal() {
			terminal++
		}
	}
	if terminal != 1 {
		t.Errorf("%d terminal events", terminal)
	}
	logs, _ := os.ReadFile(filepath.Clean(first.log))
	if !strings.Contains(string(logs), "task submitted") {
		t.Errorf("first worker never submitted:\n%s", logs)
	}
}
