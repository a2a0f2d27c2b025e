package testenv_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// A subscriber's checks keep passing when an event grows a field: the
// CloudEvents SDK parses it and the published schema accepts it; only the
// project's strict variant notices.
func TestEventWithAnAddedFieldPassesASubscribersChecks(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(testenv.SchemaDir(), "examples", "event-succeeded.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["sequence"] = "7"                               // a CloudEvents extension attribute
	doc["data"].(map[string]any)["queue_wait_ms"] = 120 // a new data field
	grown, _ := json.Marshal(doc)

	var ev cloudevents.Event
	if err := ev.UnmarshalJSON(grown); err != nil {
		t.Fatalf("SDK: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("SDK: %v", err)
	}
	var data map[string]any
	if err := ev.DataAs(&data); err != nil || data["queue_wait_ms"] != float64(120) || ev.Extensions()["sequence"] != "7" {
		t.Errorf("SDK sees data %v (%v), extensions %v", data, err, ev.Extensions())
	}
	validate := func(sch *jsonschema.Schema) error {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(grown))
		if err != nil {
			return err
		}
		return sch.Validate(inst)
	}
	if err := validate(testenv.EventSchema(t, false)); err != nil {
		t.Errorf("published schema rejects an added field: %v", err)
	}
	if err := validate(testenv.EventSchema(t, true)); err == nil {
		t.Error("strict schema accepts an added field")
	}
}

// A note value a later version adds (a terminal status qualified another
// way) keeps passing the published schema, as an added field does: the
// schema names the notes known today without closing the list.
func TestEventWithALaterNotePassesThePublishedSchema(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(testenv.SchemaDir(), "examples", "event-succeeded.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["data"].(map[string]any)["note"] = "a_note_added_later"
	grown, _ := json.Marshal(doc)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(grown))
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.EventSchema(t, false).Validate(inst); err != nil {
		t.Errorf("published schema rejects a later note: %v", err)
	}
}
