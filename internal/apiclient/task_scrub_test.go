package apiclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// A failed task's error code and message may echo what upstream was sent:
// the bearer key and presigned input URLs never come out of the client.
func TestTaskErrorsAreScrubbed(t *testing.T) {
	t.Parallel()
	const key = "sk-task-KEY-0f9e"
	echo := "fetch https://bucket.example.test/in.png?X-Amz-Signature=sig-SECRET failed; key " + key + ", Authorization: Bearer " + key
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := fmt.Sprintf(`{"request_id":"r","output":{"task_id":"t-1","task_status":"failed","error_code":%q,"error_message":%q}}`, "E-"+key, echo)
		if r.Method == http.MethodPost {
			task = "[" + task + "]"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(task))
	}))
	defer srv.Close()
	c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	one, err := c.GetTask(ctx, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	many, err := c.GetTasks(ctx, []string{"t-1"})
	if err != nil || len(many) != 1 {
		t.Fatalf("batch: %v, %v", many, err)
	}
	for _, task := range []*apiclient.Task{one, &many[0]} {
		code, msg := *task.Output.ErrorCode, *task.Output.ErrorMessage
		for _, secret := range []string{key, "sig-SECRET", "X-Amz-Signature"} {
			if strings.Contains(code+msg, secret) {
				t.Errorf("error code %q / message %q carry %q", code, msg, secret)
			}
		}
		if !strings.Contains(msg, "https://bucket.example.test/in.png") {
			t.Errorf("message %q lost its meaning", msg)
		}
	}
}
