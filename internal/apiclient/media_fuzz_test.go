package apiclient

import (
	"encoding/json"
	"testing"
)

// FuzzTaskDecode: decodeTask never panics, and what it accepts has a status
// (and an id when asked for) and re-encodes.
func FuzzTaskDecode(f *testing.F) {
	f.Add([]byte(`{"request_id":"r","output":{"task_id":"t","task_status":"pending"}}`), true)
	f.Add([]byte(`{"request_id":"r","output":{"task_id":"t","task_status":"succeeded","submit_time":"a","end_time":"b","results":["https://x/y.mp4"]},"usage":{"video_count":1}}`), true)
	f.Add([]byte(`{"request_id":"r","output":{"task_id":"t","task_status":"cancelled","results":null,"error_code":null,"error_message":null},"usage":null}`), true)
	f.Add([]byte(`{"request_id":"r","output":{"task_status":"succeeded","results":["u"]}}`), false)
	f.Add([]byte(`{"output":{"task_id":"t","task_status":"failed","error_code":"E","error_message":"m"}}`), true)
	f.Add([]byte(`{"output":[1,2,,`), true)
	f.Fuzz(func(t *testing.T, b []byte, needID bool) {
		task, err := decodeTask(b, needID)
		if err != nil {
			return
		}
		if task.Output.TaskStatus == "" || (needID && task.Output.TaskID == "") {
			t.Fatalf("accepted %+v", task)
		}
		if string(task.Usage) == "null" {
			t.Fatal("usage null kept")
		}
		if _, err := json.Marshal(task); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

// FuzzBatchDecode: decodeTasks never panics, and every element it accepts
// or names as bad is about an asked id.
func FuzzBatchDecode(f *testing.F) {
	f.Add([]byte(`[{"request_id":"r","output":{"task_id":"a","task_status":"running"}},{"request_id":"r","output":{"task_id":"b","task_status":"succeeded","results":["u"]},"usage":{"video_count":1}}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[null]`))
	f.Add([]byte(`[{"output":{"task_id":"c","task_status":"pending"}}]`))
	f.Add([]byte(`{"task_ids":["a"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		asked := []string{"a", "b"}
		tasks, bad, err := decodeTasks(b, asked)
		if err != nil {
			return
		}
		for _, id := range bad {
			if id != "a" && id != "b" {
				t.Fatalf("named %q as bad", id)
			}
		}
		for _, task := range tasks {
			if task.Output.TaskID != "a" && task.Output.TaskID != "b" || task.Output.TaskStatus == "" {
				t.Fatalf("accepted %+v", task)
			}
		}
	})
}
