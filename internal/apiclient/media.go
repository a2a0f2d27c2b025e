// Package apiclient speaks to sluice's upstream HTTP APIs: the media API
// (video and speech tasks) and the compute platform. It owns the wire types,
// the typed errors, and the retry rules: idempotent calls are retried on
// network errors, 429 and 5xx; paid submissions are retried only when
// upstream certainly created nothing, and any other failure after the
// request left is reported as ErrAmbiguous instead of being repeated.
package apiclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Media API paths under the base URL (spec/media-api.md section 4).
const (
	pathVideos = "/api/llm/v1/videos/generations"
	pathAudios = "/api/llm/v1/audios/generations"
	pathTasks  = "/api/llm/v1/tasks"
)

// MaxBatch is the largest number of task ids one GetTasks call accepts.
const MaxBatch = 10

// maxRetryAfter caps how long a Retry-After header can make a call wait.
const maxRetryAfter = 60 * time.Second

// MediaConfig configures a media API client. Fields are in a stable order.
type MediaConfig struct {
	// BaseURL is the media API's {base_url}: http or https, with an
	// optional path prefix, without credentials, query or fragment.
	// Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>" on every call and
	// never appears in an error. Required.
	APIKey string
	// HTTPClient sends the requests (never following a redirect: a copy
	// with its own CheckRedirect is used); its Timeout, if any, also bounds
	// speech streams. Defaults to a client using http.DefaultTransport
	// without an overall timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of one call, first try included.
	// Defaults to 5.
	MaxAttempts int
	// Backoff spaces retries that carry no Retry-After. Defaults to
	// backoff.Exponential{} (200ms doubling to 10s, full jitter).
	Backoff backoff.Exponential
	// Sleep waits between retries and must return early with ctx's error
	// when ctx is done. Defaults to backoff.Sleep.
	Sleep func(context.Context, time.Duration) error
	// Now reads the clock, for Retry-After dates. Defaults to time.Now.
	Now func() time.Time
	// AttemptTimeout bounds one try of a call until its response is read;
	// for a speech stream, until the response headers arrive. Defaults to
	// 60s.
	AttemptTimeout time.Duration
	// StreamStallTimeout gives up a speech stream that sends nothing for
	// this long (ErrStreamStalled). Defaults to 60s.
	StreamStallTimeout time.Duration
}

func (c MediaConfig) withDefaults() MediaConfig {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	c.HTTPClient = withoutRedirects(c.HTTPClient)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 5)
	c.StreamStallTimeout = cmp.Or(c.StreamStallTimeout, 60*time.Second)
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, 60*time.Second)
	return c
}

func (c MediaConfig) validate() (*url.URL, error) {
	u, err := ParseBaseURL(c.BaseURL)
	if err != nil {
		return nil, invalidArg("MediaConfig.BaseURL", err.Error())
	}
	if c.APIKey == "" {
		return nil, fmt.Errorf("%w: MediaConfig.APIKey is required", ErrInvalidArgument)
	}
	if strings.ContainsFunc(c.APIKey, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("%w: MediaConfig.APIKey must not contain spaces or control characters", ErrInvalidArgument)
	}
	if c.MaxAttempts < 0 {
		return nil, fmt.Errorf("%w: MediaConfig.MaxAttempts must not be negative", ErrInvalidArgument)
	}
	if c.AttemptTimeout < 0 {
		return nil, fmt.Errorf("%w: MediaConfig.AttemptTimeout must not be negative", ErrInvalidArgument)
	}
	if c.Backoff.Min < 0 || c.Backoff.Max < 0 {
		return nil, fmt.Errorf("%w: MediaConfig.Backoff must not be negative", ErrInvalidArgument)
	}
	return u, nil
}

// Media is a client of the media API (video, speech, tasks). It is safe for
// concurrent use.
type Media struct {
	cfg  MediaConfig
	base string // scheme://host/prefix, no trailing slash
}

// NewMedia returns a media client. It returns an error matching
// ErrInvalidArgument, naming the field, when cfg is not usable.
func NewMedia(cfg MediaConfig) (*Media, error) {
	u, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Media{cfg: cfg.withDefaults(), base: u.String()}, nil
}

// SubmitVideo submits a video generation task (always asynchronous) and
// returns the pending task. It is a paid call: it is retried only on 429,
// 503 and connection failures before the request was sent; any failure
// after which upstream may have created the task matches ErrAmbiguous.
// Upstream refusals are *APIError.
func (c *Media) SubmitVideo(ctx context.Context, req VideoRequest) (*Task, error) {
	body, err := mediaBody(req)
	if err != nil {
		return nil, fmt.Errorf("submit video: %w", err)
	}
	var task *Task
	err = c.do(ctx, mediaCall{
		op: "submit video", method: http.MethodPost, path: pathVideos, body: body,
		header: map[string]string{"X-MultiModal-Async": "true"}, paid: true,
		decode: func(b []byte) (err error) { task, err = decodeTask(b, true, c.cfg.APIKey); return err },
	})
	if err != nil {
		return nil, err
	}
	return task, nil
}

