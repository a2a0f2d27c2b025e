package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a number of bytes written as a whole number with an
// optional binary unit: 1048576, 512KiB, 8MiB, 1GiB (K, M, G and KB, MB,
// GB mean the same binary units).
type ByteSize int64

// Decode parses s (envconfig calls it for SLUICE_* variables of this
// type).
func (b *ByteSize) Decode(s string) error {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"KB", 10}, {"MB", 20}, {"GB", 30}, {"K", 10}, {"M", 20}, {"G", 30}, {"B", 0}}
	var shift uint
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, shift = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > (1<<62)>>shift || n < -((1<<62)>>shift) {
		return fmt.Errorf("not a size")
	}
	*b = ByteSize(n << shift)
	return nil
}
