package apiclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// each about one of the asked ids. Each element is decoded alone: one it
// cannot read is left out, and its task id, when that can be read and was
// asked, is returned in bad, for the caller to ask alone (an element about
// a task not asked, or whose id cannot be read, is left out: the task is
// then missing from the answer). Only an answer that is not an array is an
// error.
func decodeTasks(b []byte, asked []string, secrets ...string) (tasks []Task, bad []string, err error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil, mediaJSONError(err)
	}
	if raw == nil {
		return nil, nil, errors.New("answer is null, not an array")
	}
	tasks = make([]Task, 0, len(raw))
	for _, r := range raw {
		var t Task
		err := json.Unmarshal(r, &t)
		if err == nil {
			err = checkTask(&t, true, secrets...)
		}
		switch {
		case err == nil && slices.Contains(asked, t.Output.TaskID):
			tasks = append(tasks, t)
		case err != nil:
			if id := elementTaskID(r); slices.Contains(asked, id) && !slices.Contains(bad, id) {
				bad = append(bad, id)
			}
		}
	}
	return tasks, bad, nil
}

// elementTaskID reads output.task_id from a batch element that does not
// decode as a task, or "".
func elementTaskID(r json.RawMessage) string {
	var e struct {
		Output struct {
			TaskID json.RawMessage `json:"task_id"`
		} `json:"output"`
	}
	var id string
	if json.Unmarshal(r, &e) != nil || json.Unmarshal(e.Output.TaskID, &id) != nil {
		return ""
	}
	return id
}

// BadElementsError is returned by GetTasks, with the tasks it could read,
// when the answer's elements about TaskIDs could not be read: ask those
// alone (GetTask). It is neither permanent nor a reason to retry the batch.
type BadElementsError struct {
	TaskIDs []string
}

func (e *BadElementsError) Error() string {
	return fmt.Sprintf("get tasks: the answer's elements about %d task(s) are malformed: %s", len(e.TaskIDs), strings.Join(e.TaskIDs, ", "))
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
