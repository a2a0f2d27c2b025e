package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
)

// TestComputeEndToEndLetterMode runs a compute job against a simulator
// that follows compute-api.md to the letter: password login, bare center
// addresses, single-request uploads.
func TestComputeEndToEndLetterMode(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{computeLetter: true})
	b.start(t)
	b.publish(t, "compute", "letter-1", computeSpec(t, b, "letter-1", "#!/bin/sh\necho letter\n#SIM output result.dat 10K\ncp params.nml params-copy.nml\n"))
	ev := b.await(t, "letter-1", 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.compute.SubmitCount("letter-1"); n != 1 {
		t.Errorf("submits = %d", n)
	}
	if n := b.compute.Counters().Get("requests:" + apisim.EndpointComputeUpload + ":200"); n != 2 {
		t.Errorf("uploads = %d, want 2", n)
	}
}

// TestComputeEndToEndPlatformMode runs a compute job against a simulator
// that behaves like the platform, logging in with AK/SK and sending the
// inputs through the chunked upload.
func TestComputeEndToEndPlatformMode(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) {
		c.ComputePassword, c.ComputeOrgID = "", ""
		c.ComputeAccessKey, c.ComputeSecretKey = computeAccessKey, secretComputeSK
		c.ComputeChunkSize = 4
	})
	b.publish(t, "compute", "platform-1", computeSpec(t, b, "platform-1", "#!/bin/sh\necho platform\n#SIM output result.dat 10K\ncp params.nml params-copy.nml\n"))
	ev := b.await(t, "platform-1", 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	got, _ := b.compute.File("/public/home/alice/platform-1/params-copy.nml")
	if string(got) != "alpha=1\n" {
		t.Errorf("params-copy.nml = %q", got)
	}
	c := b.compute.Counters()
	if n := c.Get("requests:" + apisim.EndpointComputeAKSK + ":200"); n < 1 {
		t.Errorf("AK/SK logins = %d", n)
	}
	if n := c.Get("requests:" + apisim.EndpointComputeTokens + ":200"); n != 0 {
		t.Errorf("password logins = %d, want 0", n)
	}
	if n := c.Get("requests:" + apisim.EndpointComputeMerge + ":200"); n != 2 {
		t.Errorf("merges = %d, want 2 (one per input)", n)
	}
	if n := c.Get("requests:" + apisim.EndpointComputeUpload + ":200"); n != 0 {
		t.Errorf("single-request uploads = %d, want 0", n)
	}
}
