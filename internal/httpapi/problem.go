package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

// The codes of the API's problems (docs/http-api.md#errors). invalid_spec
// and tenant_refused are the events' codes for the same refusals.
const (
	codeInvalidSpec   = "invalid_spec"
	codeTenantRefused = "tenant_refused"
	codeUnauthorized  = "unauthorized"
	codeNotFound      = "not_found"
	codeNoSuchJob     = "no_such_job"
	codeIDTaken       = "id_taken"
	codeNotRetryable  = "not_retryable"
	codeBadParameter  = "invalid_parameter"
	codeRateLimited   = "rate_limited"
	codeUnavailable   = "unavailable"
)

// problemTypeBase prefixes each problem's type, a page of the docs.
const problemTypeBase = "https://github.com/sluice-dev/sluice/blob/main/docs/http-api.md#"

// problem is an RFC 9457 problem details object with sluice's code.
type problem struct {
	Type     string         `json:"type"`
	Title    string         `json:"title"`
	Status   int            `json:"status"`
	Code     string         `json:"code"`
	Detail   string         `json:"detail"`
	Instance string         `json:"instance,omitempty"`
	Problems []fieldProblem `json:"problems,omitempty"`
}

// fieldProblem is one broken rule of a spec, as the CLI's --json reports
// it.
type fieldProblem struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
}

// invalidSpec is the 422 problem of a spec that breaks rules: its detail
// is the very message the CLI prints and the failed event carries.
func invalidSpec(err *jobspec.Error) problem {
	p := problem{Status: http.StatusUnprocessableEntity, Code: codeInvalidSpec, Detail: err.Error()}
	for _, fp := range err.Problems {
		p.Problems = append(p.Problems, fieldProblem{Path: fp.Path, Rule: fp.Rule})
	}
	return p
}

// writeProblem writes p as application/problem+json, its type the docs'
// entry of its code.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem) {
	p.Type = problemTypeBase + p.Code
	p.Title = http.StatusText(p.Status)
	p.Instance = r.URL.Path
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON writes v as application/json with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
