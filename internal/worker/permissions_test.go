package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestLeastPrivilegeUsers runs sluice on a server configured with
// config/nats/users.conf: enqueue as producer publishes a job that a
// worker as worker runs to success and cancels jobs through the worker,
// and the producer is refused forging an event, writing a job's state,
// reading or purging the dead letters and deleting a stream. With no
// worker to answer, a cancel as producer fails at once and records
// nothing.
func TestLeastPrivilegeUsers(t *testing.T) {
	const producerPW, workerPW, adminPW = "producer-pw-4d1", "worker-pw-9e2", "admin-pw-0c7"
	t.Setenv("PRODUCER_PASSWORD", producerPW)
	t.Setenv("WORKER_PASSWORD", workerPW)
	t.Setenv("ADMIN_PASSWORD", adminPW)
	conf := usersConf(t)
	// The test's own connection (events, records, dead letters) is the
	// file's administrator, who has no limits.
	b := setup(t, setupOpts{nats: testenv.NATSOptions{Users: conf.Users, User: "admin", Password: adminPW}})
	hostPort := strings.TrimPrefix(b.nats.URL, "nats://")
	workerURL := fmt.Sprintf("nats://worker:%s@%s", workerPW, hostPort)
	producerURL := fmt.Sprintf("nats://producer:%s@%s", producerPW, hostPort)
	b.enqueueURL = producerURL
	checkProducerBeforeAnyWorker(t, b)
	// The worker runs video jobs only: a speech job waits in SLUICE_JOBS.
	stopWorker := b.start(t, func(c *config.Config) {
		c.NATSURL, c.Kinds, c.FleetMediaTasks, c.Webhooks = workerURL, []string{"video"}, 4, true
	})
	hooks := subscribeWebhook(t, b)
	checkProducerRunsJobs(t, b, producerURL)
	waitWebhooks(t, hooks, 1)
	checkWorkerAnswersAlive(t, b)
	checkProducerCancels(t, b)
	checkProducerRefused(t, b, producerURL)
	// With no worker to answer, the producer may not record a cancel
	// itself: it says so, at once, and nothing is recorded.
	stopWorker()
	checkCancelWithoutWorker(t, b, producerURL)
}

