package apiclient

import "strings"

// routes are the endpoints of both upstream APIs as route templates
// (spec/media-api.md section 4, spec/compute-api.md section 4, and the
// job list, history and cancel of spec/platform-evidence.md): a segment
// in braces stands for any one segment.
var routes = []struct{ method, path string }{
	{"POST", "/api/llm/v1/videos/generations"},
	{"POST", "/api/llm/v1/audios/generations"},
	{"POST", "/api/llm/v1/tasks"},
	{"GET", "/api/llm/v1/tasks/{task_id}"},
	{"POST", "/api/llm/v1/tasks/{task_id}/cancel"},
	{"POST", "/ac/openapi/v2/tokens"},
	{"POST", "/ac/openapi/v2/tokens/next"},
	{"GET", "/ac/openapi/v2/center"},
	{"POST", "/efile/openapi/v2/file/upload"},
	{"GET", "/efile/openapi/v2/file/download"},
	{"GET", "/efile/openapi/v2/file/list"},
	{"GET", "/hpc/openapi/v2/cluster"},
	{"GET", "/hpc/openapi/v2/queuenames/users/{user_name}"},
	{"POST", "/hpc/openapi/v2/apptemplates/{template_type}/{template_name}/job"},
	{"GET", "/hpc/openapi/v2/jobs/{job_id}"},
	{"GET", "/hpc/openapi/v2/jobs"},
	{"DELETE", "/hpc/openapi/v2/jobs"},
	{"GET", "/hpc/openapi/v2/historyjobs"},
	{"GET", "/hpc/openapi/v2/historyjobs/{jobmanager_id}/{job_id}"},
}

// RouteOther is the route of a request that matches no known endpoint.
const RouteOther = "other"

// Route returns the route template of a request to either upstream API,
// "<METHOD> <template>" such as "GET /hpc/openapi/v2/jobs/{job_id}", or
// RouteOther. The template never holds an id, a user or a template name,
// so a metric labelled with it has a bounded number of series. A base URL
// with a path of its own is allowed: the template matches the path's end.
func Route(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, r := range routes {
		if r.method == method && matchTail(segs, r.path) {
			return r.method + " " + r.path
		}
	}
	return RouteOther
}

// matchTail reports whether the last segments of segs match template.
func matchTail(segs []string, template string) bool {
	want := strings.Split(strings.Trim(template, "/"), "/")
	if len(segs) < len(want) {
		return false
	}
	segs = segs[len(segs)-len(want):]
	for i, w := range want {
		if strings.HasPrefix(w, "{") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if segs[i] != w {
			return false
		}
	}
	return true
}
