package bench

import (
	"testing"
	"time"
)

// C1 runs every job at once on one worker, but its compute requests in
// flight stay few: each holds a connection, two descriptors in the bench
// process (client and simulator), and 10,000 of them exhausted the
// descriptors and stalled the submits.
func TestC1ConfigKeepsComputeRequestsInFlightFew(t *testing.T) {
	st := &stack{natsURL: "nats://127.0.0.1:4222", s3Endpoint: "http://127.0.0.1:9000"}
	cfg, err := c1Config(t.TempDir(), st, "http://127.0.0.1:8080", 10000, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxInflight != 10000 {
		t.Errorf("SLUICE_MAX_INFLIGHT %d, want every job at once (10000)", cfg.MaxInflight)
	}
	if cfg.ComputeConc > 256 {
		t.Errorf("SLUICE_COMPUTE_MAX_CONCURRENCY %d: compute requests in flight, want at most 256", cfg.ComputeConc)
	}
}
