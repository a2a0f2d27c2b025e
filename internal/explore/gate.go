package explore

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// routes names the upstream calls' decision points: one class per route
// of the media API and the compute platform (jobs, history, files,
// containers). Add a route here when the worker learns a new call.
var routes = map[string]string{
	"POST /api/llm/v1/videos/generations":                              "submit",
	"POST /api/llm/v1/audios/generations":                              "submit",
	"GET /api/llm/v1/tasks/{id}":                                       "detail",
	"POST /api/llm/v1/tasks":                                           "list",
	"POST /api/llm/v1/tasks/{id}/cancel":                               "cancel",
	"GET /sim/results/{id}/{file}":                                     "download",
	"POST /ac/openapi/v2/tokens":                                       "login",
	"POST /api/user/v3/tokens":                                         "login",
	"GET /ac/openapi/v2/center":                                        "center",
	"POST /efile/openapi/v2/file/upload":                               "upload",
	"POST /efile/openapi/v2/file/burst":                                "upload",
	"POST /efile/openapi/v2/file/merge":                                "upload",
	"GET /efile/openapi/v2/file/download":                              "download",
	"GET /hpc/openapi/v2/cluster":                                      "cluster",
	"GET /hpc/openapi/v2/queuenames/users/{user}":                      "queues",
	"GET /hpc/openapi/v2/userquotas/queues":                            "queues",
	"POST /hpc/openapi/v2/apptemplates/{type}/{name}/job":              "submit",
	"GET /hpc/openapi/v2/jobs/{id}":                                    "detail",
	"GET /hpc/openapi/v2/jobs":                                         "list",
	"DELETE /hpc/openapi/v2/jobs":                                      "cancel",
	"GET /hpc/openapi/v2/historyjobs":                                  "history",
	"GET /hpc/openapi/v2/historyjobs/{manager}/{id}":                   "history",
	"POST /ai/openapi/v2/instance-service/task":                        "create",
	"GET /ai/openapi/v2/instance-service/task/list":                    "list",
	"GET /ai/openapi/v2/instance-service/{id}/detail":                  "detail",
	"DELETE /ai/openapi/v2/instance-service/task":                      "delete",
	"POST /ai/openapi/v2/instance-service/task/actions/execute-script": "execute",
}

// envelopes are the platform's error answers (HTTP 200, a code other
// than "0"; platform-evidence.md's codes).
var envelopes = map[Choice]string{
	Busy:       `{"code":"10001","msg":"系统繁忙，请稍后再试","data":null}`,
	Internal:   `{"code":"10001","msg":"internal error","data":null}`,
	Permission: `{"code":"10008","msg":"permission denied","data":null}`,
}

// classifier finds a request's route class.
var classifier = func() *http.ServeMux {
	mux := http.NewServeMux()
	for pattern := range routes {
		mux.Handle(pattern, http.NotFoundHandler())
	}
	return mux
}()

// classOf is the route class of r ("other" for a route not listed).
func classOf(r *http.Request) string {
	_, pattern := classifier.Handler(r)
	if c, ok := routes[pattern]; ok {
		return c
	}
	return "other"
}

// gate stands in front of the simulators and the NATS server for one
// worker: every upstream call and every write of a job's state or spec
// passes it, and the schedule decides there what happens.
type gate struct {
	run  *run
	w    *workerRun
	sim  http.Handler
	drop *testenv.ReplyDropper
}

// ServeHTTP meets an upstream call's decision point.
func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.w.isDead() {
		hangUp(w)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	class := classOf(r)
	job := g.run.roleIn(r.URL.String() + " " + string(body))
	switch c := g.run.sched.decide(class, job, httpChoices); c {
	case Normal:
		g.sim.ServeHTTP(w, r)
	case Busy, Internal, Permission:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, envelopes[c])
	case NotFound:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"code":"404","msg":"not found","data":null}`)
	case LostAnswer:
		g.sim.ServeHTTP(httptest.NewRecorder(), r)
		hangUp(w)
	case Delay:
		select {
		case <-time.After(g.run.ackWait + g.run.ackWait/2):
			g.sim.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-g.run.done:
		}
	case CrashBefore, CrashAfter:
		if c == CrashAfter {
			g.sim.ServeHTTP(httptest.NewRecorder(), r)
		}
		g.run.crash(g.w)
		<-g.run.done // the worker's call never returns while the schedule runs
		hangUp(w)
	}
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// decideWrite meets a NATS publish's decision point: writes to the state
// and spec buckets are decided, every other publish passes.
func (g *gate) decideWrite(subject string) testenv.WriteFate {
	class := ""
	switch {
	case strings.HasPrefix(subject, "$KV."+contract.StateBucket+"."):
		class = "state-write"
	case strings.HasPrefix(subject, "$KV."+contract.SpecsBucket+"."):
		class = "spec-write"
	default:
		return testenv.WritePasses
	}
	if g.w.isDead() {
		return testenv.WriteLost
	}
	switch g.run.sched.decide(class, g.run.roleIn(subject), writeChoices) {
	case ReplyLost:
		return testenv.WriteReplyLost
	case WriteLost:
		return testenv.WriteLost
	case CrashBefore:
		g.run.crash(g.w)
		return testenv.WriteLost
	case CrashAfter:
		g.run.crashing(g.w)
		return testenv.WriteThenCut
	}
	return testenv.WritePasses
}
