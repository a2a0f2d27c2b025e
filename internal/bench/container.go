package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/state"
	sluiceworker "github.com/sluice-dev/sluice/internal/worker"
)

// The compute simulator's AK/SK login of the container figures.
const (
	containerUser      = "bench"
	containerAccessKey = "bench-access-key"
	containerSecretKey = "bench-secret-key"
)

// ContainerOptions configures the container figures.
type ContainerOptions struct {
	// Dir holds the run's files. Required.
	Dir string
	// Jobs is how many container jobs run, one after the other. Defaults
	// to 10.
	Jobs int
	// QueuedFor is how long an instance waits and deploys before its
	// script starts, RunFor how long the script runs. Default to 1s and 2s.
	QueuedFor, RunFor time.Duration
	// ComputePoll is the worker's SLUICE_COMPUTE_POLL_INTERVAL. Defaults to
	// 500ms, the embedded default's.
	ComputePoll time.Duration
}

// ContainerFigures are what the container jobs cost and how long the
// worker's own steps took around the platform's.
type ContainerFigures struct {
	Jobs int
	// Calls are the upstream requests per job, by simulator endpoint.
	Calls map[string]float64
	// ToCreate is, per job, the time from the publish to the instance's
	// create; ToSubmitted to the "submitted" event (the id recorded);
	// AfterScript from the script's end to the terminal event.
	ToCreate, ToSubmitted, AfterScript []time.Duration
}

// Container runs o.Jobs container jobs, one at a time, through a worker in
// this process against the compute simulator, and measures them.
func Container(ctx context.Context, o ContainerOptions) (*ContainerFigures, error) {
	o.Jobs = max(o.Jobs, 0)
	if o.Jobs == 0 {
		o.Jobs = 10
	}
	if o.QueuedFor == 0 {
		o.QueuedFor = time.Second
	}
	if o.RunFor == 0 {
		o.RunFor = 2 * time.Second
	}
	if o.ComputePoll == 0 {
		o.ComputePoll = 500 * time.Millisecond
	}
	st, err := newStack(ctx, o.Dir, stackOptions{})
	if err != nil {
		return nil, err
	}
	defer st.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	simURL := "http://" + ln.Addr().String()
	sim := apisim.NewCompute(apisim.ComputeConfig{
		User: containerUser, Password: "unused", OrgID: "unused", AccessKey: containerAccessKey, SecretKey: containerSecretKey,
		BaseURL: simURL, Root: filepath.Join(o.Dir, "compute"), QueuedFor: o.QueuedFor, RunFor: o.RunFor,
	})
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer stopSimulator(srv)

	cfg, err := config.Parse()
	if err != nil {
		return nil, err
	}
	cfg.DataDir, cfg.NATSURL, cfg.Kinds, cfg.HTTPAddr, cfg.Console = filepath.Join(o.Dir, "worker"), st.natsURL, []string{"container"}, "127.0.0.1:0", false
	cfg.S3Endpoint, cfg.S3Bucket, cfg.S3PathStyle, cfg.S3Region = st.s3Endpoint, bucket, true, s3dev.Region
	cfg.S3AccessKeyID, cfg.S3SecretAccessKey = s3dev.AccessKeyID, s3dev.SecretAccessKey
	cfg.ComputeBaseURL, cfg.ComputeUser, cfg.ComputeAccessKey, cfg.ComputeSecretKey = simURL, containerUser, containerAccessKey, containerSecretKey
	cfg.ComputePassword, cfg.ComputeOrgID = "", ""
	cfg.ComputePoll, cfg.AllowPrivateURLs = o.ComputePoll, true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stopWorker, err := startWorker(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stopWorker()

	evs, err := st.js.OrderedConsumer(ctx, contract.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contract.EventsSubjectPrefix + "container.>"},
	})
	if err != nil {
		return nil, err
	}
	before := sim.Counters().Snapshot()
	f := &ContainerFigures{Jobs: o.Jobs}
	for i := range o.Jobs {
		id := fmt.Sprintf("bench-container-%03d", i)
		published := time.Now()
		if err := publishContainer(ctx, st.js, id); err != nil {
			return nil, err
		}
		submitted, ended, err := awaitContainer(ctx, evs, id)
		if err != nil {
			return nil, err
		}
		times, ok := sim.ContainerTimesOf(runner.InstanceName(id))
		if !ok || times.ScriptEnded.IsZero() {
			return nil, fmt.Errorf("%s: the simulator has no instance whose script ended", id)
		}
		f.ToCreate = append(f.ToCreate, times.Created.Sub(published))
		f.ToSubmitted = append(f.ToSubmitted, submitted.Sub(published))
		f.AfterScript = append(f.AfterScript, ended.Sub(times.ScriptEnded))
	}
	if created, deleted, alive := sim.ContainerCounts(); created != int64(o.Jobs) || deleted != created || alive != 0 {
		return nil, fmt.Errorf("instances created %d, deleted %d, alive %d; want %d, %d, 0", created, deleted, alive, o.Jobs, o.Jobs)
	}
	f.Calls = map[string]float64{}
	for k, n := range sim.Counters().Snapshot() {
		rest, ok := strings.CutPrefix(k, "requests:")
		if !ok {
			continue
		}
		endpoint := rest[:strings.LastIndex(rest, ":")]
		f.Calls[endpoint] += float64(n-before[k]) / float64(o.Jobs)
	}
	return f, nil
}

