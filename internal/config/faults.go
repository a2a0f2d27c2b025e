//go:build faults

package config

import (
	"fmt"
	"os"
	"time"
)

// parseFaults reads the variables that inject faults, which only a
// worker built with the faults tag has (the chaos suite builds it so);
// a release build ignores them (nofaults.go).
func parseFaults(c *Config) error {
	v, ok := os.LookupEnv("SLUICE_FAULT_CLOCK_OFFSET")
	if !ok || v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("SLUICE_FAULT_CLOCK_OFFSET: cannot parse %q: %s", v, wantOf("time.Duration"))
	}
	c.FaultClockOffset = d
	return nil
}
