package apiclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// decodeTask decodes a task object. The status must be present, and the
// task id too when needID is set; nothing absent is filled in. The error
// code and message are scrubbed of secrets (see checkTask).
func decodeTask(b []byte, needID bool, secrets ...string) (*Task, error) {
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, mediaJSONError(err)
	}
	if err := checkTask(&t, needID, secrets...); err != nil {
		return nil, err
	}
	return &t, nil
}

// decodeTaskFor decodes the answer about taskID and refuses one about
// another task.
func decodeTaskFor(b []byte, taskID string, secrets ...string) (*Task, error) {
	t, err := decodeTask(b, true, secrets...)
	if err != nil {
		return nil, err
	}
	if t.Output.TaskID != taskID {
		return nil, errors.New("output.task_id differs from the requested id")
	}
	return t, nil
}

// decodeTasks decodes a batch query answer: a JSON array of task objects,
// each about one of the asked ids.
func decodeTasks(b []byte, asked []string, secrets ...string) ([]Task, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, mediaJSONError(err)
	}
	if raw == nil {
		return nil, errors.New("answer is null, not an array")
	}
	tasks := make([]Task, 0, len(raw))
	for i, r := range raw {
		var t Task
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, mediaJSONError(err))
		}
		if err := checkTask(&t, true, secrets...); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		if !slices.Contains(asked, t.Output.TaskID) {
			return nil, fmt.Errorf("element %d is about a task that was not asked for", i)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// checkTask normalizes and checks a decoded task. A JSON null where an
// object or string was expected decodes to the zero value; usage null is
// kept as absent (nil). The error code and message are scrubbed of the
// secrets given, URL query strings and credentials (see scrub): upstream
// may echo what it was sent (the bearer key, presigned input URLs), and
// they go into events and logs. Result addresses are left as they are.
func checkTask(t *Task, needID bool, secrets ...string) error {
	if bytes.Equal(bytes.TrimSpace(t.Usage), []byte("null")) {
		t.Usage = nil
	}
	for _, p := range []*string{t.Output.ErrorCode, t.Output.ErrorMessage} {
		if p != nil {
			*p = scrub(*p, secrets...)
		}
	}
	if t.Output.TaskStatus == "" {
		return errors.New("output.task_status is missing")
	}
	if needID && t.Output.TaskID == "" {
		return errNoTaskID
	}
	return nil
}

// mediaJSONError describes a JSON decoding failure without quoting the body.
func mediaJSONError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Errorf("field %s has the wrong type (%s)", te.Field, te.Value)
		}
		return fmt.Errorf("wrong JSON type (%s)", te.Value)
	default:
		return errors.New("invalid JSON")
	}
}
