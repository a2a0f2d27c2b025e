package worker_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// With fair scheduling on, jobs go through admission to their class queue
// and run as before: the job keeps its id (the spec's, the message's or
// js-<sequence of the message the producer published>), its events and
// record are the same, and a job that cannot run is dead-lettered under
// that id.
func TestFairSchedulingRunsJobsUnderTheirIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.Order = &order.Static{On: true} })
	b.publish(t, "video", "fair-1", videoSpec("fair-1", "a fair boat"))
	seq := b.publish(t, "speech", "", "this is not json")

	ev := b.await(t, "fair-1", 30*time.Second)
	if ev.Data.Status != "succeeded" || ev.ID != "fair-1.succeeded" {
		t.Fatalf("fair-1: terminal event %+v", ev)
	}
	if rec := b.record(t, "fair-1"); rec.Status != state.StatusSucceeded || rec.Submits != 1 {
		t.Errorf("fair-1: record %+v", rec)
	}
	bad := b.await(t, "js-"+strconv.FormatUint(seq, 10), 30*time.Second)
	if bad.Data.Status != "failed" || bad.Data.Error == nil || bad.Data.Error.Code != "invalid_spec" {
		t.Fatalf("not-JSON job js-%d: %+v", seq, bad.Data)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var letters []string
		for _, m := range b.deadLetters(t) {
			letters = append(letters, m.Subject+"|"+m.Header.Get(contract.HeaderJobID))
		}
		if strings.Contains(strings.Join(letters, " "), "sluice.dlq.speech|js-"+strconv.FormatUint(seq, 10)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters %v lack the not-JSON job js-%d", letters, seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With fair scheduling on, a worker as config/nats/users.conf's worker
// may copy jobs to their class queues and serve them: a job enqueued as
// producer succeeds.
func TestFairSchedulingAsLeastPrivilegeWorker(t *testing.T) {
	const producerPW, workerPW, adminPW = "producer-pw-5e3", "worker-pw-7a1", "admin-pw-2b9"
	t.Setenv("PRODUCER_PASSWORD", producerPW)
	t.Setenv("WORKER_PASSWORD", workerPW)
	t.Setenv("ADMIN_PASSWORD", adminPW)
	conf, err := server.ProcessConfigFile("../../config/nats/users.conf")
	if err != nil {
		t.Fatalf("config/nats/users.conf: %v", err)
	}
	b := setup(t, setupOpts{nats: testenv.NATSOptions{Users: conf.Users, User: "admin", Password: adminPW}})
	hostPort := strings.TrimPrefix(b.nats.URL, "nats://")
	b.enqueueURL = fmt.Sprintf("nats://producer:%s@%s", producerPW, hostPort)
	b.start(t, func(c *config.Config) {
		c.NATSURL, c.Kinds, c.Order = fmt.Sprintf("nats://worker:%s@%s", workerPW, hostPort), []string{"video"}, &order.Static{On: true}
	})
	out, code := b.enqueue(t, "", "video", "--id", "fair-perm", "--model", "m", "--prompt", "least privilege, fairly",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "s3://"+b.s3.Bucket+"/sluice/video/fair-perm/result-0.mp4") {
		t.Fatalf("video --wait as producer, fair scheduling on: exit %d\n%s", code, out)
	}
}
