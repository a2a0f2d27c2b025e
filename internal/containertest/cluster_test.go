package containertest

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/devcerts"
	"github.com/sluice-dev/sluice/internal/jobclient"
)

// clusterStack is a throw-away run of docker-compose.cluster.yml, driven
// by images/compose.sh as `make cluster-up` drives it.
type clusterStack struct {
	env       []string
	dir       string
	ca        string
	passwords map[string]string // NATS user -> password
}

// composeCommand returns the compose command images/compose.sh would
// use, or skips the test when there is none.
func composeCommand(t *testing.T) string {
	t.Helper()
	if exec.Command("docker", "compose", "version").Run() == nil {
		return "docker compose"
	}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		return "docker-compose"
	}
	t.Skip("neither docker compose nor docker-compose is installed, so the cluster stack does not run")
	return ""
}

// newClusterStack starts the cluster stack with two workers on a project
// of its own (ccluster-ct-<pid>), with host ports Docker picks, TLS files
// and passwords made here, and takes it down with its volumes when the
// test ends.
func newClusterStack(t *testing.T) *clusterStack {
	t.Helper()
	p := requireDocker(t)
	compose := composeCommand(t)
	images := map[string]string{
		"SLUICE_NATS_IMAGE": natsImage(), "SLUICE_S3_IMAGE": s3Image(), "SLUICE_WORKER_IMAGE": workerImage(),
		"SLUICE_SIMULATOR_IMAGE": image("SLUICE_SIMULATOR_IMAGE", "simulator"),
		"SLUICE_ENQUEUE_IMAGE":   image("SLUICE_ENQUEUE_IMAGE", "enqueue"),
	}
	for _, img := range images {
		if _, err := p.Client().ImageInspect(context.Background(), img); err != nil {
			t.Skipf("image %s is not there (run make images first; nothing is pulled): %v", img, err)
		}
	}
	// The containers read the files as their own user: the directory must
	// be open to them (t.TempDir's parent is not).
	dir, err := os.MkdirTemp("", "ccluster-ct-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := devcerts.Write(filepath.Join(dir, "certs"), devcerts.Options{
		Name: "ccluster test", Hosts: []string{"nats-1", "nats-2", "nats-3", "localhost", "127.0.0.1"}, KeyMode: 0o644,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &clusterStack{dir: dir, ca: files.CA, passwords: map[string]string{
		"producer": "producer-ct-2b81", "worker": "worker-ct-c04e", "admin": "admin-ct-97d3",
	}}
	var secrets strings.Builder
	for user, pw := range s.passwords {
		fmt.Fprintf(&secrets, "SLUICE_NATS_%s_PASSWORD=%s\n", strings.ToUpper(user), pw)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.env"), []byte(secrets.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = append(os.Environ(), "SLUICE_STACK=cluster", "COMPOSE="+compose, "SLUICE_CLUSTER_DIR="+dir,
		fmt.Sprintf("COMPOSE_PROJECT_NAME=ccluster-ct-%d", os.Getpid()), "WORKERS=2", "DOWN_FLAGS=-v -t 5",
		"SLUICE_NATS1_HOST_PORT=", "SLUICE_NATS2_HOST_PORT=", "SLUICE_NATS3_HOST_PORT=", "SLUICE_S3_HOST_PORT=")
	for k, v := range images {
		s.env = append(s.env, k+"="+v)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := s.run(t, nil, "logs", "--no-color", "--tail=60")
			t.Logf("the stack's last log lines:\n%s", out)
		}
		if out, err := s.run(t, nil, "down"); err != nil {
			t.Errorf("images/compose.sh down: %v\n%s", err, out)
		}
	})
	if out, err := s.run(t, nil, "up"); err != nil {
		t.Fatalf("images/compose.sh up: %v\n%s", err, out)
	}
	return s
}

// run runs images/compose.sh ARGS on the stack, stdin from in.
func (s *clusterStack) run(t *testing.T, in []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("images/compose.sh", args...)
	cmd.Dir = "../.."
	cmd.Env = s.env
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hostPort is where nats-<n>'s client port is published.
func (s *clusterStack) hostPort(t *testing.T, n int) string {
	t.Helper()
	out, err := s.run(t, nil, "port", fmt.Sprintf("nats-%d", n), "4222")
	if err != nil {
		t.Fatalf("port of nats-%d: %v\n%s", n, err, out)
	}
	return strings.TrimSpace(out)
}

// violations records the permission violations the server reports to a
// connection.
type violations struct {
	mu   sync.Mutex
	seen []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		v.mu.Lock()
		v.seen = append(v.seen, err.Error())
		v.mu.Unlock()
	}
}

