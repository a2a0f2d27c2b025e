package apiclient_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ method, path, want string }{
		{"POST", "/hpc/openapi/v2/apptemplates/BASIC/BASE/job", "POST /hpc/openapi/v2/apptemplates/{template_type}/{template_name}/job"},
		{"POST", "/hpc/openapi/v2/apptemplates/MY%2FAPP/run%20one/job", "POST /hpc/openapi/v2/apptemplates/{template_type}/{template_name}/job"},
		{"GET", "/hpc/openapi/v2/jobs/4001", "GET /hpc/openapi/v2/jobs/{job_id}"},
		{"GET", "/hpc/openapi/v2/queuenames/users/alice", "GET /hpc/openapi/v2/queuenames/users/{user_name}"},
		{"GET", "/api/llm/v1/tasks/t-42", "GET /api/llm/v1/tasks/{task_id}"},
		{"POST", "/api/llm/v1/tasks/t-42/cancel", "POST /api/llm/v1/tasks/{task_id}/cancel"},
		{"POST", "/api/llm/v1/tasks", "POST /api/llm/v1/tasks"},
		{"POST", "/prefix/behind/a/gateway/api/llm/v1/videos/generations", "POST /api/llm/v1/videos/generations"},
		{"GET", "/efile/openapi/v2/file/download", "GET /efile/openapi/v2/file/download"},
		{"DELETE", "/hpc/openapi/v2/jobs/4001", apiclient.RouteOther},
		{"GET", "/hpc/openapi/v2/jobs/", "GET /hpc/openapi/v2/jobs"},
		{"GET", "/hpc/openapi/v2/jobs", "GET /hpc/openapi/v2/jobs"},
		{"DELETE", "/hpc/openapi/v2/jobs", "DELETE /hpc/openapi/v2/jobs"},
		{"GET", "/hpc/openapi/v2/historyjobs", "GET /hpc/openapi/v2/historyjobs"},
		{"GET", "/hpc/openapi/v2/historyjobs/2001/4001", "GET /hpc/openapi/v2/historyjobs/{jobmanager_id}/{job_id}"},
		{"GET", "/hpc/openapi/v2/historyjobs/2001", apiclient.RouteOther},
		{"GET", "/results/abc.mp4", apiclient.RouteOther},
	} {
		if got := apiclient.Route(c.method, c.path); got != c.want {
			t.Errorf("Route(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}
