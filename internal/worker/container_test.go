package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/state"
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
