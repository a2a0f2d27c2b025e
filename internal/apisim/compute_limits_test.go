package apisim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// The platform answers each queue's limits at userquotas/queues
// (platform-evidence.md section 7); compute-api.md's letter has no such
// route.
func TestComputeSimQueueLimits(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	ta, _ := b.tokens(t)
	a := b.get(t, "/hpc/openapi/v2/userquotas/queues?strJobManagerID=2001", ta)
	var queues []map[string]string
	if err := json.Unmarshal(a.Data, &queues); err != nil || a.Code != "0" {
		t.Fatalf("limits: %d %s", a.status, a.raw)
	}
	byName := map[string]map[string]string{}
	for _, q := range queues {
		byName[q["queueName"]] = q
	}
	normal, dcu := byName["normal"], byName["dcu"]
	if normal["queMaxPPN"] != "64" || normal["queMaxNodect"] != "16" || normal["queMinNodect"] != "1" ||
		normal["queMaxGpuPN"] != "4" || normal["queMaxWalltime"] != "72:00:00" {
		t.Errorf("queue normal = %v", normal)
	}
	if dcu["queMaxDcuPN"] != "4" || dcu["queMaxWalltime"] != "24:00:00" {
		t.Errorf("queue dcu = %v", dcu)
	}
	if a := b.get(t, "/hpc/openapi/v2/userquotas/queues?strJobManagerID=2002", ta); a.status != http.StatusOK || a.Code != apisim.ComputeCodeInvalid {
		t.Errorf("other scheduler: %d %s", a.status, a.raw)
	}

	letter := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.Letter = true })
	lt, _ := letter.tokens(t)
	if a := letter.get(t, "/hpc/openapi/v2/userquotas/queues?strJobManagerID=2001", lt); a.status != http.StatusNotFound {
		t.Errorf("Letter mode answers queue limits: %d %s", a.status, a.raw)
	}
}

// A submit over its queue's limits, or to the DCU queue without a DCU, is
// refused as the scheduler refuses it: HTTP 200 with an error envelope,
// and no job.
func TestComputeSimSubmitOverQueueLimits(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	ta, _ := b.tokens(t)
	if a := b.upload(t, ta, "/work/shape", "job.sh", "cover", "#!/bin/sh\n"); a.Code != "0" {
		t.Fatalf("upload script: %s", a.raw)
	}
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string // in msg; "" accepted
	}{
		{"gpus over the queue's per node", func(m map[string]any) { m["GAP_QUEUE"], m["GAP_NGPU"] = "normal", "8" }, "GAP_NGPU"},
		{"gpus within", func(m map[string]any) { m["GAP_QUEUE"], m["GAP_NGPU"] = "normal", "4" }, ""},
		{"dcu queue without a DCU", func(m map[string]any) { m["GAP_QUEUE"] = "dcu" }, "QOSMinGRES"},
		{"dcu queue with GAP_NDCU 0", func(m map[string]any) { m["GAP_QUEUE"], m["GAP_NDCU"] = "dcu", "0" }, "QOSMinGRES"},
		{"dcus over the queue's per node", func(m map[string]any) { m["GAP_QUEUE"], m["GAP_NDCU"] = "dcu", "5" }, "GAP_NDCU"},
		{"dcu queue with a DCU", func(m map[string]any) { m["GAP_QUEUE"], m["GAP_NDCU"] = "dcu", "1" }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "shape-" + strings.ReplaceAll(tc.name, " ", "-")
			a := b.postJSON(t, csSubmitPath, ta, csJob(name, "/work/shape/job.sh", tc.edit))
			if tc.want == "" {
				if a.Code != "0" {
					t.Fatalf("refused: %s", a.raw)
				}
				return
			}
			if a.status != http.StatusOK || a.Code != apisim.ComputeCodeInvalid || !strings.Contains(a.Msg, tc.want) {
				t.Fatalf("answer %d %s, want HTTP 200, code %s and %q in msg", a.status, a.raw, apisim.ComputeCodeInvalid, tc.want)
			}
			if n := b.sim.SubmitCount(name); n != 0 {
				t.Fatalf("%d jobs accepted, want none", n)
			}
		})
	}
}
