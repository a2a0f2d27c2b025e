package events_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestPublishWithLostAck publishes a terminal event through a proxy that
// forwards it to the server and drops the stream's ack, as a stream
// leader change can: the publish is sent again with the same id and
// succeeds, and the stream holds the event once.
func TestPublishWithLostAck(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 20*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(n.Server.ClientURL(), "nats://"))
	pub := events.NewPublisher(drop.JetStream(t)).WithAckTimeout(300 * time.Millisecond)
	drop.Arm("sluice.events.", 2)
	id := contract.EventID("job-1", "succeeded")
	if err := pub.PublishRaw(ctx, "video", "succeeded", id, []byte(`{"id":"`+id+`"}`)); err != nil {
		t.Fatalf("publish with lost acks: %v", err)
	}
	if got := drop.Dropped(); got != 2 {
		t.Fatalf("%d acks dropped, want 2", got)
	}
	s, err := n.JS.Stream(ctx, contract.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.WithoutCancel(ctx))
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("SLUICE_EVENTS after the publish: %+v, %v; want 1 message", info.State, err)
	}
}