// about reports whether a violation naming subject was reported.
func (v *violations) about(subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.seen {
		if strings.Contains(s, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

// connect connects to every server as user, over TLS with the stack's CA.
func (s *clusterStack) connect(t *testing.T, user string, v *violations) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	var urls []string
	for n := 1; n <= 3; n++ {
		urls = append(urls, "nats://"+s.hostPort(t, n))
	}
	opts := []nats.Option{nats.UserInfo(user, s.passwords[user]), nats.RootCAs(s.ca), nats.MaxReconnects(-1)}
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// TestClusterStack brings up docker-compose.cluster.yml as make cluster-up
// does and checks what it promises: the servers refuse clients without
// TLS and with a certificate of another CA; every stream and bucket is at
// R3; a few jobs submitted with the real enqueue as producer over TLS
// succeed, and the producer may follow the events and read the states,
// and cancel a job through a worker; the producer is refused publishing
// an event, writing a job's state, reading the dead letters and changing
// or deleting a stream; the worker is refused deleting or purging a
// stream.
func TestClusterStack(t *testing.T) {
	t.Parallel()
	s := newClusterStack(t)
	addr := s.hostPort(t, 1)

	// Without TLS, or trusting another CA, nothing gets in.
	if nc, err := nats.Connect("nats://"+addr, nats.UserInfo("producer", s.passwords["producer"])); err == nil {
		nc.Close()
		t.Error("a client without TLS connected")
	}
	other, err := devcerts.Write(t.TempDir(), devcerts.Options{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect("nats://"+addr, nats.UserInfo("producer", s.passwords["producer"]), nats.RootCAs(other.CA)); err == nil {
		nc.Close()
		t.Error("a client trusting another CA connected")
	} else if !errors.As(err, new(x509.UnknownAuthorityError)) && !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another CA: %v, want a certificate error", err)
	}
	if nc, err := nats.Connect("nats://"+addr, nats.UserInfo("producer", "wrong"), nats.RootCAs(s.ca)); err == nil {
		nc.Close()
		t.Error("a wrong password connected")
	}

	// The real enqueue, as producer over TLS: submit and wait, then status.
	jobs, err := os.ReadFile("../../config/compose/smoke-jobs.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(jobs), "\n")
	var picked []string
	for _, l := range lines {
		for _, id := range []string{`"smoke-video-1"`, `"smoke-speech-1"`, `"smoke-compute-1"`} {
			if strings.Contains(l, `"id":`+id) {
				picked = append(picked, l)
			}
		}
	}
	if len(picked) != 3 {
		t.Fatalf("found %d of the 3 jobs in smoke-jobs.ndjson", len(picked))
	}
	if out, err := s.run(t, []byte(strings.Join(picked, "")), "enqueue", "submit", "-f", "-", "--wait", "--timeout", "3m"); err != nil ||
		!strings.Contains(out, "3 succeeded, 0 failed") {
		t.Fatalf("enqueue submit --wait as producer: %v\n%s", err, out)
	}
	if out, err := s.run(t, nil, "enqueue", "status", "smoke-compute-1"); err != nil || !strings.Contains(out, "succeeded") {
		t.Errorf("enqueue status as producer: %v\n%s", err, out)
	}
	// A cancel as producer, which may not write SLUICE_STATE: a worker
	// answers it and records it.
	if out, err := s.run(t, nil, "enqueue", "video", "--id", "ct-cancel", "--model", "video-model", "--prompt", "a long take [sim:duration=10m]",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9"); err != nil {
		t.Fatalf("enqueue video as producer: %v\n%s", err, out)
	}
	if out, err := s.run(t, nil, "enqueue", "cancel", "ct-cancel", "--json"); err != nil || !strings.Contains(out, `"worker_reply":{"job_id":"ct-cancel","cancel":"requested"`) {
		t.Errorf("enqueue cancel as producer: %v\n%s", err, out)
	}

	_, adminJS := s.connect(t, "admin", nil)
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	for _, name := range []string{contract.JobsStream, contract.EventsStream, contract.DLQStream, "KV_" + contract.StateBucket, "KV_" + contract.SpecsBucket} {
		st, err := adminJS.Stream(short(), name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replicas, want 3", name, r)
		}
	}

	// The producer follows the events (what enqueue watch and --wait do)
	// and reads the states (enqueue status).
	var pv violations
	pnc, pjs := s.connect(t, "producer", &pv)
	pc, err := jobclient.New(pnc, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopWatch()
	seen := 0
	err = pc.Watch(wctx, jobclient.WatchOptions{Since: time.Hour}, func(ev jobclient.WatchedEvent) error {
		if ev.Event.Data.Status == "succeeded" {
			seen++
		}
		if seen == 3 {
			stopWatch()
		}
		return nil
	})
	if err != nil || seen != 3 {
		t.Errorf("watch as producer: %d succeeded events, %v", seen, err)
	}
	if job, err := pc.Status(short(), "smoke-video-1"); err != nil || job.Status != "succeeded" {
		t.Errorf("status as producer: %+v, %v", job, err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		job, err := pc.Status(short(), "ct-cancel")
		if err == nil && job.Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job cancelled as producer: %+v, %v", job, err)
		}
	}

	// What the producer may not do. Each is refused by the server, which
	// reports the violation at once; the request itself then times out.
	refusal := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	eventsBefore := streamMsgs(t, adminJS, contract.EventsStream)
	forged := nats.NewMsg(contract.EventSubject("video", "succeeded"))
	forged.Data = []byte(`{"forged":true}`)
	if _, err := pjs.PublishMsg(refusal(), forged); err == nil {
		t.Error("producer published an event")
	}
	if _, err := pjs.Stream(refusal(), contract.DLQStream); err == nil {
		t.Error("producer read SLUICE_DLQ's info")
	}
	refused := []string{
		"$JS.API.STREAM.MSG.GET." + contract.DLQStream,
		"$JS.API.DIRECT.GET." + contract.DLQStream,
		"$JS.API.CONSUMER.CREATE." + contract.DLQStream,
		"$JS.API.STREAM.PURGE." + contract.DLQStream,
		"$JS.API.STREAM.UPDATE." + contract.JobsStream,
		"$JS.API.STREAM.DELETE." + contract.JobsStream,
		"$JS.API.STREAM.DELETE." + contract.EventsStream,
		"$JS.API.STREAM.CREATE.PRODUCER_OWN",
	}
	for _, api := range refused {
		if _, err := pnc.Request(api, []byte(`{"seq":1}`), time.Second); err == nil {
			t.Errorf("producer got an answer from %s", api)
		}
	}
	jobsCfg, err := adminJS.Stream(short(), contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	changed := jobsCfg.CachedInfo().Config
	changed.MaxAge = time.Minute
	if _, err := pjs.UpdateStream(refusal(), changed); err == nil {
		t.Error("producer updated SLUICE_JOBS")
	}
	if err := pjs.DeleteStream(refusal(), contract.JobsStream); err == nil {
		t.Error("producer deleted SLUICE_JOBS")
	}
	// Nor write a job's state: the workers record a cancel.
	adminKV, err := adminJS.KeyValue(short(), contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	stateBefore, err := adminKV.Get(short(), "smoke-video-1")
	if err != nil {
		t.Fatal(err)
	}
	pkv, err := pjs.KeyValue(short(), contract.StateBucket)
	if err != nil {
		t.Fatalf("producer reads SLUICE_STATE: %v", err)
	}
	stateKey := "$KV." + contract.StateBucket + ".smoke-video-1"
	if _, err := pkv.Put(refusal(), "smoke-video-1", []byte(`{"job_id":"smoke-video-1","status":"failed"}`)); err == nil {
		t.Error("producer wrote SLUICE_STATE")
	}
	_ = pnc.Flush()
	for _, subject := range append([]string{forged.Subject, stateKey}, refused...) {
		if !pv.about(subject) {
			t.Errorf("no permissions violation reported for the producer's %s", subject)
		}
	}

	// Nor may the worker delete or purge a stream.
	var wv violations
	wnc, wjs := s.connect(t, "worker", &wv)
	if err := wjs.DeleteStream(refusal(), contract.EventsStream); err == nil {
		t.Error("worker deleted SLUICE_EVENTS")
	}
	if _, err := wnc.Request("$JS.API.STREAM.PURGE."+contract.DLQStream, nil, time.Second); err == nil {
		t.Error("worker purged SLUICE_DLQ")
	}
	_ = wnc.Flush()
	for _, subject := range []string{"$JS.API.STREAM.DELETE." + contract.EventsStream, "$JS.API.STREAM.PURGE." + contract.DLQStream} {
		if !wv.about(subject) {
			t.Errorf("no permissions violation reported for the worker's %s", subject)
		}
	}

	// The administrator sees that nothing of it happened.
	if n := streamMsgs(t, adminJS, contract.EventsStream); n != eventsBefore {
		t.Errorf("events went from %d to %d", eventsBefore, n)
	}
	for _, name := range []string{contract.JobsStream, contract.EventsStream, contract.DLQStream} {
		st, err := adminJS.Stream(short(), name)
		if err != nil {
			t.Errorf("%s after the refused attempts: %v", name, err)
			continue
		}
		if name == contract.JobsStream && st.CachedInfo().Config.MaxAge != jobsCfg.CachedInfo().Config.MaxAge {
			t.Errorf("SLUICE_JOBS's max age changed to %s", st.CachedInfo().Config.MaxAge)
		}
	}
	if _, err := adminJS.Stream(short(), "PRODUCER_OWN"); err == nil {
		t.Error("the producer's stream exists")
	}
	if after, err := adminKV.Get(short(), "smoke-video-1"); err != nil || after.Revision() != stateBefore.Revision() {
		t.Errorf("smoke-video-1's state after the producer's write: %v", err)
	}
}

// streamMsgs is how many messages stream holds.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return st.CachedInfo().State.Msgs
}
