package apisim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// historyRecord is the part of a history record the tests read.
type historyRecord struct {
	JobID          string `json:"jobId"`
	JobState       string `json:"jobState"`
	JobExitStatus  int    `json:"jobExitStatus"`
	JobEndTime     string `json:"jobEndTime"`
	AcctTime       string `json:"acctTime"`
	CPUNuclearHour string `json:"cpuNuclearHour"`
	GPUCardHour    string `json:"gpuCardHour"`
	WalltimeUsed   int64  `json:"jobWalltimeUsed"`
	CPUTime        int64  `json:"jobCpuTime"`
	Stdout         string `json:"stdout"`
}

func (b *csBundle) history(t *testing.T, token, id string) (historyRecord, csAnswer) {
	t.Helper()
	a := b.get(t, "/hpc/openapi/v2/historyjobs/2001/"+id, token)
	var h historyRecord
	if a.Code == "0" {
		if err := json.Unmarshal(a.Data, &h); err != nil {
			t.Fatalf("history record: %s", a.Data)
		}
	}
	return h, a
}

func (b *csBundle) list(t *testing.T, token, path string) (int, []json.RawMessage) {
	t.Helper()
	a := b.get(t, path, token)
	var page struct {
		Total int               `json:"total"`
		List  []json.RawMessage `json:"list"`
	}
	if a.Code != "0" || json.Unmarshal(a.Data, &page) != nil {
		t.Fatalf("%s: %s", path, a.raw)
	}
	return page.Total, page.List
}

// An ended job stays in the realtime detail for HistoryDelay, then answers
// a success without a record, and is in both history calls with its
// accounting.
func TestComputeSimHistory(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.HistoryDelay = 30 * time.Second })
	tok, _ := b.tokens(t)
	id := b.submit(t, tok, "acct", "echo hi\n", func(m map[string]any) { m["GAP_NGPU"] = "2" })
	b.clock.Advance(10*time.Second + time.Minute) // queued 10 s, ran 1 min on 1 node x 2: ended now
	if d, _ := b.job(t, tok, id); d.JobStatus != "statC" {
		t.Fatalf("within HistoryDelay: %+v", d)
	}
	if _, a := b.history(t, tok, "4999"); a.Code != apisim.ComputeCodeNotFound || !strings.Contains(a.Msg, "不存在") {
		t.Errorf("unknown job's history: %s", a.raw)
	}
	b.clock.Advance(31 * time.Second)
	if _, a := b.job(t, tok, id); a.Code != "0" || string(a.Data) != "null" {
		t.Errorf("after HistoryDelay the detail answers %s", a.raw)
	}
	h, a := b.history(t, tok, id)
	if a.Code != "0" || h.JobState != "statC" || h.JobExitStatus != 0 || h.JobEndTime == "" || h.AcctTime == "" ||
		h.CPUNuclearHour != "0.0333" || h.GPUCardHour != "0.0333" || h.WalltimeUsed != 60 || h.CPUTime != 120 || !strings.HasSuffix(h.Stdout, "acct.o"+id) {
		t.Errorf("history record %+v (%s)", h, a.raw)
	}
	q := url.Values{"strClusterNameList": {"2001"}, "startTime": {"2000-01-01 00:00:00"}, "endTime": {"2100-01-01 00:00:00"}, "jobId": {id}}
	if n, items := b.list(t, tok, "/hpc/openapi/v2/historyjobs?"+q.Encode()); n != 1 || len(items) != 1 {
		t.Errorf("history list: %d %s", n, items)
	}
	q.Set("endTime", "2001-01-01 00:00:00")
	if n, _ := b.list(t, tok, "/hpc/openapi/v2/historyjobs?"+q.Encode()); n != 0 {
		t.Errorf("history list outside the range: %d", n)
	}
	if a := b.get(t, "/hpc/openapi/v2/historyjobs?startTime=x", tok); a.Code != apisim.ComputeCodeInvalid {
		t.Errorf("history list without a scheduler: %s", a.raw)
	}
	if n, _ := b.list(t, tok, "/hpc/openapi/v2/jobs?strClusterIDList=2001"); n != 1 {
		t.Errorf("realtime list holds %d jobs, want the ended job for ListKeeps (5 minutes)", n)
	}
	b.clock.Advance(5 * time.Minute)
	if n, _ := b.list(t, tok, "/hpc/openapi/v2/jobs?strClusterIDList=2001"); n != 0 {
		t.Errorf("realtime list holds an ended job after ListKeeps: %d", n)
	}
}

