package devstack_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/devstack"
)

// TestSecondStackOnOneDataDirIsRefused starts the embedded default twice on
// one data directory, as two dev workers on ./data would: the second would
// run a second NATS server on the first one's store. It must be refused
// with an error naming the directory and the process holding it, and the
// directory must be usable again once the first stops.
func TestSecondStackOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := devstack.Config{DataDir: dir, NATSPort: -1, S3Addr: "127.0.0.1:0"}
	first, err := devstack.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := devstack.Start(context.Background(), cfg)
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second embedded default started on the same data directory")
	}
	for _, want := range []string{dir, "process " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	first.Close()
	again, err := devstack.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Close()
}
