package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// The platform answers HTTP 200 with code 10001 when it is busy
// (platform-evidence.md section 4). Such an answer says nothing about the
// resource asked for: these tests put one at each decision that reads it.

// A delete that fails, confirmed by a busy instance detail, does not count
// the instance as deleted: it is deleted again, and none is left billing.
func TestContainerBusyDetailAfterFailedDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.FailContainerDeletes(1)
	// Every detail answers busy: the polls before the end (the script's
	// exit file ends the wait) and the read that confirms a delete.
	b.compute.AnswerBusy(apisim.EndpointContainerDetail, 1000)
	b.start(t, withContainers)
	id := "ctr-busy-del"
	b.publish(t, "container", id, containerSpec(id, "echo ok\n", "00:10:00"))
	ev := b.await(t, id, 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

// Busy instance details while a script runs are not "instance gone": the
// job goes on and ends with the script's own outcome.
func TestContainerBusyDetailsWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.compute.AnswerBusy(apisim.EndpointContainerDetail, 5)
	b.start(t, withContainers)
	id := "ctr-busy-poll"
	b.publish(t, "container", id, containerSpec(id, "#SIM runfor 8s\necho done\nexit 0\n", "00:10:00"))
	ev := b.await(t, id, 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	assertNoInstances(t, b)
}

// A cancel answered busy is sent again: the platform job is deleted and
// the job ends cancelled, not at its wall time.
func TestComputeCancelAnsweredBusy(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{historyDelay: 50 * time.Millisecond})
	b.compute.AnswerBusy(apisim.EndpointComputeCancel, 1)
	b.start(t)
	id := "cancel-busy"
	b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\n#SIM runfor 1h\n"))
	waitFor(t, 30*time.Second, "the job to run", func() bool { return b.compute.Counters().Get("jobs:running") >= 1 })
	if r := cancel(t, b, id); r.Error != "" {
		t.Fatalf("cancel reply %+v", r)
	}
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "cancelled" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.compute.Counters().Get("jobs:cancelled"); n != 1 {
		t.Errorf("simulator cancelled %d jobs", n)
	}
}
