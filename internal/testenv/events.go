package testenv

import (
	"bytes"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// EventChecker checks events as a subscriber would: each is parsed and
// validated with the CloudEvents Go SDK and checked against the published
// event schema, and, for sluice's own tests, against its strict variant.
type EventChecker struct {
	published, strict *jsonschema.Schema
}

// NewEventChecker compiles both event schemas.
func NewEventChecker(t testing.TB) *EventChecker {
	t.Helper()
	return &EventChecker{published: EventSchema(t, false), strict: EventSchema(t, true)}
}

// Check fails t unless the event message m (from SLUICE_EVENTS or a core
// subscription) is a valid CloudEvent in JSON structured mode that both
// schemas accept, with its Content-Type and a Nats-Msg-Id equal to its id.
// It returns the SDK's event.
func (c *EventChecker) Check(t testing.TB, subject string, h nats.Header, data []byte) cloudevents.Event {
	t.Helper()
	var ev cloudevents.Event
	if err := ev.UnmarshalJSON(data); err != nil {
		t.Errorf("event on %s: the CloudEvents SDK cannot parse it: %v\n%s", subject, err, data)
		return ev
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("event %s: the CloudEvents SDK finds it invalid: %v", ev.ID(), err)
	}
	if ev.SpecVersion() != "1.0" || ev.DataContentType() != "application/json" {
		t.Errorf("event %s: specversion %q, datacontenttype %q", ev.ID(), ev.SpecVersion(), ev.DataContentType())
	}
	if got := h.Get("Content-Type"); got != "application/cloudevents+json" {
		t.Errorf("event %s: Content-Type header %q, want application/cloudevents+json", ev.ID(), got)
	}
	if got := h.Get("Nats-Msg-Id"); got != ev.ID() {
		t.Errorf("event %s: Nats-Msg-Id %q", ev.ID(), got)
	}
	for name, sch := range map[string]*jsonschema.Schema{"published": c.published, "strict": c.strict} {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err == nil {
			err = sch.Validate(inst)
		}
		if err != nil {
			t.Errorf("event %s: the %s schema rejects it: %v", ev.ID(), name, err)
		}
	}
	return ev
}