// The status set: a run past GAP_WALL_TIME ends statT, "#SIM nodefail"
// statN, "#SIM lagfail" a statC whose JobState is FAILED, and
// "#SIM detailerror" makes the detail answer 10001 after the end.
func TestComputeSimStatuses(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, _ := b.tokens(t)
	timeout := b.submit(t, tok, "slow", "#SIM runfor 20m\n", nil) // GAP_WALL_TIME 00:10:00
	node := b.submit(t, tok, "node", "#SIM nodefail\n", nil)
	lag := b.submit(t, tok, "lag", "#SIM lagfail\n", nil)
	flaky := b.submit(t, tok, "flaky", "#SIM detailerror 2\n", nil)
	b.clock.Advance(time.Hour)
	for _, c := range []struct{ id, status, state, exit, history string }{
		{timeout, "statT", "TIMEOUT", "10006", "TIMEOUT"},
		{node, "statN", "NODE_FAIL", "1", "statN"},
		{lag, "statC", "FAILED", "0", "FAILED"},
	} {
		d, a := b.job(t, tok, c.id)
		if d.JobStatus != c.status || d.JobInitAttr["JobState"] != c.state || d.ExitCode == nil || *d.ExitCode != c.exit {
			t.Errorf("job %s: %s", c.id, a.raw)
		}
		if h, a := b.history(t, tok, c.id); h.JobState != c.history {
			t.Errorf("history %s: %s", c.id, a.raw)
		}
	}
	for i := range 3 {
		_, a := b.job(t, tok, flaky)
		if want := i < 2; (a.Code == apisim.ComputeCodePlatformInternal) != want {
			t.Errorf("detail query %d of the flaky job: %s", i, a.raw)
		}
	}
}

// Cancel deletes a queued or running job (statDE); an ended, unknown or
// malformed one is refused. The realtime list shows current jobs.
func TestComputeSimCancelAndList(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, _ := b.tokens(t)
	running := b.submit(t, tok, "run", "#SIM runfor 5m\n", nil)
	done := b.submit(t, tok, "done", "#SIM runfor 1s\n", nil)
	b.clock.Advance(20 * time.Second)
	if n, items := b.list(t, tok, "/hpc/openapi/v2/jobs?strClusterIDList=2001&start=0&limit=10"); n != 2 || len(items) != 2 {
		t.Errorf("job list: %d %s", n, items)
	}
	del := func(form url.Values) csAnswer {
		return b.do(t, http.MethodDelete, "/hpc/openapi/v2/jobs", map[string]string{"token": tok}, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded")
	}
	entry := func(id string) url.Values {
		return url.Values{"jobMethod": {"5"}, "strJobInfoMap": {"2001," + csUser + ":" + id + ":"}}
	}
	for name, form := range map[string]url.Values{
		"ended job":      entry(done),
		"unknown job":    entry("4999"),
		"wrong method":   {"jobMethod": {"1"}, "strJobInfoMap": {"2001," + csUser + ":" + running + ":"}},
		"bad entry":      {"jobMethod": {"5"}, "strJobInfoMap": {running}},
		"wrong user":     {"jobMethod": {"5"}, "strJobInfoMap": {"2001,eve:" + running + ":"}},
		"wrong schedule": {"jobMethod": {"5"}, "strJobInfoMap": {"2002," + csUser + ":" + running + ":"}},
	} {
		if a := del(form); a.Code == "0" {
			t.Errorf("%s accepted: %s", name, a.raw)
		}
	}
	if a := del(entry(running)); a.Code != "0" {
		t.Fatalf("cancel: %s", a.raw)
	}
	if d, a := b.job(t, tok, running); d.JobStatus != "statDE" || d.JobInitAttr["JobState"] != "CANCELLED" {
		t.Errorf("cancelled job: %s", a.raw)
	}
	if h, a := b.history(t, tok, running); h.JobState != "statDE" {
		t.Errorf("cancelled job's history: %s", a.raw)
	}
	if n := b.sim.Counters().Get("jobs:cancelled"); n != 1 {
		t.Errorf("jobs:cancelled = %d", n)
	}
}

// Letter mode keeps ended jobs in the detail and has no history, list or
// cancel.
func TestComputeSimLetter(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.Letter, c.HistoryDelay = true, time.Second })
	tok, _ := b.tokens(t)
	id := b.submit(t, tok, "kept", "echo hi\n", nil)
	b.clock.Advance(48 * time.Hour)
	if d, a := b.job(t, tok, id); d.JobStatus != "statC" {
		t.Errorf("letter detail: %s", a.raw)
	}
	for _, p := range []string{"/hpc/openapi/v2/historyjobs/2001/" + id, "/hpc/openapi/v2/historyjobs?strClusterNameList=2001", "/hpc/openapi/v2/jobs?strClusterIDList=2001"} {
		if a := b.get(t, p, tok); a.status != http.StatusNotFound {
			t.Errorf("%s: %d %s", p, a.status, a.raw)
		}
	}
}

// A restarted simulator keeps an ended job's end, cause and history.
func TestComputeSimHistorySurvivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "compute.json")
	root := t.TempDir()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.StateFile, c.Root = file, root })
	tok, _ := b.tokens(t)
	id := b.submit(t, tok, "saved", "#SIM runfor 20m\n", nil)
	b.clock.Advance(time.Hour)
	b.job(t, tok, id) // settles the job: it timed out
	sim := apisim.NewCompute(apisim.ComputeConfig{
		User: csUser, Password: csPass, OrgID: csOrg, Now: b.clock.Now, Root: root, StateFile: file,
	})
	if err := sim.StateErr(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	b2 := &csBundle{sim: sim, srv: srv, clock: b.clock}
	tok2, _ := b2.tokens(t)
	if h, a := b2.history(t, tok2, id); h.JobState != "TIMEOUT" || h.JobExitStatus != 10006 {
		t.Errorf("history after the restart: %s", a.raw)
	}
}
