//go:build !faults

package config

// parseFaults is faults.go's in a build with the faults tag: a release
// build reads no fault variables.
func parseFaults(*Config) error { return nil }