// SubmitSpeechSync synthesizes speech synchronously and returns the task
// with its results and usage. Retries and errors are as for SubmitVideo.
// req.StreamFormat must be empty.
func (c *Media) SubmitSpeechSync(ctx context.Context, req SpeechRequest) (*Task, error) {
	return c.submitSpeech(ctx, "submit speech (sync)", req, nil, false)
}

// SubmitSpeechAsync submits a speech synthesis task and returns the pending
// task. Retries and errors are as for SubmitVideo. req.StreamFormat must be
// empty.
func (c *Media) SubmitSpeechAsync(ctx context.Context, req SpeechRequest) (*Task, error) {
	return c.submitSpeech(ctx, "submit speech (async)", req, map[string]string{"X-MultiModal-Async": "true"}, true)
}

func (c *Media) submitSpeech(ctx context.Context, op string, req SpeechRequest, header map[string]string, needID bool) (*Task, error) {
	if req.StreamFormat != "" {
		return nil, fmt.Errorf("%s: %w: stream_format must be empty (use StreamSpeech)", op, ErrInvalidArgument)
	}
	body, err := mediaBody(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var task *Task
	err = c.do(ctx, mediaCall{
		op: op, method: http.MethodPost, path: pathAudios, body: body, header: header, paid: true,
		decode: func(b []byte) (err error) { task, err = decodeTask(b, needID, c.cfg.APIKey); return err },
	})
	if err != nil {
		return nil, err
	}
	return task, nil
}

// GetTask queries one task. A failed task is data (Output.ErrorCode), not
// an error. Network errors, 429 and 5xx are retried; an unknown id returns
// an *APIError matching ErrTaskNotFound.
func (c *Media) GetTask(ctx context.Context, taskID string) (*Task, error) {
	if err := checkTaskID("task_id", taskID); err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	var task *Task
	err := c.do(ctx, mediaCall{
		op: "get task", method: http.MethodGet, path: pathTasks + "/" + url.PathEscape(taskID),
		decode: func(b []byte) (err error) { task, err = decodeTaskFor(b, taskID, c.cfg.APIKey); return err },
	})
	if err != nil {
		return nil, err
	}
	return task, nil
}

// GetTasks queries up to MaxBatch tasks in one call and returns the
// elements upstream sent, in its order; match them by Output.TaskID
// (upstream may omit ids it does not know). An element that cannot be
// read does not fail the others: they are returned with a
// *BadElementsError naming its task. More than MaxBatch ids, or an empty
// id, is refused with ErrInvalidArgument before anything is sent; no ids
// returns nil without a call. Retries are as for GetTask.
func (c *Media) GetTasks(ctx context.Context, taskIDs []string) ([]Task, error) {
	if len(taskIDs) > MaxBatch {
		return nil, fmt.Errorf("get tasks: %w: task_ids has %d ids, at most %d are allowed per call",
			ErrInvalidArgument, len(taskIDs), MaxBatch)
	}
	for i, id := range taskIDs {
		if err := checkTaskID(fmt.Sprintf("task_ids[%d]", i), id); err != nil {
			return nil, fmt.Errorf("get tasks: %w", err)
		}
	}
	if len(taskIDs) == 0 {
		return nil, nil
	}
	body, err := mediaBody(struct {
		TaskIDs []string `json:"task_ids"`
	}{taskIDs})
	if err != nil {
		return nil, fmt.Errorf("get tasks: %w", err)
	}
	var tasks []Task
	var bad []string
	err = c.do(ctx, mediaCall{
		op: "get tasks", method: http.MethodPost, path: pathTasks, body: body,
		decode: func(b []byte) (err error) { tasks, bad, err = decodeTasks(b, taskIDs, c.cfg.APIKey); return err },
	})
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return tasks, &BadElementsError{TaskIDs: bad}
	}
	return tasks, nil
}

// CancelTask cancels a pending or running task and returns it. On a task
// that is already terminal it returns an *APIError matching
// ErrTaskTerminal; because cancel is retried like a query, this can also
// happen when an earlier try's cancel took effect but its answer was lost,
// so callers should GetTask to learn the terminal status.
func (c *Media) CancelTask(ctx context.Context, taskID string) (*Task, error) {
	if err := checkTaskID("task_id", taskID); err != nil {
		return nil, fmt.Errorf("cancel task: %w", err)
	}
	var task *Task
	err := c.do(ctx, mediaCall{
		op: "cancel task", method: http.MethodPost, path: pathTasks + "/" + url.PathEscape(taskID) + "/cancel",
		decode: func(b []byte) (err error) { task, err = decodeTaskFor(b, taskID, c.cfg.APIKey); return err },
	})
	if err != nil {
		return nil, err
	}
	return task, nil
}

// checkTaskID refuses ids that cannot name a task in a URL path.
func checkTaskID(field, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, field)
	case id == "." || id == "..":
		return fmt.Errorf("%w: %s must not be %q", ErrInvalidArgument, field, id)
	case len(id) > 1024:
		return fmt.Errorf("%w: %s is longer than 1024 bytes", ErrInvalidArgument, field)
	}
	return nil
}

// errNoTaskID is the cause of a successful answer without a task id.
var errNoTaskID = errors.New("output.task_id is missing")
