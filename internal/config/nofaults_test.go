//go:build !faults

package config

import "testing"

// TestFaultClockOffsetIgnored: a release build reads no fault variable.
func TestFaultClockOffsetIgnored(t *testing.T) {
	t.Setenv("SLUICE_FAULT_CLOCK_OFFSET", "-90s")
	c, err := Parse()
	if err != nil {
		t.Fatal(err)
	}
	if c.FaultClockOffset != 0 {
		t.Fatalf("offset %s read by a release build", c.FaultClockOffset)
	}
}
