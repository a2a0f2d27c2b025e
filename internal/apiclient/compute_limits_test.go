package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// The platform answers each queue's limits (platform-evidence.md section
// 7); QueueLimits reads them as Limits.
func TestComputeQueueLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCompute(t, computeOpts{})
	s := b.session(t)
	queues, err := s.QueueLimits(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]apiclient.Limits{}
	for _, q := range queues {
		got[q.Name()] = q.Limits()
	}
	want := apiclient.Limits{MinNodes: 1, MaxNodes: 16, MaxPPN: 64, MaxCores: 1024, MaxGPUsPerNode: 4, MaxWallTime: 72 * time.Hour}
	if got["normal"] != want {
		t.Errorf("normal's limits = %+v, want %+v", got["normal"], want)
	}
	if l := got["dcu"]; l.MaxDCUsPerNode != 4 || l.MaxWallTime != 24*time.Hour {
		t.Errorf("dcu's limits = %+v", l)
	}
}

// The answer's shape is known from one page and one scheduler script
// only: a list or an object holding one, numbers or strings, "-1",
// "unlimit" or a value sluice cannot read are no limit, never a refusal.
func TestComputeQueueLimitsLenient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	body := `{"code":0,"msg":"success","data":{"total":2,"list":[
		{"queueName":"q1","queMaxPPN":32,"queMaxNodect":"8","queMinNodect":2,"queMaxWalltime":"2-00:00:00",
		 "queMaxGpuPN":"-1","queMaxDcuPN":null,"queMaxNcpus":"unlimit"},
		{"id":"q2","queNodes":"6","queMaxWalltime":"unlimit","queMaxPPN":"abc","queMaxDcuPN":"0"}]}}`
	b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/userquotas/queues") {
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		})
	}})
	queues, err := b.session(t).QueueLimits(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(queues) != 2 || queues[0].Name() != "q1" || queues[1].Name() != "q2" {
		t.Fatalf("queues = %+v", queues)
	}
	if got, want := queues[0].Limits(), (apiclient.Limits{MinNodes: 2, MaxNodes: 8, MaxPPN: 32, MaxWallTime: 48 * time.Hour}); got != want {
		t.Errorf("q1's limits = %+v, want %+v", got, want)
	}
	if got, want := queues[1].Limits(), (apiclient.Limits{MaxNodes: 6}); got != want {
		t.Errorf("q2's limits = %+v, want %+v (the queue's node count bounds a job)", got, want)
	}
}

// compute-api.md's letter has no queue limits: the call says so.
func TestComputeQueueLimitsNotOffered(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.Letter = true }})
	_, err := b.session(t).QueueLimits(context.Background(), "")
	if !errors.Is(err, apiclient.ErrNotSupported) {
		t.Fatalf("err = %v, want ErrNotSupported", err)
	}
}

func TestParseWallTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"24:00:00", 24 * time.Hour, true},
		{"168:30:00", 168*time.Hour + 30*time.Minute, true},
		{" 00:30:00 ", 30 * time.Minute, true},
		{"2-00:00:00", 48 * time.Hour, true},
		{"1-12:00", 36 * time.Hour, true},
		{"1:00:00:00", 24 * time.Hour, true},
		{"30:00", 30 * time.Minute, true},
		// A bare number's unit is not known (seconds in one scheduler
		// script, minutes in Slurm): no limit rather than a wrong one.
		{"86400", 0, false},
		{"unlimit", 0, false},
		{"UNLIMITED", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"00:00:00", 0, false},
		{"12:61:00", 0, false},
		{"ab:cd:ef", 0, false},
	}
	for _, tc := range tests {
		got, ok := apiclient.ParseWallTime(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseWallTime(%q) = %v, %v, want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// A DCU queue whose scheduler asks for at least one DCU refuses a job
// without one with QOSMinGRES in its message (platform-evidence.md
// section 7): a refusal of the job's shape, matched by ErrMinGRES, that
// asking again gets again.
func TestComputeSubmitQOSMinGRES(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCompute(t, computeOpts{})
	s := b.session(t)
	script := uploadScript(t, s, "/jobs/mingres", "#!/bin/sh\n")
	req := computeJobRequest("mingres", script)
	req.MapAppJobInfo["GAP_QUEUE"] = "dcu"
	_, err := s.SubmitJob(ctx, "BASIC", "BASE", req)
	if !errors.Is(err, apiclient.ErrMinGRES) || apiclient.Classify(err) != apiclient.ClassRefused {
		t.Fatalf("err = %v (class %v), want ErrMinGRES, refused", err, apiclient.Classify(err))
	}
	if n := b.sim.Counters().Requests(apisim.EndpointComputeSubmit); n != 1 {
		t.Errorf("submit requests = %d, want 1", n)
	}

	// Another refusal is not one of the shape's DCUs.
	req.MapAppJobInfo["GAP_QUEUE"] = "nosuchqueue"
	if _, err := s.SubmitJob(ctx, "BASIC", "BASE", req); err == nil || errors.Is(err, apiclient.ErrMinGRES) {
		t.Fatalf("err = %v, want a refusal that is not ErrMinGRES", err)
	}
}
