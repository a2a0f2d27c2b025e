package worker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestCleanCloseDoesNotWarnDisconnected: closing the worker's connection
// on a clean stop logs no "NATS disconnected" warning; losing the server
// still does.
func TestCleanCloseDoesNotWarnDisconnected(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	for _, tt := range []struct {
		name string
		end  func(*nats.Conn)
		warn bool
	}{
		{"clean close", func(nc *nats.Conn) { nc.Close() }, false},
		{"server gone", func(*nats.Conn) { n.Server.Shutdown() }, true},
	} {
		var buf bytes.Buffer
		closed := make(chan struct{})
		nc, err := nats.Connect(n.URL, nats.DisconnectErrHandler(disconnected(zerolog.New(&buf))),
			nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
		if err != nil {
			t.Fatal(err)
		}
		tt.end(nc)
		<-closed // the client runs its handlers in order: the disconnect one ran
		if got := strings.Contains(buf.String(), "NATS disconnected"); got != tt.warn {
			t.Errorf("%s: warned %v, want %v; log: %s", tt.name, got, tt.warn, buf.String())
		}
	}
}
