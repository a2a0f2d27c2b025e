package apisim_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/testenv"
)

const (
	csUser = "carol"
	csPass = "sim-pass-Secret"
	csOrg  = "org-1"
)

type csBundle struct {
	sim   *apisim.Compute
	srv   *httptest.Server
	clock *testenv.Clock
}

func setupComputeSim(t *testing.T, edit func(*apisim.ComputeConfig)) *csBundle {
	t.Helper()
	clock := testenv.NewClock()
	cfg := apisim.ComputeConfig{
		User: csUser, Password: csPass, OrgID: csOrg,
		QueuedFor: 10 * time.Second, RunFor: time.Minute,
		Now: clock.Now, Root: t.TempDir(),
		// Ended jobs stay in the realtime detail for a day unless a test
		// shortens it: the tests that read a finished job there jump the
		// clock by hours.
		HistoryDelay: 24 * time.Hour,
	}
	if edit != nil {
		edit(&cfg)
	}
	sim := apisim.NewCompute(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &csBundle{sim: sim, srv: srv, clock: clock}
}

// csAnswer is a decoded simulator answer.
type csAnswer struct {
	status int
	header http.Header
	raw    []byte
	Code   string          `json:"code"`
	Msg    string          `json:"msg"`
	Data   json.RawMessage `json:"data"`
}

// do sends one request; body may be a string (sent as JSON) or an
// io.Reader with contentType.
func (b *csBundle) do(t *testing.T, method, path string, hdr map[string]string, body io.Reader, contentType string) csAnswer {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := csAnswer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("%s %s: answer is not an envelope: %s", method, path, raw)
		}
	}
	return a
}

func (b *csBundle) get(t *testing.T, path, token string) csAnswer {
	t.Helper()
	return b.do(t, http.MethodGet, path, map[string]string{"token": token}, nil, "application/json")
}

func (b *csBundle) postJSON(t *testing.T, path, token, body string) csAnswer {
	t.Helper()
	return b.do(t, http.MethodPost, path, map[string]string{"token": token}, strings.NewReader(body), "application/json")
}

// tokens returns the token of cluster-a and cluster-b.
func (b *csBundle) tokens(t *testing.T) (string, string) {
	t.Helper()
	a := b.do(t, http.MethodPost, "/ac/openapi/v2/tokens", map[string]string{"user": csUser, "password": csPass, "orgid": csOrg}, nil, "application/json")
	if a.status != http.StatusOK || a.Code != "0" {
		t.Fatalf("tokens: %d %s", a.status, a.raw)
	}
	var list []struct{ ClusterID, Token *string }
	if err := json.Unmarshal(a.Data, &list); err != nil || len(list) < 2 || list[0].Token == nil || list[1].Token == nil {
		t.Fatalf("tokens data: %s", a.Data)
	}
	return *list[0].Token, *list[1].Token
}

// upload sends a multipart upload.
func (b *csBundle) upload(t *testing.T, token, dir, name, cover, content string) csAnswer {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if dir != "" {
		_ = mw.WriteField("path", dir)
	}
	if cover != "" {
		_ = mw.WriteField("cover", cover)
	}
	if name != "" {
		fw, _ := mw.CreateFormFile("file", name)
		_, _ = io.WriteString(fw, content)
	}
	_ = mw.Close()
	return b.do(t, http.MethodPost, "/efile/openapi/v2/file/upload", map[string]string{"token": token}, &buf, mw.FormDataContentType())
}

func (b *csBundle) download(t *testing.T, token, path string) csAnswer {
	t.Helper()
	return b.get(t, "/efile/openapi/v2/file/download?path="+url.QueryEscape(path), token)
}

// csJob is a valid debug-queue job body for scheduler 2001.
func csJob(name, script string, edit func(m map[string]any)) string {
	m := map[string]any{
		"GAP_SUBMIT_TYPE": "cmd", "GAP_JOB_NAME": name, "GAP_QUEUE": "debug",
		"GAP_NNODE": "1", "GAP_PPN": "2", "GAP_WALL_TIME": "00:05:00",
		"GAP_SCHED_FILE": script, "GAP_GUI": 0, "advance": false,
	}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(map[string]any{"strJobManagerID": "2001", "mapAppJobInfo": m})
	return string(b)
}

const csSubmitPath = "/hpc/openapi/v2/apptemplates/BASIC/BASE/job"

