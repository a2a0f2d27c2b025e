package contract

// CancelRequest is the body of a message on CancelSubject.
type CancelRequest struct {
	JobID string `json:"job_id"`
}

// The values of CancelReply.Cancel.
const (
	// CancelRequested: the job's cancel flag is set.
	CancelRequested = "requested"
	// CancelTerminal: the job had already ended; nothing changed.
	CancelTerminal = "terminal"
)

// CancelReply is a worker's answer to a request on CancelSubject:
// {"job_id","cancel","status"} or {"job_id","error"}.
type CancelReply struct {
	// JobID echoes the request's job id.
	JobID string `json:"job_id"`
	// Cancel is CancelRequested or CancelTerminal.
	Cancel string `json:"cancel,omitempty"`
	// Status is the job's record status as the worker saw it.
	Status string `json:"status,omitempty"`
	// Error says why the worker refused or could not handle the request.
	Error string `json:"error,omitempty"`
}
