package apiclient

import "encoding/json"

// This file holds the media API's wire types (spec/media-api.md sections 2,
// 4 and 6). Field names and JSON tags follow the spec exactly; optional fields
// decode to their zero value when absent, never to an invented one.

// VideoRequest is the body of POST /api/llm/v1/videos/generations (2.4, 4.1).
type VideoRequest struct {
	Model      string          `json:"model"`
	Input      VideoInput      `json:"input"`
	Parameters VideoParameters `json:"parameters"`
}

// VideoInput is a video request's input object.
type VideoInput struct {
	Prompt string       `json:"prompt"`
	Images []string     `json:"images,omitempty"`
	Media  []MediaInput `json:"media,omitempty"`
}

// MediaInput is one role-tagged media input of a video request. (It is not
// called Media because that name belongs to the media API client.)
type MediaInput struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// VideoParameters is a video request's parameters object.
type VideoParameters struct {
	Resolution string `json:"resolution"`
	Duration   int    `json:"duration"`
	Ratio      string `json:"ratio,omitempty"`
	Watermark  *bool  `json:"watermark,omitempty"`
}

// Media roles (2.4).
const (
	RoleFirstFrame     = "first_frame"
	RoleLastFrame      = "last_frame"
	RoleReferenceImage = "reference_image"
	RoleReferenceVideo = "reference_video"
	RoleReferenceAudio = "reference_audio"
)

// SpeechRequest is the body of POST /api/llm/v1/audios/generations (2.5, 4.2).
// StreamFormat is "sse" for a streamed response and empty otherwise.
type SpeechRequest struct {
	Model        string      `json:"model"`
	Input        SpeechInput `json:"input"`
	StreamFormat string      `json:"stream_format,omitempty"`
}

// SpeechInput is a speech request's input object.
type SpeechInput struct {
	Text                 string `json:"text"`
	Voice                string `json:"voice"`
	LanguageType         string `json:"language_type,omitempty"`
	Instructions         string `json:"instructions,omitempty"`
	OptimizeInstructions *bool  `json:"optimize_instructions,omitempty"`
}

// TaskStatus is a task's external status (section 3).
type TaskStatus string

// Task statuses (section 3).
const (
	TaskPending   TaskStatus = "pending"
	TaskRunning   TaskStatus = "running"
	TaskSucceeded TaskStatus = "succeeded"
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
)

// Terminal reports whether s is one of succeeded, failed, cancelled.
func (s TaskStatus) Terminal() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskCancelled
}

// Task is the task object returned by submit, query, batch query and cancel
// (2.1). Usage is kept verbatim (nil when absent or null) because sluice
// passes it through to its events unchanged.
type Task struct {
	RequestID string          `json:"request_id"`
	Output    TaskOutput      `json:"output"`
	Usage     json.RawMessage `json:"usage,omitempty"`
}

// TaskOutput is a task's output object. Pointers and empty values mean the
// field was absent or null upstream.
type TaskOutput struct {
	TaskID       string     `json:"task_id"`
	TaskStatus   TaskStatus `json:"task_status"`
	SubmitTime   string     `json:"submit_time,omitempty"`
	EndTime      string     `json:"end_time,omitempty"`
	Results      []string   `json:"results,omitempty"`
	ErrorCode    *string    `json:"error_code,omitempty"`
	ErrorMessage *string    `json:"error_message,omitempty"`
}