// submit uploads script to /work/<name>/job.sh and submits it.
func (b *csBundle) submit(t *testing.T, token, name, script string, edit func(m map[string]any)) string {
	t.Helper()
	if a := b.upload(t, token, "/work/"+name, "job.sh", "cover", script); a.Code != "0" {
		t.Fatalf("upload script: %s", a.raw)
	}
	a := b.postJSON(t, csSubmitPath, token, csJob(name, "/work/"+name+"/job.sh", edit))
	var id string
	if a.Code != "0" || json.Unmarshal(a.Data, &id) != nil || id == "" {
		t.Fatalf("submit: %d %s", a.status, a.raw)
	}
	return id
}

// jobDetail is the part of a job detail the tests read.
type jobDetail struct {
	JobID       string            `json:"jobId"`
	JobStatus   string            `json:"jobStatus"`
	JobEndTime  *string           `json:"jobEndTime"`
	ExitCode    *string           `json:"exitCode"`
	OutputPath  string            `json:"outputPath"`
	ErrorPath   string            `json:"errorPath"`
	WorkDir     string            `json:"workDir"`
	JobInitAttr map[string]string `json:"jobInitAttr"`
	ProcNumUsed int               `json:"procNumUsed"`
}

func (b *csBundle) job(t *testing.T, token, id string) (jobDetail, csAnswer) {
	t.Helper()
	a := b.get(t, "/hpc/openapi/v2/jobs/"+id, token)
	var d jobDetail
	if a.Code == "0" {
		if err := json.Unmarshal(a.Data, &d); err != nil {
			t.Fatalf("job detail: %s", a.Data)
		}
	}
	return d, a
}

func TestComputeSimTokens(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.TokenMaxUses = 2 })
	tests := []struct {
		name string
		hdr  map[string]string
	}{
		{"wrong password", map[string]string{"user": csUser, "password": "nope", "orgid": csOrg}},
		{"wrong user", map[string]string{"user": "eve", "password": csPass, "orgid": csOrg}},
		{"no org", map[string]string{"user": csUser, "password": csPass}},
	}
	for _, tt := range tests {
		a := b.do(t, http.MethodPost, "/ac/openapi/v2/tokens", tt.hdr, nil, "application/json")
		if a.status != http.StatusUnauthorized || a.Code != apisim.ComputeCodeBadCredentials {
			t.Errorf("%s: %d %s", tt.name, a.status, a.raw)
		}
		if strings.Contains(string(a.raw), csPass) {
			t.Errorf("%s: answer echoes the password", tt.name)
		}
	}

	ta, tb := b.tokens(t)
	if ta == "" || tb == "" || ta == tb {
		t.Fatalf("tokens %q %q", ta, tb)
	}
	if again, _ := b.tokens(t); again != ta {
		t.Error("a valid token was replaced")
	}
	if a := b.get(t, "/ac/openapi/v2/center", ""); a.status != http.StatusUnauthorized || a.Code != apisim.ComputeCodeBadToken {
		t.Errorf("no token: %d %s", a.status, a.raw)
	}
	for i := range 2 {
		if a := b.get(t, "/hpc/openapi/v2/cluster", ta); a.Code != "0" {
			t.Fatalf("use %d: %s", i+1, a.raw)
		}
	}
	if a := b.get(t, "/hpc/openapi/v2/cluster", ta); a.status != http.StatusUnauthorized || a.Code != apisim.ComputeCodeBadToken {
		t.Fatalf("third use of a 2-use token: %d %s", a.status, a.raw)
	}
	if a := b.get(t, "/hpc/openapi/v2/cluster", tb); a.Code != "0" {
		t.Errorf("cluster-b's token expired with cluster-a's: %s", a.raw)
	}
	fresh, _ := b.tokens(t)
	if fresh == ta {
		t.Fatal("a used-up token was handed out again")
	}
	if a := b.get(t, "/hpc/openapi/v2/cluster", fresh); a.Code != "0" {
		t.Errorf("fresh token: %s", a.raw)
	}
}

