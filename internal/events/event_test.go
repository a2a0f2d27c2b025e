package events_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// schema is the strict variant of the published event schema: sluice
// publishes nothing it does not document.
func schema(t *testing.T) *jsonschema.Schema { return testenv.EventSchema(t, true) }

func TestFromRecordMatchesTheContract(t *testing.T) {
	t.Parallel()
	sch := schema(t)
	at := time.Date(2026, 11, 22, 10, 0, 5, 123456789, time.UTC)
	exit := "0"
	cases := map[string]struct {
		rec    state.Record
		status state.Status
		check  func(t *testing.T, ev events.Event, raw []byte)
	}{
		"invalid spec": {
			rec:    state.Record{JobID: "js-7", Kind: "speech", Attempts: 1, Error: &state.Error{Code: "invalid_spec", Message: "speech.input.text: required", Stage: state.StageValidate}},
			status: state.StatusFailed,
			check: func(t *testing.T, ev events.Event, raw []byte) {
				if ev.Data.Upstream != nil || ev.Data.Error == nil || !bytes.Contains(raw, []byte(`"labels":{}`)) ||
					!bytes.Contains(raw, []byte(`"artifacts":[]`)) || !bytes.Contains(raw, []byte(`"usage":null`)) {
					t.Errorf("event = %s", raw)
				}
			},
		},
		"video succeeded": {
			rec: state.Record{JobID: "clip-1", Kind: "video", Attempts: 2, Labels: map[string]string{"a": "b"},
				Upstream:  state.Upstream{TaskID: "t-1", RequestID: "r-1", Status: "succeeded"},
				Usage:     json.RawMessage(`{"video_count":1}`),
				Artifacts: []state.Artifact{{URL: "s3://b/k", Bucket: "b", Key: "k", Size: 3, SHA256: strings.Repeat("ab", 32), ContentType: "video/mp4"}},
				Error:     &state.Error{Code: "stale"}},
			status: state.StatusSucceeded,
			check: func(t *testing.T, ev events.Event, raw []byte) {
				if ev.ID != "clip-1.succeeded" || ev.Type != "sluice.job.succeeded" || ev.Subject != "clip-1" ||
					ev.Time != "2026-11-22T10:00:05.123Z" || ev.Data.Error != nil || ev.Data.Attempt != 2 {
					t.Errorf("event = %s", raw)
				}
			},
		},
		"compute running": {
			rec:    state.Record{JobID: "hpc-1", Kind: "compute", Upstream: state.Upstream{ClusterID: "1001", JobID: "4001", Status: "statR", State: "RUNNING", ExitCode: &exit}},
			status: state.StatusRunning,
			check: func(t *testing.T, ev events.Event, raw []byte) {
				if !bytes.Contains(raw, []byte(`"cluster_id":"1001"`)) || ev.Data.Attempt != 1 {
					t.Errorf("event = %s", raw)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ev := events.FromRecord(&tc.rec, tc.status, at)
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("schema rejects %s: %v", raw, err)
			}
			tc.check(t, ev, raw)
		})
	}
}
