package cli

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestSpendTotalIsTheSumOfItsRows: the total printed by spend equals the
// sum of the rows as printed, in plain numbers however large.
func TestSpendTotalIsTheSumOfItsRows(t *testing.T) {
	var out bytes.Buffer
	printSpend(&out, "tenant", []spendRow{{Key: "acme", Credits: 12345.6789, Jobs: 3}, {Key: "beta", Credits: 0.33333, Jobs: 1}, {Key: "gamma", Credits: 0.33333, Jobs: 1}})
	var sum, total float64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || strings.ContainsAny(f[1], "eE") {
			t.Fatalf("%q: credits %q are not a plain number", line, f[1])
		}
		if f[0] == "total" {
			total = v
		} else {
			sum += v
		}
	}
	if math.Abs(sum-total) > 1e-9 {
		t.Errorf("rows sum to %v, total printed %v:\n%s", sum, total, out.String())
	}
}
