package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestLeastPrivilegeUsers runs sluice on a server configured with
// config/nats/users.conf: enqueue as producer publishes a job that a
// worker as worker runs to success, and the producer is refused forging
// an event, reading or purging the dead letters and deleting a stream.
func TestLeastPrivilegeUsers(t *testing.T) {
	const producerPW, workerPW, adminPW = "producer-pw-4d1", "worker-pw-9e2", "admin-pw-0c7"
	t.Setenv("PRODUCER_PASSWORD", producerPW)
	t.Setenv("WORKER_PASSWORD", workerPW)
	t.Setenv("ADMIN_PASSWORD", adminPW)
	conf, err := server.ProcessConfigFile("../../config/nats/users.conf")
	if err != nil {
		t.Fatalf("config/nats/users.conf: %v", err)
	}
	var names []string
	for _, u := range conf.Users {
		names = append(names, u.Username)
	}
	if strings.Join(names, ",") != "producer,worker,admin" {
		t.Fatalf("config/nats/users.conf has users %v, want producer, worker and admin", names)
	}
	// The test's own connection (events, records, dead letters) is the
	// file's administrator, who has no limits.
	b := setup(t, setupOpts{nats: testenv.NATSOptions{Users: conf.Users, User: "admin", Password: adminPW}})
	hostPort := strings.TrimPrefix(b.nats.URL, "nats://")
	workerURL := fmt.Sprintf("nats://worker:%s@%s", workerPW, hostPort)
	producerURL := fmt.Sprintf("nats://producer:%s@%s", producerPW, hostPort)
	b.enqueueURL = producerURL
	// Before any worker started there is no SLUICE_JOBS, and the producer
	// may not create it.
	if out, code := b.enqueue(t, "", "video", "--id", "perm-early", "--model", "m", "--prompt", "too early",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9"); code == 0 || !strings.Contains(out, "need a worker to have started once") {
		t.Errorf("publish before any worker: exit %d\n%s", code, out)
	}
	b.start(t, func(c *config.Config) { c.NATSURL = workerURL })
	out, code := b.enqueue(t, "", "video", "--id", "perm-video", "--model", "m", "--prompt", "least privilege",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "s3://"+b.s3.Bucket+"/sluice/video/perm-video/result-0.mp4") {
		t.Fatalf("video --wait as producer: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "status", "perm-video"); code != 0 || !strings.Contains(out, "succeeded") {
		t.Errorf("status as producer: exit %d\n%s", code, out)
	}

	// A cancel as producer reaches the worker, which answers it.
	if out, code := b.enqueue(t, "", "video", "--id", "perm-cancel", "--model", "m", "--prompt", "long [sim:duration=5m]",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9"); code != 0 {
		t.Fatalf("video as producer: exit %d\n%s", code, out)
	}
	b.awaitStatus(t, "perm-cancel", state.StatusRunning, 30*time.Second)
	if out, code := b.enqueue(t, "", "cancel", "perm-cancel"); code != 0 {
		t.Fatalf("cancel as producer: exit %d\n%s", code, out)
	}
	if ev := b.await(t, "perm-cancel", 30*time.Second); ev.Data.Status != string(state.StatusCancelled) {
		t.Errorf("cancelled job ended %s", ev.Data.Status)
	}

	nc, err := nats.Connect(producerURL, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	eventsBefore := len(b.events(t))
	forged := nats.NewMsg(contract.EventSubject("video", "succeeded"))
	forged.Data = []byte(`{"forged":true}`)
	if _, err := js.PublishMsg(short(), forged); err == nil {
		t.Error("producer published an event")
	}
	if _, err := js.Stream(short(), contract.DLQStream); err == nil {
		t.Error("producer read SLUICE_DLQ's info")
	}
	for _, api := range []string{"$JS.API.STREAM.MSG.GET." + contract.DLQStream, "$JS.API.STREAM.PURGE." + contract.DLQStream} {
		if _, err := nc.Request(api, []byte(`{"seq":1}`), 2*time.Second); err == nil {
			t.Errorf("producer got an answer from %s", api)
		}
	}
	if err := js.DeleteStream(short(), contract.JobsStream); err == nil {
		t.Error("producer deleted SLUICE_JOBS")
	}
	if _, err := js.CreateStream(short(), jetstream.StreamConfig{Name: "PRODUCER_OWN", Subjects: []string{"producer.>"}}); err == nil {
		t.Error("producer created a stream")
	}
	if logs := b.logs.String(); strings.Contains(logs, "Permissions Violation") || strings.Contains(logs, "permissions violation") {
		t.Errorf("the worker hit a permissions violation:\n%s", logs)
	}
	// The administrator sees that nothing of it happened.
	if n := len(b.events(t)); n != eventsBefore {
		t.Errorf("events went from %d to %d", eventsBefore, n)
	}
	for _, name := range []string{contract.JobsStream, contract.DLQStream} {
		if _, err := b.nats.JS.Stream(short(), name); err != nil {
			t.Errorf("%s after the producer's attempts: %v", name, err)
		}
	}
	if _, err := b.nats.JS.Stream(short(), "PRODUCER_OWN"); err == nil {
		t.Error("the producer's stream exists")
	}
}
