package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
)

// httpSubmit measures H1: the HTTP API's cost per job. One worker serves
// SLUICE_API_ADDR; the same one-at-a-time video jobs as P5 go through it
// published directly on NATS, then POSTed to /v1/jobs with a tenant's key,
// each timed from the submit to its terminal event; the worker's CPU time
// is read around each pass.
func (r *run) httpSubmit(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "H1", Title: "HTTP API: submit → terminal event, against publishing on NATS", Target: "added median ≤ 2 ms", Settings: throughputSettings}
	n := pick(r, 300, 40)
	st, err := newStack(ctx, r.scenarioDir("h1"), stackOptions{Media: apisim.MediaConfig{ResultSize: 64 << 10}})
	if err != nil {
		return fig, err
	}
	defer st.close()
	apiAddr, err := freeAddr()
	if err != nil {
		return fig, err
	}
	env := maps.Clone(throughputEnv)
	env["SLUICE_API_ADDR"] = apiAddr
	w, err := r.startWorker(ctx, st, "h1", env)
	if err != nil {
		return fig, err
	}
	defer w.stop(30 * time.Second)
	var answered []time.Duration
	post, err := st.httpSubmitter(ctx, "http://"+apiAddr+"/v1/jobs", &answered)
	if err != nil {
		return fig, err
	}
	cpu0, _ := statCPU(w.pid(), false)
	direct, err := st.oneByOneWith(ctx, "h1-nats", n, 5, st.tenantPublisher("bench"))
	if err != nil {
		return fig, err
	}
	cpu1, _ := statCPU(w.pid(), false)
	viaHTTP, err := st.oneByOneWith(ctx, "h1-http", n, 5, post)
	if err != nil {
		return fig, err
	}
	cpu2, _ := statCPU(w.pid(), false)
	added := quantile(viaHTTP, 0.5) - quantile(direct, 0.5)
	fig.Measured = fmt.Sprintf("added median %s", ms(added))
	fig.Met = added <= 2*time.Millisecond
	fig.row("NATS publish median / p99", "%s / %s", ms(quantile(direct, 0.5)), ms(quantile(direct, 0.99)))
	fig.row("HTTP POST median / p99", "%s / %s", ms(quantile(viaHTTP, 0.5)), ms(quantile(viaHTTP, 0.99)))
	fig.row("added by HTTP, median", "%s", ms(added))
	slices.Sort(answered)
	fig.row("POST answered (202) median / p99", "%s / %s", ms(quantile(answered, 0.5)), ms(quantile(answered, 0.99)))
	perJob := func(d time.Duration) string {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)/float64(n+5))
	}
	fig.row("worker CPU per job, NATS publish", "%s", perJob(cpu1-cpu0))
	fig.row("worker CPU per job, HTTP POST", "%s", perJob(cpu2-cpu1))
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"%d video jobs one after the other per pass (5 more warm up first), simulator task time 0 and a 64 KiB result, "+
			"on one worker serving SLUICE_API_ADDR: first published by the harness on tenant bench's subject sluice.jobs.video.t.bench, then POSTed to /v1/jobs "+
			"with a key of tenant bench (published by the API on sluice.jobs.video.t.bench). Each job is timed from the publish "+
			"or POST call to its terminal event's arrival at a subscriber in the harness. CPU is the worker process's utime + "+
			"stime over each pass, divided by its jobs (the API's HTTP handling, key check, claim and publish count in the "+
			"second; the harness's own HTTP client does not).", n))
	return fig, nil
}

// tenantPublisher returns a submit function that publishes a video spec
// on tenant's subject, as the API does, and waits for its acknowledgement.
func (s *stack) tenantPublisher(tenant string) func(context.Context, string) (time.Time, error) {
	return func(ctx context.Context, id string) (time.Time, error) {
		m := nats.NewMsg(contract.TenantSubject("video", tenant))
		m.Data = videoSpec(id, instant)
		m.Header.Set(contract.HeaderMsgID, id)
		at := time.Now()
		_, err := s.js.PublishMsg(ctx, m)
		return at, err
	}
}

// httpSubmitter creates an API key of tenant bench and returns a submit
// function that POSTs a video spec to url with it.
func (s *stack) httpSubmitter(ctx context.Context, url string, answered *[]time.Duration) (func(context.Context, string) (time.Time, error), error) {
	jc, err := jobclient.New(s.nc, nil) // shares s.nc, closed by the stack
	if err != nil {
		return nil, err
	}
	keys, err := jc.APIKeys(ctx, true)
	if err != nil {
		return nil, err
	}
	token, _, err := keys.Create(ctx, apikeys.Key{Tenant: "bench"})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	return func(ctx context.Context, id string) (time.Time, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(videoSpec(id, instant)))
		if err != nil {
			return time.Time{}, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		at := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return at, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		*answered = append(*answered, time.Since(at))
		if resp.StatusCode != http.StatusAccepted {
			return at, fmt.Errorf("POST %s: %d %s", id, resp.StatusCode, body)
		}
		return at, nil
	}, nil
}
