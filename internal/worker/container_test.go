package worker_test

import (
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// withContainers serves container jobs with the platform's AK/SK login.
func withContainers(c *config.Config) {
	c.Kinds = []string{"compute", "container"}
	c.ComputePassword, c.ComputeOrgID = "", ""
	c.ComputeAccessKey, c.ComputeSecretKey = computeAccessKey, secretComputeSK
}

func containerSpec(id, script string, timeout string, outputs ...string) map[string]any {
	return map[string]any{
		"id": id, "kind": "container",
		"container": map[string]any{
			"instance": map[string]any{
				"image": "registry.test:5000/gpu/admin/base/torch:2.1", "version": "torch:2.1",
				"accelerator": "gpu", "resource_group": "TeslaM40", "cpus": 4, "gpus": 1, "ram_mb": 16384,
				"timeout": timeout,
			},
			"script":  script,
			"outputs": append([]string{}, outputs...),
		},
	}
}

// assertNoInstances fails the test unless every instance created was
// deleted and no job ever had two alive at once.
func assertNoInstances(t *testing.T, b *bundle) {
	t.Helper()
	created, deleted, alive := b.compute.ContainerCounts()
	if alive != 0 || created != deleted {
		t.Errorf("instances created %d, deleted %d, alive %d (%v); want none alive", created, deleted, alive, b.compute.ContainerAlive())
	}
	if twice := b.compute.ContainersTwiceAlive(); len(twice) > 0 {
		t.Errorf("jobs with two instances alive at once: %v", twice)
	}
}

func TestContainerSucceedsWithOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	out := "/public/home/alice/sluice/ctr-ok/model.bin"
	b.publish(t, "container", "ctr-ok", containerSpec("ctr-ok", "echo training\n#SIM stderr warming up\n#SIM output model.bin 20K\nexit 0\n", "00:10:00", out))
	ev := b.await(t, "ctr-ok", 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	u := ev.Data.Upstream
	if u == nil || u.InstanceID == "" || u.ClusterID == "" || u.ExitCode == nil || *u.ExitCode != "0" || u.Status == "" {
		t.Fatalf("upstream = %+v", u)
	}
	names := map[string]int64{}
	for _, a := range ev.Data.Artifacts {
		names[a.Key[strings.LastIndex(a.Key, "/")+1:]] = a.Size
	}
	if names["model.bin"] != 20<<10 || names["stdout.txt"] == 0 || names["stderr.txt"] == 0 {
		t.Errorf("artifacts = %v", names)
	}
	assertNoInstances(t, b)
}

func TestContainerScriptExitStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-exit3", containerSpec("ctr-exit3", "echo about to fail\nexit 3\n", "00:10:00"))
	ev := b.await(t, "ctr-exit3", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "exit_status" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	if u := ev.Data.Upstream; u == nil || u.ExitCode == nil || *u.ExitCode != "3" {
		t.Errorf("upstream = %+v", u)
	}
	assertNoInstances(t, b)
}

func TestContainerTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-slow", containerSpec("ctr-slow", "#SIM runfor 1h\necho never\n", "00:00:02"))
	ev := b.await(t, "ctr-slow", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || (ev.Data.Error.Code != "timeout" && ev.Data.Error.Code != "instance_ended") {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

func TestContainerCancelWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-cancel", containerSpec("ctr-cancel", "#SIM runfor 1h\necho never\n", "01:00:00"))
	b.awaitStatus(t, "ctr-cancel", state.StatusRunning, 30*time.Second)
	if r := cancel(t, b, "ctr-cancel"); r.Error != "" {
		t.Fatalf("cancel reply = %+v", r)
	}
	ev := b.await(t, "ctr-cancel", 30*time.Second)
	if ev.Data.Status != "cancelled" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

func TestContainerLostCreateAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.Faults().Set(apisim.EndpointContainerCreate, apisim.Fault{Error500AfterRate: 1, Times: 1})
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-lost", containerSpec("ctr-lost", "echo ok\n", "00:10:00"))
	ev := b.await(t, "ctr-lost", 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 1 {
		t.Errorf("instances created = %d, want 1", created)
	}
	assertNoInstances(t, b)
}

func TestContainerCreateRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.FailContainerCreates(1)
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-refused", containerSpec("ctr-refused", "echo ok\n", "00:10:00"))
	ev := b.await(t, "ctr-refused", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "compute_716865" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

func TestContainerDeleteFailsTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.FailContainerDeletes(2)
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-del", containerSpec("ctr-del", "echo ok\n", "00:10:00"))
	ev := b.await(t, "ctr-del", 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

func TestContainerDeployFails(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-deploy", containerSpec("ctr-deploy", "#SIM deployfail\necho never\n", "00:10:00"))
	ev := b.await(t, "ctr-deploy", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "instance_ended" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

func TestContainerNoAIService(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.SetContainerService(false)
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-noai", containerSpec("ctr-noai", "echo ok\n", "00:10:00"))
	ev := b.await(t, "ctr-noai", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "no_container_service" ||
		!strings.Contains(ev.Data.Error.Message, "404") {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

// TestContainerFromTheCLI drives a container job through the real CLI:
// enqueue container --script-file --wait, jobs --kind container, and a
// retry of the failed job (a new job X-r1 of the same kind and spec).
func TestContainerFromTheCLI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	script := filepath.Join(t.TempDir(), "fail.sh")
	if err := os.WriteFile(script, []byte("echo from a file\nexit 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"container", "--image", "registry.test:5000/gpu/admin/base/torch:2.1", "--version", "torch:2.1",
		"--accelerator", "gpu", "--resource-group", "TeslaM40", "--cpus", "4", "--gpus", "1", "--ram-mb", "16384",
		"--instance-timeout", "00:10:00", "--label", "suite=ctr"}
	out, code := b.enqueue(t, "", append(args, "--id", "cli-ctr-ok", "--script", "echo inline\n#SIM output out.bin 3K\n",
		"--output", "/public/home/alice/sluice/cli-ctr-ok/out.bin", "--wait", "--timeout", "60s")...)
	if code != 0 || !strings.Contains(out, "/sluice/container/cli-ctr-ok/out.bin") || !strings.Contains(out, "stdout.txt") {
		t.Fatalf("container --script --wait: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", append(args, "--id", "cli-ctr", "--script-file", script, "--wait", "--timeout", "60s")...)
	if code != 1 || !strings.Contains(out, "exit_status") {
		t.Fatalf("container --script-file --wait: exit %d\n%s", code, out)
	}
	if u := b.record(t, "cli-ctr").Upstream; u.ExitCode == nil || *u.ExitCode != "4" {
		t.Errorf("upstream = %+v", u)
	}

	out, code = b.enqueue(t, "", "jobs", "--kind", "container", "--json")
	var list jobclient.JobList
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Matched != 2 {
		t.Fatalf("jobs --kind container: exit %d\n%s", code, out)
	}
	for _, j := range list.Jobs {
		if j.Kind != "container" {
			t.Errorf("jobs --kind container lists %s of kind %s", j.ID, j.Kind)
		}
	}

	out, code = b.enqueue(t, "", "retry", "cli-ctr", "--wait", "--timeout", "60s")
	if code != 1 || !strings.Contains(out, "retrying cli-ctr as container job cli-ctr-r1") || !strings.Contains(out, "exit_status") {
		t.Fatalf("retry --wait: exit %d\n%s", code, out)
	}
	rec := b.record(t, "cli-ctr-r1")
	if rec.Kind != "container" || rec.Labels["retry_of"] != "cli-ctr" || rec.Labels["suite"] != "ctr" ||
		rec.Upstream.InstanceID == "" || rec.Upstream.InstanceID == b.record(t, "cli-ctr").Upstream.InstanceID {
		t.Errorf("retry record: kind %s labels %v upstream %+v", rec.Kind, rec.Labels, rec.Upstream)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 3 {
		t.Errorf("instances created = %d, want 3 (one per job)", created)
	}
	assertNoInstances(t, b)
}

// A worker killed between the create and recording the instance's id
// leaves the record at "submitting" and the instance alive upstream. The
// next delivery finds it by its name and adopts it: the script runs once,
// in one instance, which is deleted at the end. A record at "submitting"
// with no instance upstream (killed before the create was sent) gets
// exactly one instance.
func TestContainerCrashBetweenCreateAndRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := testenv.Context(t, 30*time.Second)
	client, err := apiclient.NewCompute(apiclient.ComputeConfig{
		BaseURL: b.simURL, User: "alice", AccessKey: computeAccessKey, SecretKey: secretComputeSK,
	})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	const adopted, fresh = "ctr-killed", "ctr-killed-early"
	spec := containerSpec(adopted, "echo adopted\n#SIM output model.bin 4K\nexit 0\n", "00:10:00",
		"/public/home/alice/sluice/"+adopted+"/model.bin")
	decoded, err := jobspec.Decode(mustJSON(t, spec), jobspec.KindContainer)
	if err != nil {
		t.Fatal(err)
	}
	// What the killed worker sent: the wrapped script in the job's work
	// directory, under the job's instance name.
	workDir := path.Join(sess.HomePath(), "sluice", adopted)
	startScript := runner.ContainerStartScript(adopted, workDir, decoded.Container.Script)
	err = sess.Upload(ctx, workDir, adopted+".start.sh", true, func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(startScript)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := sess.CreateInstance(ctx, decoded.Container.Request(jobspec.ContainerTarget{
		Name: runner.InstanceName(adopted), WorkDir: workDir, StartScript: startScript,
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{adopted, fresh} {
		b.leaveRecord(t, job, func(r *state.Record) {
			r.Kind, r.Status, r.Submits = "container", state.StatusSubmitting, 1
			r.Upstream.ClusterID = sess.ClusterID()
		})
	}

	b.start(t, withContainers)
	b.publish(t, "container", adopted, spec)
	b.publish(t, "container", fresh, containerSpec(fresh, "echo fresh\n", "00:10:00"))
	ev := b.await(t, adopted, 60*time.Second)
	if ev.Data.Status != "succeeded" || ev.Data.Upstream == nil || ev.Data.Upstream.InstanceID != id {
		t.Fatalf("adopted: status %s upstream %+v error %+v; want the planted instance %s", ev.Data.Status, ev.Data.Upstream, ev.Data.Error, id)
	}
	names := map[string]bool{}
	for _, a := range ev.Data.Artifacts {
		names[path.Base(a.Key)] = true
	}
	if !names["model.bin"] || !names["stdout.txt"] {
		t.Errorf("adopted artifacts = %v", names)
	}
	if ev := b.await(t, fresh, 60*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("fresh: status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 2 {
		t.Errorf("instances created = %d, want 2 (the planted one, adopted, and one for the job killed before its create)", created)
	}
	assertNoInstances(t, b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
