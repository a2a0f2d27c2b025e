//go:build faults

package config

import (
	"testing"
	"time"
)

func TestFaultClockOffset(t *testing.T) {
	t.Setenv("SLUICE_FAULT_CLOCK_OFFSET", "-90s")
	c, err := Parse()
	if err != nil {
		t.Fatal(err)
	}
	if c.FaultClockOffset != -90*time.Second {
		t.Fatalf("offset %s, want -90s", c.FaultClockOffset)
	}
	if d := time.Since(c.Clock()()); d < 89*time.Second || d > 91*time.Second {
		t.Fatalf("the clock reads %s behind, want 90s", d)
	}
	t.Setenv("SLUICE_FAULT_CLOCK_OFFSET", "soon")
	if _, err := Parse(); err == nil {
		t.Fatal("a bad offset parsed")
	}
}