// checkWorkerAnswersAlive: the worker, which holds a fleet quota, may
// answer on its alive subject and ask on the others' (quota's watch).
func checkWorkerAnswersAlive(t *testing.T, b *bundle) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.logs.String(), quota.LogAnnounced) {
		if time.Now().After(deadline) {
			t.Fatalf("the least-privilege worker never answered on its alive subject:\n%s", grepLines(b.logs.String(), "alive"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usersConf reads config/nats/users.conf, whose users must be producer,
// worker, team-acme and admin.
func usersConf(t *testing.T) *server.Options {
	t.Helper()
	conf, err := server.ProcessConfigFile("../../config/nats/users.conf")
	if err != nil {
		t.Fatalf("config/nats/users.conf: %v", err)
	}
	var names []string
	for _, u := range conf.Users {
		names = append(names, u.Username)
	}
	if strings.Join(names, ",") != "producer,worker,team-acme,admin" {
		t.Fatalf("config/nats/users.conf has users %v, want producer, worker, team-acme and admin", names)
	}
	return conf
}

// checkProducerBeforeAnyWorker: before any worker started, the producer
// may create neither SLUICE_JOBS nor SLUICE_STATE.
func checkProducerBeforeAnyWorker(t *testing.T, b *bundle) {
	t.Helper()
	// There is no SLUICE_JOBS, and the producer may not create it.
	if out, code := b.enqueue(t, "", "video", "--id", "perm-early", "--model", "m", "--prompt", "too early",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9"); code == 0 || !strings.Contains(out, "need a worker to have started once") {
		t.Errorf("publish before any worker: exit %d\n%s", code, out)
	}
	// Nor may it create SLUICE_STATE to record a cancel itself.
	if out, code := b.enqueue(t, "", "cancel", "perm-early"); code != 5 || !strings.Contains(out, notRecorded) {
		t.Errorf("cancel before any worker: exit %d\n%s", code, out)
	}
	if _, err := b.nats.JS.KeyValue(context.Background(), contract.StateBucket); err == nil {
		t.Error("the producer's cancel created SLUICE_STATE")
	}
}

// checkProducerRunsJobs: as producer, enqueue publishes a job and waits
// for it, reads its status, the quotas and events, and is told at once
// that the dead letters are not its.
func checkProducerRunsJobs(t *testing.T, b *bundle, producerURL string) {
	t.Helper()
	out, code := b.enqueue(t, "", "video", "--id", "perm-video", "--model", "m", "--prompt", "least privilege",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "s3://"+b.s3.Bucket+"/sluice/video/perm-video/result-0.mp4") {
		t.Fatalf("video --wait as producer: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "status", "perm-video"); code != 0 || !strings.Contains(out, "succeeded") {
		t.Errorf("status as producer: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "quota", "--json"); code != 0 || !strings.Contains(out, `"resource":"media"`) {
		t.Errorf("quota as producer: exit %d\n%s", code, out)
	}
	watchAsProducer(t, producerURL, "perm-video")
	// The dead letters are not the producer's: enqueue says so at once,
	// naming the user who may read them, rather than timing out.
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "purge", "--all", "--yes"}} {
		began := time.Now()
		out, code := b.enqueue(t, "", args...)
		if code != 5 || !strings.Contains(out, "this NATS user may not read SLUICE_DLQ") || !strings.Contains(out, "admin in config/nats/users.conf") ||
			strings.Contains(out, "deadline exceeded") || strings.Contains(out, "Permissions Violation") {
			t.Errorf("%s as producer: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		t.Logf("%s refused in %s: %s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond), strings.TrimSpace(out))
	}
}

// checkProducerCancels: a cancel as producer reaches the worker, for a
// running job and for one no worker has seen.
func checkProducerCancels(t *testing.T, b *bundle) {
	t.Helper()
	// The worker answers the cancel of a running job.
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

	// So does the cancel of a job no worker has seen, which the worker
	// records for the one that gets it.
	speech, _ := json.Marshal(speechSpec("perm-queued", "never said", "sync"))
	if out, code := b.enqueue(t, string(speech)+"\n", "submit", "-f", "-"); code != 0 {
		t.Fatalf("submit as producer: exit %d\n%s", code, out)
	}
	out, code := b.enqueue(t, "", "cancel", "perm-queued", "--json")
	var res jobclient.CancelResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Outcome != jobclient.CancelRecorded ||
		res.Status != "queued" || res.Reply == nil || res.Reply.Cancel != contract.CancelRequested {
		t.Errorf("cancel of a queued job as producer: exit %d, %v\n%s", code, err, out)
	}
	if rec := b.record(t, "perm-queued"); rec.Cancel == nil || rec.Status != "" {
		t.Errorf("record of the cancelled queued job: %+v", rec)
	}
	if out, code := b.enqueue(t, "", "status", "perm-queued", "--json"); code != 0 || !strings.Contains(out, `"status":"queued"`) ||
		!strings.Contains(out, `"cancel_requested":true`) {
		t.Errorf("status of the cancelled queued job as producer: exit %d\n%s", code, out)
	}
}

// checkProducerRefused: the producer is refused forging an event,
// reading the dead letters, writing a job's state and managing streams,
// and the administrator sees that nothing of it happened.
func checkProducerRefused(t *testing.T, b *bundle, producerURL string) {
	t.Helper()
	nc, err := nats.Connect(producerURL, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short := func() context.Context { return shortContext(t) }
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
	kv, err := js.KeyValue(short(), contract.StateBucket)
	if err != nil {
		t.Fatalf("producer reads SLUICE_STATE: %v", err)
	}
	before, err := b.kv(t).Get(short(), "perm-video")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(short(), "perm-video", []byte(`{"job_id":"perm-video","status":"failed"}`)); err == nil {
		t.Error("producer wrote a job's state")
	}
	if err := kv.Delete(short(), "perm-video"); err == nil {
		t.Error("producer deleted a job's state")
	}
	if after, err := b.kv(t).Get(short(), "perm-video"); err != nil || after.Revision() != before.Revision() {
		t.Errorf("perm-video's state after the producer's writes: %v", err)
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

// checkCancelWithoutWorker: with no worker to answer, a cancel as
// producer is refused at once and nothing is recorded.
func checkCancelWithoutWorker(t *testing.T, b *bundle, producerURL string) {
	t.Helper()
	speech, _ := json.Marshal(speechSpec("perm-unheard", "never said either", "sync"))
	if out, code := b.enqueue(t, string(speech)+"\n", "submit", "-f", "-"); code != 0 {
		t.Fatalf("submit as producer: exit %d\n%s", code, out)
	}
	began := time.Now()
	out, code := b.enqueue(t, "", "cancel", "perm-unheard")
	if code != 5 || !strings.Contains(out, notRecorded) || !strings.Contains(out, "no worker listens on sluice.control.cancel") ||
		!strings.Contains(out, `permission to publish to "$KV.SLUICE_STATE.perm-unheard" denied`) {
		t.Errorf("cancel as producer without a worker: exit %d\n%s", code, out)
	}
	t.Logf("cancel refused in %s: %s", time.Since(began).Round(time.Millisecond), strings.TrimSpace(out))
	client, err := jobclient.Dial(context.Background(), jobclient.Config{URL: producerURL})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	got, err := client.Cancel(testenv.Context(t, time.Minute), "perm-unheard", jobclient.CancelOptions{})
	var refused *jobclient.PublishRefusedError
	if !errors.Is(err, jobclient.ErrCancelNotRecorded) || !errors.As(err, &refused) || refused.Subject != "$KV.SLUICE_STATE.perm-unheard" ||
		!errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("jobclient.Cancel as producer without a worker: %+v, %v", got, err)
	}
	if _, err := b.kv(t).Get(shortContext(t), "perm-unheard"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("perm-unheard's state after a refused cancel: %v", err)
	}
	if out, code := b.enqueue(t, "", "status", "perm-unheard", "--json"); code != 0 || !strings.Contains(out, `"cancel_requested":false`) {
		t.Errorf("status of the job whose cancel was refused: exit %d\n%s", code, out)
	}
}

// shortContext is a context of two seconds, for an operation that is
// refused at once or answered at once.
func shortContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// notRecorded is what enqueue cancel says when no worker answered and the
// user may not record the cancel itself.
const notRecorded = "may not record the cancel in SLUICE_STATE itself"

// watchAsProducer runs enqueue watch as the producer until it prints an
// event of job id.
func watchAsProducer(t *testing.T, url, id string) {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, enqueueBin, "watch", "--since", "1h", "--json", "--nats-url", url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"subject":"`+id+`"`) {
			return
		}
	}
	t.Errorf("watch as producer printed no event of %s: %v\n%s", id, lines.Err(), stderr.String())
}