func TestComputeSimCenterAndLists(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.DeadURL = "http://127.0.0.1:9"; c.Letter = true })
	ta, tb := b.tokens(t)

	a := b.get(t, "/ac/openapi/v2/center", ta)
	var center struct {
		ClusterUserInfo struct{ UserName, HomePath string }
		EfileURLs       []map[string]string `json:"efileUrls"`
		HPCURLs         []map[string]string `json:"hpcUrls"`
	}
	if err := json.Unmarshal(a.Data, &center); err != nil {
		t.Fatal(err)
	}
	if center.ClusterUserInfo.UserName != csUser || center.ClusterUserInfo.HomePath != "/public/home/"+csUser {
		t.Errorf("user info %+v", center.ClusterUserInfo)
	}
	e := center.EfileURLs
	if len(e) != 3 || e[0]["url"] != "http://127.0.0.1:9" || e[0]["enable"] != "true" ||
		e[1]["enable"] != "false" || e[2]["enable"] != "true" || e[2]["url"] != b.srv.URL {
		t.Errorf("efileUrls = %v", e)
	}
	if h := center.HPCURLs; len(h) != 2 || h[0]["url"] != "http://127.0.0.1:9" || h[1]["url"] != b.srv.URL {
		t.Errorf("hpcUrls = %v", h)
	}

	for tok, want := range map[string]float64{ta: 2001, tb: 2002} {
		var list []map[string]any
		_ = json.Unmarshal(b.get(t, "/hpc/openapi/v2/cluster", tok).Data, &list)
		if len(list) != 1 || list[0]["id"] != want {
			t.Errorf("cluster list = %v, want id %v", list, want)
		}
	}

	var queues []map[string]string
	a = b.get(t, "/hpc/openapi/v2/queuenames/users/"+csUser+"?strJobManagerID=2001", ta)
	if err := json.Unmarshal(a.Data, &queues); err != nil || len(queues) != 3 || queues[0]["queueName"] != "debug" || queues[0]["queMaxWalltime"] != "00:30:00" {
		t.Errorf("queues = %s", a.raw)
	}
	if a := b.get(t, "/hpc/openapi/v2/queuenames/users/"+csUser+"?strJobManagerID=2002", ta); a.Code != apisim.ComputeCodeInvalid {
		t.Errorf("other scheduler: %s", a.raw)
	}
	if a := b.get(t, "/hpc/openapi/v2/queuenames/users/bob?strJobManagerID=2001", ta); a.Code != apisim.ComputeCodeInvalid {
		t.Errorf("other user: %s", a.raw)
	}
}

func TestComputeSimFiles(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.Letter = true })
	tok, _ := b.tokens(t)

	if a := b.upload(t, tok, "/data/in", "a.txt", "", "one"); a.Code != "0" {
		t.Fatalf("upload: %s", a.raw)
	}
	if a := b.upload(t, tok, "/data/in", "a.txt", "false", "two"); a.Code != apisim.ComputeCodeExists {
		t.Errorf("upload without cover over a file: %s", a.raw)
	}
	if a := b.upload(t, tok, "/data/in", "a.txt", "cover", "three"); a.Code != "0" {
		t.Errorf("upload with cover: %s", a.raw)
	}
	a := b.download(t, tok, "/data/in/a.txt")
	if a.status != http.StatusOK || string(a.raw) != "three" || a.header.Get("Content-Length") != "5" ||
		a.header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("download: %d %v %q", a.status, a.header, a.raw)
	}
	if n := b.sim.Counters().Get("bytes:" + apisim.EndpointComputeUpload); n != 3+3+5 {
		t.Errorf("upload bytes counted = %d", n)
	}

	// A path with characters that need encoding round-trips.
	if a := b.upload(t, tok, "/data/a b&c", "x?y.txt", "1", "odd"); a.Code != "0" {
		t.Fatalf("odd upload: %s", a.raw)
	}
	if got, ok := b.sim.File("/data/a b&c/x?y.txt"); !ok || string(got) != "odd" {
		t.Errorf("odd file = %q %v", got, ok)
	}
	if a := b.download(t, tok, "/data/a b&c/x?y.txt"); string(a.raw) != "odd" {
		t.Errorf("odd download = %q", a.raw)
	}

	// ".." cannot leave the root.
	if a := b.upload(t, tok, "/../../escape", "e.txt", "cover", "e"); a.Code != "0" {
		t.Fatalf("dotdot upload: %s", a.raw)
	}
	if _, err := os.Stat(filepath.Join(b.sim.Root(), "escape", "e.txt")); err != nil {
		t.Errorf("dotdot upload landed outside the root: %v", err)
	}

	tests := []struct {
		name                      string
		dir, file, cover, content string
		code                      string
	}{
		{"no file", "/d", "", "cover", "", apisim.ComputeCodeInvalid},
		{"no path", "", "f", "cover", "x", apisim.ComputeCodeInvalid},
		{"relative path", "d/e", "f", "cover", "x", apisim.ComputeCodeInvalid},
	}
	for _, tt := range tests {
		if a := b.upload(t, tok, tt.dir, tt.file, tt.cover, tt.content); a.Code != tt.code {
			t.Errorf("%s: %s", tt.name, a.raw)
		}
	}
	if a := b.do(t, http.MethodPost, "/efile/openapi/v2/file/upload", map[string]string{"token": tok}, strings.NewReader("{}"), "application/json"); a.Code != apisim.ComputeCodeInvalid {
		t.Errorf("non-multipart upload: %s", a.raw)
	}

	a = b.download(t, tok, "/data/missing.txt")
	if a.status != http.StatusOK || a.Code != apisim.ComputeCodeNotFound || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Errorf("missing download: %d %v %s", a.status, a.header, a.raw)
	}
	if a := b.download(t, tok, "/data/in"); a.Code != apisim.ComputeCodeNotFound {
		t.Errorf("directory download: %s", a.raw)
	}
}

