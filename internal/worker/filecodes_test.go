package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// The platform's storage full (911501) on an input's upload holds the job
// as a full artifact store does: not failed, nothing submitted, the cause
// in its last error; once there is room again it runs to its end with one
// submit.
func TestComputeStorageFullHoldsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.SetStorageFull(true)
	b.start(t)
	b.publish(t, "compute", "hpc-full", computeSpec(t, b, "hpc-full", "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))
	rec := b.awaitRecord(t, "hpc-full", time.Minute, func(r *state.Record) bool {
		return r.Status.Terminal() || (r.LastError != nil && r.LastError.Code == runner.CodeStorageFull)
	})
	if rec.Status.Terminal() {
		t.Fatalf("a full storage ended the job: %s %+v", rec.Status, rec.Error)
	}
	if !strings.Contains(rec.LastError.Message, "storage full") {
		t.Errorf("last error %q does not say storage full", rec.LastError.Message)
	}
	if n := b.compute.SubmitCount("hpc-full"); n != 0 {
		t.Fatalf("submitted %d times while the storage was full", n)
	}
	b.compute.SetStorageFull(false)
	ev := b.await(t, "hpc-full", 2*time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("after the storage had room: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.compute.SubmitCount("hpc-full"); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
}

// No permission on an input's directory (911030) fails the job at once,
// naming the path, before anything is submitted.
func TestComputeNoPermissionFailsNamingThePath(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	dir := "/public/home/alice/hpc-denied"
	b.compute.DenyFiles(dir)
	b.start(t)
	b.publish(t, "compute", "hpc-denied", computeSpec(t, b, "hpc-denied", "#!/bin/sh\nexit 0\n"))
	ev := b.await(t, "hpc-denied", time.Minute)
	e := ev.Data.Error
	if ev.Data.Status != "failed" || e == nil || e.Code != runner.CodeNoPermission || e.Stage != "submit" {
		t.Fatalf("job = %s %+v, want failed %s at submit", ev.Data.Status, e, runner.CodeNoPermission)
	}
	if !strings.Contains(e.Message, "no permission on "+dir) || !strings.Contains(e.Message, "compute.inputs[0]") {
		t.Errorf("message %q does not name the field and the path", e.Message)
	}
	if n := b.compute.SubmitCount("hpc-denied"); n != 0 {
		t.Errorf("submits = %d, want 0", n)
	}
}

// A region whose gateway answers 404 to every /ai/ path fails a container
// job before anything is uploaded or created, naming the region.
func TestContainerRegionWithoutAIFailsBeforeAnything(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, withContainers)
	spec := containerSpec("ctr-noai", "exit 0\n", "00:10:00")
	spec["container"].(map[string]any)["cluster"] = apisim.ComputeRegionNoAI
	b.publish(t, "container", "ctr-noai", spec)
	ev := b.await(t, "ctr-noai", time.Minute)
	e := ev.Data.Error
	if ev.Data.Status != "failed" || e == nil || e.Code != runner.CodeNoContainerService {
		t.Fatalf("job = %s %+v, want failed %s", ev.Data.Status, e, runner.CodeNoContainerService)
	}
	if !strings.Contains(e.Message, apisim.ComputeRegionNoAI) {
		t.Errorf("message %q does not name the region", e.Message)
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeUpload); n != 0 {
		t.Errorf("uploads = %d, want 0 before the region's container service is known", n)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 0 {
		t.Errorf("instances created = %d, want 0", created)
	}
}

// A region that holds no copy of the job's image refuses the create
// (nothing is created): the job fails naming the region and the image.
func TestContainerImageMissingInRegionNamesRegionAndImage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	spec := containerSpec("ctr-noimage", "exit 0\n", "00:10:00")
	image := spec["container"].(map[string]any)["instance"].(map[string]any)["image"].(string)
	b.compute.RemoveImage("cluster-a", image)
	b.start(t, withContainers)
	b.publish(t, "container", "ctr-noimage", spec)
	ev := b.await(t, "ctr-noimage", time.Minute)
	e := ev.Data.Error
	if ev.Data.Status != "failed" || e == nil {
		t.Fatalf("job = %s %+v, want failed", ev.Data.Status, e)
	}
	if !strings.Contains(e.Message, "cluster-a") || !strings.Contains(e.Message, image) {
		t.Errorf("message %q does not name the region and the image", e.Message)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 0 {
		t.Errorf("instances created = %d, want 0", created)
	}
}

// Storage full on the last file a container job writes before its create
// (the emptied exit status file) holds the job like any other upload: no
// redelivery counted against SLUICE_MAX_DELIVER, no failure, and once
// there is room one instance.
func TestContainerStorageFullOnExitFileHoldsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const id = "ctr-fullexit"
	exit := "/public/home/alice/sluice/" + id + "/" + id + ".exit"
	b.compute.SetStorageFullFor(exit, true)
	b.start(t, withContainers, func(c *config.Config) { c.MaxDeliver = 2 })
	b.publish(t, "container", id, containerSpec(id, "exit 0\n", "00:10:00"))
	rec := b.awaitRecord(t, id, time.Minute, func(r *state.Record) bool {
		return r.Status.Terminal() || b.compute.StorageFullRefusals(exit) >= 4
	})
	if rec.Status.Terminal() {
		t.Fatalf("a full storage ended the job after %d refusals: %s %+v", b.compute.StorageFullRefusals(exit), rec.Status, rec.Error)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 0 {
		t.Fatalf("instances created = %d while the storage was full", created)
	}
	b.compute.SetStorageFullFor(exit, false)
	ev := b.await(t, id, 2*time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("after the storage had room: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if created, _, _ := b.compute.ContainerCounts(); created != 1 {
		t.Errorf("instances created = %d, want 1", created)
	}
	assertNoInstances(t, b)
}