// startWorker runs a worker of cfg in this process until the returned
// stop is called.
func startWorker(ctx context.Context, cfg *config.Config) (stop func(), err error) {
	wctx, cancel := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- sluiceworker.Run(wctx, *cfg, zerolog.Nop(), func(sluiceworker.Endpoints) { close(ready) })
	}()
	select {
	case <-ready:
		return func() { cancel(); <-done }, nil
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("worker did not start: %w", err)
	case <-ctx.Done():
		cancel()
		<-done
		return nil, ctx.Err()
	}
}

// publishContainer publishes container job id: no inputs, one output.
func publishContainer(ctx context.Context, js jetstream.JetStream, id string) error {
	dir := "/public/home/" + containerUser + "/" + id
	spec, err := json.Marshal(map[string]any{
		"id": id, "kind": "container",
		"container": map[string]any{
			"instance": map[string]any{
				"image": "registry:5000/gpu/admin/base/torch:2.1", "version": "torch:2.1", "accelerator": "gpu",
				"resource_group": "TeslaM40", "cpus": 4, "gpus": 1, "ram_mb": 8192, "timeout": "00:10:00",
			},
			"script":   "echo bench\n#SIM output result.dat 64K\n",
			"work_dir": dir,
			"outputs":  []string{dir + "/result.dat"},
		},
	})
	if err != nil {
		return err
	}
	return publishSpec(ctx, js, "container", id, spec)
}

// publishSpec publishes job id's spec on kind's subject, deduplicated by
// its id.
func publishSpec(ctx context.Context, js jetstream.JetStream, kind, id string, spec []byte) error {
	m := nats.NewMsg(contract.JobSubject(kind))
	m.Data = spec
	m.Header.Set(contract.HeaderMsgID, id)
	_, err := js.PublishMsg(ctx, m)
	return err
}

// awaitContainer returns the times of job id's "submitted" and terminal
// events (stamped by the worker, to the millisecond); a job that did not
// succeed is an error.
func awaitContainer(ctx context.Context, evs jetstream.Consumer, id string) (submitted, ended time.Time, err error) {
	for {
		msg, err := evs.Next(jetstream.FetchMaxWait(time.Minute))
		if err != nil {
			return submitted, ended, fmt.Errorf("%s: waiting for its events: %w", id, errors.Join(err, ctx.Err()))
		}
		var ev events.Event
		if json.Unmarshal(msg.Data(), &ev) != nil || ev.Subject != id {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ev.Time)
		if err != nil {
			return submitted, ended, fmt.Errorf("%s: event time %q: %w", id, ev.Time, err)
		}
		switch status := state.Status(ev.Data.Status); {
		case status == state.StatusSubmitted:
			submitted = at
		case status == state.StatusSucceeded:
			return submitted, at, nil
		case status.Terminal():
			return submitted, at, fmt.Errorf("%s ended %s: %+v", id, status, ev.Data.Error)
		}
	}
}

// WriteContainer writes f as Markdown.
func WriteContainer(w io.Writer, f *ContainerFigures) {
	fmt.Fprintf(w, "| | median | min | max |\n|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"publish → instance created", f.ToCreate},
		{"publish → `submitted` event (id recorded)", f.ToSubmitted},
		{"script ended → terminal event", f.AfterScript},
	} {
		s := slices.Clone(r.d)
		slices.Sort(s)
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.name, s[len(s)/2].Round(time.Millisecond), s[0].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
	}
	total := 0.0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f.Calls)) {
		total += f.Calls[k]
		parts = append(parts, fmt.Sprintf("%s %.1f", k, f.Calls[k]))
	}
	fmt.Fprintf(w, "\nUpstream calls per job (%d jobs): %.1f — %s\n", f.Jobs, total, strings.Join(parts, ", "))
}