func TestComputeSimSubmitValidation(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, tokB := b.tokens(t)
	if a := b.upload(t, tok, "/work/v", "job.sh", "cover", "echo hi\n"); a.Code != "0" {
		t.Fatal(string(a.raw))
	}
	script := "/work/v/job.sh"
	tests := []struct {
		name, path, token, body, mention string
	}{
		{"unknown template", "/hpc/openapi/v2/apptemplates/BASIC/OTHER/job", tok, csJob("v", script, nil), "template"},
		{"not JSON", csSubmitPath, tok, "{", "JSON"},
		{"wrong scheduler", csSubmitPath, tokB, csJob("v", script, nil), "strJobManagerID"},
		{"missing queue", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { delete(m, "GAP_QUEUE") }), "GAP_QUEUE"},
		{"unknown queue", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_QUEUE"] = "gold" }), "GAP_QUEUE"},
		{"missing name", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { delete(m, "GAP_JOB_NAME") }), "GAP_JOB_NAME"},
		{"nodes not a number", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_NNODE"] = "two" }), "GAP_NNODE"},
		{"nodes a JSON number", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_NNODE"] = 1 }), "GAP_NNODE"},
		{"ppn over the queue", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_PPN"] = "33" }), "GAP_PPN"},
		{"wall time shape", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_WALL_TIME"] = "5:00" }), "GAP_WALL_TIME"},
		{"wall time zero", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_WALL_TIME"] = "00:00:00" }), "GAP_WALL_TIME"},
		{"script missing", csSubmitPath, tok, csJob("v", "/work/v/none.sh", nil), "GAP_SCHED_FILE"},
		{"script relative", csSubmitPath, tok, csJob("v", "job.sh", nil), "GAP_SCHED_FILE"},
		{"gui not a number", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_GUI"] = "0" }), "GAP_GUI"},
		{"advance not a boolean", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["advance"] = "no" }), "advance"},
		{"other cluster id", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_CLUSTER_ID"] = "1002" }), "GAP_CLUSTER_ID"},
		{"relative work dir", csSubmitPath, tok, csJob("v", script, func(m map[string]any) { m["GAP_WORK_DIR"] = "w" }), "GAP_WORK_DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := b.postJSON(t, tt.path, tt.token, tt.body)
			if a.status != http.StatusOK || a.Code != apisim.ComputeCodeInvalid || !strings.Contains(a.Msg, tt.mention) {
				t.Errorf("%d %s, want code %s mentioning %s", a.status, a.raw, apisim.ComputeCodeInvalid, tt.mention)
			}
		})
	}
	if n := b.sim.SubmitCount("v"); n != 0 {
		t.Errorf("SubmitCount = %d after refusals", n)
	}
	if a := b.postJSON(t, csSubmitPath, "bad-token", csJob("v", script, nil)); a.status != http.StatusUnauthorized {
		t.Errorf("bad token: %d", a.status)
	}
}

func TestComputeSimJobLifecycle(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, tokB := b.tokens(t)
	if a := b.upload(t, tok, "/work/life", "input.dat", "cover", "INPUT"); a.Code != "0" {
		t.Fatal(string(a.raw))
	}
	if a := b.upload(t, tok, "/work/life/outdir", "keep", "cover", ""); a.Code != "0" {
		t.Fatal(string(a.raw))
	}
	script := strings.Join([]string{
		"#!/bin/bash",
		"#SIM queuedfor 30s",
		"#SIM runfor 2m",
		"echo step one",
		"cp input.dat outdir",
		"cp /work/life/input.dat copy2.dat",
		"#SIM output out/a.bin 2K",
		"#SIM output /abs/b.bin 10",
		"#SIM stderr careful",
	}, "\n")
	id := b.submit(t, tok, "life", script, func(m map[string]any) { m["GAP_STD_OUT_FILE"] = "logs/out.txt" })

	d, _ := b.job(t, tok, id)
	if d.JobStatus != "statQ" || d.JobInitAttr["JobState"] != "QUEUED" || d.JobEndTime != nil || d.ExitCode != nil {
		t.Errorf("at submit: %+v", d)
	}
	if _, a := b.job(t, tokB, id); a.Code != apisim.ComputeCodeNotFound {
		t.Errorf("job visible from the other cluster: %s", a.raw)
	}
	b.clock.Advance(31 * time.Second)
	d, _ = b.job(t, tok, id)
	if d.JobStatus != "statR" || d.JobInitAttr["JobState"] != "RUNNING" || d.ProcNumUsed != 2 || d.ExitCode != nil {
		t.Errorf("running: %+v", d)
	}
	if _, ok := b.sim.File("/work/life/out/a.bin"); ok {
		t.Error("outputs exist before the job ended")
	}
	b.clock.Advance(2 * time.Minute)
	d, _ = b.job(t, tok, id)
	if d.JobStatus != "statC" || d.JobInitAttr["JobState"] != "COMPLETED" || d.JobEndTime == nil || d.ExitCode == nil || *d.ExitCode != "0" {
		t.Fatalf("completed: %+v", d)
	}
	if d.OutputPath != "/work/life/logs/out.txt" || d.ErrorPath != "/work/life/life.e"+id || d.WorkDir != "/work/life" {
		t.Errorf("paths: %+v", d)
	}
	checks := map[string]string{
		"/work/life/outdir/input.dat": "INPUT",
		"/work/life/copy2.dat":        "INPUT",
		"/work/life/life.e" + id:      "careful\n",
	}
	for p, want := range checks {
		if got, ok := b.sim.File(p); !ok || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, ok, want)
		}
	}
	if out, _ := b.sim.File(d.OutputPath); !strings.HasSuffix(string(out), "step one\n") {
		t.Errorf("stdout = %q", out)
	}
	for p, size := range map[string]int{"/work/life/out/a.bin": 2048, "/abs/b.bin": 10} {
		got, _ := b.sim.File(p)
		want, _ := io.ReadAll(apisim.ComputeOutputBytes(p, int64(size)))
		if !bytes.Equal(got, want) || len(got) != size {
			t.Errorf("%s: %d bytes, content match %v", p, len(got), bytes.Equal(got, want))
		}
		if a := b.download(t, tok, p); !bytes.Equal(a.raw, want) {
			t.Errorf("download %s differs", p)
		}
	}
	for _, c := range []string{"queued", "running", "succeeded"} {
		if n := b.sim.Counters().Get("jobs:" + c); n != 1 {
			t.Errorf("jobs:%s = %d", c, n)
		}
	}
	if n := b.sim.Counters().Get("submits:life"); n != 1 || b.sim.SubmitCount("life") != 1 {
		t.Errorf("submits = %d / %d", n, b.sim.SubmitCount("life"))
	}
}

func TestComputeSimScriptOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script string
		failRate     float64
		wantExit     string
		wantStderr   string
	}{
		{"exit code", "echo a\nexit 3\necho b\n", 0, "3", ""},
		{"sim exit code", "#SIM exit 4\n", 0, "4", ""},
		{"bare exit", "exit\n", 0, "0", ""},
		{"cp of a missing file", "cp nothing.dat x\necho later\n", 0, "1", "cp: cannot stat"},
		{"failure rate", "echo a\n", 1, "1", "simulated failure"},
		{"explicit exit beats the failure rate", "exit 0\n", 1, "0", ""},
		{"bad output size", "#SIM output x 12Q\n", 0, "1", "bad size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.FailureRate = tt.failRate })
			tok, _ := b.tokens(t)
			id := b.submit(t, tok, "out", tt.script, nil)
			b.clock.Advance(time.Hour)
			d, _ := b.job(t, tok, id)
			if d.ExitCode == nil || *d.ExitCode != tt.wantExit {
				t.Fatalf("exit = %v, want %s", d.ExitCode, tt.wantExit)
			}
			stderr, _ := b.sim.File(d.ErrorPath)
			if !strings.Contains(string(stderr), tt.wantStderr) {
				t.Errorf("stderr = %q, want %q", stderr, tt.wantStderr)
			}
			phase := "succeeded"
			if tt.wantExit != "0" {
				phase = "failed"
			}
			if n := b.sim.Counters().Get("jobs:" + phase); n != 1 {
				t.Errorf("jobs:%s = %d", phase, n)
			}
			if out, _ := b.sim.File(d.OutputPath); strings.Contains(string(out), "later") || strings.Contains(string(out), "\nb\n") {
				t.Errorf("the script went on: %q", out)
			}
		})
	}

	t.Run("bad directive is refused at submit", func(t *testing.T) {
		t.Parallel()
		b := setupComputeSim(t, nil)
		tok, _ := b.tokens(t)
		_ = b.upload(t, tok, "/work/bad", "job.sh", "cover", "#SIM runfor soon\n")
		a := b.postJSON(t, csSubmitPath, tok, csJob("bad", "/work/bad/job.sh", nil))
		if a.Code != apisim.ComputeCodeInvalid || !strings.Contains(a.Msg, "runfor") {
			t.Errorf("%s", a.raw)
		}
	})

	t.Run("vanish", func(t *testing.T) {
		t.Parallel()
		b := setupComputeSim(t, nil)
		tok, _ := b.tokens(t)
		id := b.submit(t, tok, "gone", "#SIM runfor 20s\n#SIM vanish\necho never\n", nil)
		b.clock.Advance(15 * time.Second)
		if d, _ := b.job(t, tok, id); d.JobStatus != "statR" {
			t.Fatalf("not running: %+v", d)
		}
		b.clock.Advance(time.Minute)
		if _, a := b.job(t, tok, id); a.Code != apisim.ComputeCodeNotFound {
			t.Fatalf("vanished job: %s", a.raw)
		}
		if _, ok := b.sim.File("/work/gone/gone.o" + id); ok {
			t.Error("a vanished job wrote stdout")
		}
		if n := b.sim.Counters().Get("jobs:vanished"); n != 1 {
			t.Errorf("jobs:vanished = %d", n)
		}
	})
}

func TestComputeSimFaultsAndCounters(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, _ := b.tokens(t)
	_ = b.upload(t, tok, "/work/f", "job.sh", "cover", "echo\n")
	b.sim.Faults().Set(apisim.EndpointComputeSubmit, apisim.Fault{Error500AfterRate: 1})
	a := b.postJSON(t, csSubmitPath, tok, csJob("f", "/work/f/job.sh", nil))
	if a.status != http.StatusInternalServerError || a.Code != "500" {
		t.Errorf("injected 500: %d %s", a.status, a.raw)
	}
	if n := b.sim.SubmitCount("f"); n != 1 {
		t.Errorf("the job behind the 500 was not created: %d", n)
	}
	if n := b.sim.Counters().Get("requests:compute.submit:500"); n != 1 {
		t.Errorf("requests:compute.submit:500 = %d", n)
	}
	b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{Error429Rate: 1, RetryAfter: 3 * time.Second})
	a = b.get(t, "/hpc/openapi/v2/cluster", tok)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "3" || a.Code != "429" {
		t.Errorf("injected 429: %d %v %s", a.status, a.header, a.raw)
	}
	if n := b.sim.Counters().Get("requests:compute.tokens:200"); n != 1 {
		t.Errorf("requests:compute.tokens:200 = %d", n)
	}
}

func TestComputeSimTempRoot(t *testing.T) {
	t.Parallel()
	sim := apisim.NewCompute(apisim.ComputeConfig{})
	root := sim.Root()
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		t.Fatalf("temporary root: %v", err)
	}
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", root, err)
	}
}

func TestComputeSimLargeUploadStreams(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, _ := b.tokens(t)
	const size = 8 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("path", "/big")
		_ = mw.WriteField("cover", "cover")
		fw, _ := mw.CreateFormFile("file", "f.bin")
		_, _ = io.Copy(fw, apisim.ResultBytes("sim-big", 0, size))
		_ = pw.CloseWithError(mw.Close())
	}()
	a := b.do(t, http.MethodPost, "/efile/openapi/v2/file/upload", map[string]string{"token": tok}, pr, mw.FormDataContentType())
	if a.Code != "0" {
		t.Fatalf("upload: %s", a.raw)
	}
	a = b.download(t, tok, "/big/f.bin")
	want := sha256.New()
	_, _ = io.Copy(want, apisim.ResultBytes("sim-big", 0, size))
	got := sha256.Sum256(a.raw)
	if !bytes.Equal(got[:], want.Sum(nil)) {
		t.Error("large file differs after the round trip")
	}
}
