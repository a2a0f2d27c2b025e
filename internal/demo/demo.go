// Package demo runs sluice's main job end to end on the embedded default:
// it starts a SLUICE_DEV worker, enqueues one job of every scenario (plus
// an invalid spec and a job cancelled while it runs), shows their events as
// they arrive, and checks every outcome and every artifact's bytes.
package demo

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/devstack"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/mediasample"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/worker"
)

// Options tunes a demo run.
type Options struct {
	// DataDir holds the embedded default's files and the worker's log,
	// and is kept. Defaults to a new temporary directory, removed when
	// Run returns.
	DataDir string
	// TaskTime is how long a simulated media task takes. Defaults to 2s.
	TaskTime time.Duration
	// Timeout bounds the whole run. Defaults to 3m.
	Timeout time.Duration
	// Keep leaves the embedded default running after the jobs, with its
	// web console browsable, until ctx ends (Ctrl-C).
	Keep bool
	// HTTPAddr is where the worker serves /metrics and the web console.
	// Defaults to a free port on 127.0.0.1.
	HTTPAddr string
	// External, when its NATSURL is set, runs the demo against a sluice
	// that is already running (e.g. the compose stack) instead of starting
	// the embedded default; DataDir and TaskTime are then unused.
	External External
}

// External is a running sluice: its workers must drive the simulators
// (the demo's prompts carry [sim:...] directives and its compute job runs
// a simulated script). The demo publishes and follows jobs on NATS, puts
// its input files into the bucket and reads every artifact back.
type External struct {
	NATSURL    string
	S3Endpoint string
	S3Bucket   string
	// S3Region defaults to us-east-1.
	S3Region          string
	S3AccessKeyID     string
	S3SecretAccessKey string
}

// job is one demo job and the outcome it must have.
type job struct {
	id, kind string
	spec     string
	want     state.Status
	wantCode string
	cancel   bool
}

// Run runs the demo, writing progress and the outcomes to w. It returns an
// error when any job's outcome or artifact is not the expected one.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.External.NATSURL != "" {
		ctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		x := o.External
		fmt.Fprintf(w, "sluice demo: against the running sluice at NATS %s, S3 %s (bucket %s)\n\n", x.NATSURL, x.S3Endpoint, x.S3Bucket)
		ep := worker.Endpoints{NATSURL: x.NATSURL, S3Endpoint: x.S3Endpoint, S3Bucket: x.S3Bucket}
		// A long-lived sluice remembers earlier runs' job ids for an hour
		// (the duplicate window): new ids make this run's jobs new jobs.
		return drive(ctx, w, ep, cmp.Or(x.S3Region, "us-east-1"), x.S3AccessKeyID, x.S3SecretAccessKey, time.Now().UTC().Format("-150405"))
	}
	tmp := o.DataDir == ""
	if tmp {
		// A directory of its own, removed at the end (after the worker
		// stopped: the deferred calls run in reverse). SLUICE_DEMO_DIR
		// (o.DataDir) keeps the files.
		dir, err := os.MkdirTemp("", "sluice-demo-")
		if err != nil {
			return err
		}
		defer func() {
			if rerr := os.RemoveAll(dir); rerr != nil {
				fmt.Fprintf(w, "sluice demo: cannot remove %s: %v\n", dir, rerr)
			}
		}()
		o.DataDir = dir
	}
	o.TaskTime = max(o.TaskTime, 0)
	if o.TaskTime == 0 {
		o.TaskTime = 2 * time.Second
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	cfg, err := config.Parse()
	if err != nil {
		return err
	}
	// The dev defaults first, then the demo's own choices: the dev default
	// 127.0.0.1:9090 is Prometheus's port, often taken, and the demo must
	// start beside a running dev worker or Prometheus.
	cfg.DevDefaults()
	cfg.Dev, cfg.DataDir, cfg.DevNATSPort, cfg.DevS3Addr, cfg.HTTPAddr = true, o.DataDir, -1, "127.0.0.1:0", httpAddr(o.HTTPAddr)
	cfg.DevSimTaskTime, cfg.DevSimComputeTime = o.TaskTime, o.TaskTime+time.Second
	if err := cfg.Validate(); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(o.DataDir, "worker.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()

	kept := "kept"
	if tmp {
		kept = "removed at the end; set SLUICE_DEMO_DIR to keep the files"
	}
	fmt.Fprintf(w, "sluice demo: starting the embedded default in %s (worker log: worker.log there; %s)\n", o.DataDir, kept)
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan worker.Endpoints, 1)
	// done is closed, not sent on, when the worker returns: both the wait
	// for its start and the deferred wait for its stop read it, and a
	// value taken by one would leave the other waiting for ever.
	done := make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		werr = worker.Run(wctx, *cfg, logging.New(logFile, "json", "debug"), func(ep worker.Endpoints) { ready <- ep })
	}()
	defer func() {
		stopWorker()
		<-done
	}()
	var ep worker.Endpoints
	select {
	case ep = <-ready:
	case <-done:
		return fmt.Errorf("sluice demo: the worker did not start: %w (its log: %s)", werr, logFile.Name())
	case <-ctx.Done():
		return interrupted(parent, ctx)
	}
	fmt.Fprintf(w, "  NATS %s, S3 %s (objects under %s), simulators %s\n", ep.NATSURL, ep.S3Endpoint, ep.S3Dir, ep.SimURL)
	console := "http://" + ep.HTTPAddr + "/console/"
	fmt.Fprintf(w, "  web console %s (read-only unless SLUICE_CONSOLE_TOKEN is set)\n\n", console)
	err = drive(ctx, w, ep, s3dev.Region, s3dev.AccessKeyID, s3dev.SecretAccessKey, "")
	if parent.Err() != nil {
		return interrupted(parent, ctx)
	}
	if o.Keep && parent.Err() == nil {
		fmt.Fprintf(w, "\nsluice keeps running: web console %s, NATS %s (enqueue --nats-url %s ...). Ctrl-C stops it.\n", console, ep.NATSURL, ep.NATSURL)
		<-parent.Done()
	}
	return err
}

// httpAddr is where the demo's worker serves its console: flag (the -http
// flag or DEMO_HTTP), else SLUICE_HTTP_ADDR when set, else a free port on
// loopback.
func httpAddr(flag string) string {
	env, _ := os.LookupEnv(config.Prefix + "_HTTP_ADDR")
	return cmp.Or(flag, env, "127.0.0.1:0")
}

// interrupted is the error of a run stopped before its end: by the caller
// (Ctrl-C, SIGTERM) or by the run's own timeout.
func interrupted(parent, ctx context.Context) error {
	if parent.Err() != nil {
		return errors.New("sluice demo: interrupted")
	}
	return fmt.Errorf("sluice demo: %w", ctx.Err())
}

// drive runs the demo's jobs on the sluice at ep, each id followed by
// idSuffix, and reports them.
func drive(ctx context.Context, w io.Writer, ep worker.Endpoints, region, keyID, secret, idSuffix string) error {
	nc, err := nats.Connect(ep.NATSURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	s3c := s3.New(s3.Options{
		Region: region, BaseEndpoint: aws.String(ep.S3Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(keyID, secret, ""),
		// The embedded store sends no checksums; say nothing about it.
		DisableLogOutputChecksumValidationSkipped: true,
	})
	jobs, err := prepare(ctx, s3c, ep.S3Bucket)
	if err != nil {
		return err
	}
	if idSuffix != "" {
		for i := range jobs {
			if jobs[i], err = jobs[i].renamed(jobs[i].id + idSuffix); err != nil {
				return err
			}
		}
	}
	results, err := runJobs(ctx, w, nc, js, jobs)
	if err != nil {
		return err
	}
	return errors.Join(report(ctx, w, s3c, jobs, results), checkInstances(ctx, w, ep.SimURL, jobs))
}

// checkInstances asks the simulated platform at simURL, as an operator
// would, for the instances of the container jobs: each must have been
// deleted (an instance is billed until it is). Without a simulator
// address (a sluice run elsewhere) there is nothing to ask.
func checkInstances(ctx context.Context, w io.Writer, simURL string, jobs []job) error {
	if simURL == "" {
		fmt.Fprintln(w, "container instances: not checked (the simulator of that sluice is not reachable from here)")
		return nil
	}
	client, err := apiclient.NewCompute(apiclient.ComputeConfig{
		BaseURL: simURL, User: devstack.ComputeUser, AccessKey: devstack.ComputeAccessKey, SecretKey: devstack.ComputeSecretKey,
	})
	if err != nil {
		return err
	}
	sess, err := client.Cluster(ctx, "")
	if err != nil {
		return fmt.Errorf("container instances: %w", err)
	}
	var alive []string
	checked := 0
	for _, j := range jobs {
		if j.kind != string(jobspec.KindContainer) {
			continue
		}
		checked++
		list, err := sess.FindInstances(ctx, runner.InstanceName(j.id))
		if err != nil {
			return fmt.Errorf("container instances of %s: %w", j.id, err)
		}
		for _, in := range list {
			alive = append(alive, j.id+": "+in.ID+" ("+in.Status+")")
		}
	}
	if len(alive) > 0 {
		return errors.New("demo failed: container instances left alive (still billed):\n  " + strings.Join(alive, "\n  "))
	}
	fmt.Fprintf(w, "container instances left alive: none (%d container job(s) checked in the simulator)\n", checked)
	return nil
}

// renamed returns j with the id id, in its spec too.
func (j job) renamed(id string) (job, error) {
	var spec map[string]any
	if err := json.Unmarshal([]byte(j.spec), &spec); err != nil {
		return j, fmt.Errorf("demo spec %s: %w", j.id, err)
	}
	spec["id"] = id
	b, err := json.Marshal(spec)
	if err != nil {
		return j, err
	}
	j.id, j.spec = id, string(b)
	return j, nil
}

// prepare uploads the demo's input files and returns the jobs.
func prepare(ctx context.Context, s3c *s3.Client, bucket string) ([]job, error) {
	inputs := map[string]string{
		// Real media: the worker probes every input before submitting.
		"demo/inputs/frame.png":   string(mediasample.PNG(384, 256)),
		"demo/inputs/boat.png":    string(mediasample.PNG(512, 288)),
		"demo/inputs/rain.wav":    string(mediasample.WAV(3 * time.Second)),
		"demo/compute/run.sh":     "#!/bin/sh\necho simulating the river basin\n#SIM output result.dat 256K\ncp params.nml params-used.nml\n",
		"demo/compute/params.nml": "&basin\n  cells = 4096\n/\n",
		"demo/pipeline/render.sh": "#!/bin/sh\necho rendering with the voice-over\ncp result-0.mp3 voice-used.mp3\n",
	}
	for key, body := range inputs {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			return nil, fmt.Errorf("upload demo input %s: %w", key, err)
		}
	}
	dir, ctrDir, plDir := "/public/home/dev/demo", "/public/home/dev/demo-container", "/public/home/dev/demo-pipeline"
	return []job{
		{id: "demo-text-to-video", kind: "video", want: state.StatusSucceeded, spec: `{"id":"demo-text-to-video","kind":"video","labels":{"demo":"yes"},"output":{"prefix":"demo"},
			"video":{"model":"video-model","input":{"prompt":"a paper boat drifting down a rain gutter"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`},
		{id: "demo-image-to-video", kind: "video", want: state.StatusSucceeded, spec: `{"id":"demo-image-to-video","kind":"video","output":{"prefix":"demo"},
			"video":{"model":"video-model","input":{"prompt":"the boat sails off","media":[{"type":"first_frame","url":"s3://` + bucket + `/demo/inputs/frame.png"}]},"parameters":{"resolution":"768P","duration":5}}}`},
		{id: "demo-reference-to-video", kind: "video", want: state.StatusSucceeded, spec: `{"id":"demo-reference-to-video","kind":"video","output":{"prefix":"demo"},
			"video":{"model":"video-model","input":{"prompt":"the same boat at night","media":[{"type":"reference_image","url":"s3://` + bucket + `/demo/inputs/boat.png"},{"type":"reference_audio","url":"s3://` + bucket + `/demo/inputs/rain.wav"}]},"parameters":{"resolution":"2K","duration":8}}}`},
		{id: "demo-speech-sync", kind: "speech", want: state.StatusSucceeded, spec: `{"id":"demo-speech-sync","kind":"speech","output":{"prefix":"demo"},"speech":{"model":"speech-model","mode":"sync","input":{"text":"Hello from sluice.","voice":"alloy"}}}`},
		{id: "demo-speech-async", kind: "speech", want: state.StatusSucceeded, spec: `{"id":"demo-speech-async","kind":"speech","output":{"prefix":"demo"},"speech":{"model":"speech-model","input":{"text":"A longer passage, read as a task.","voice":"alloy","language_type":"English"}}}`},
		{id: "demo-speech-stream", kind: "speech", want: state.StatusSucceeded, spec: `{"id":"demo-speech-stream","kind":"speech","output":{"prefix":"demo"},"speech":{"model":"speech-model","mode":"stream","input":{"text":"Streamed, frame by frame.","voice":"alloy"}}}`},
		{id: "demo-compute", kind: "compute", want: state.StatusSucceeded, spec: `{"id":"demo-compute","kind":"compute","output":{"prefix":"demo"},"compute":{
			"template":{"type":"BASIC","name":"BASE"},
			"job":{"name":"demo-compute","queue":"normal","nodes":1,"ppn":8,"wall_time":"00:30:00","work_dir":"` + dir + `","script":"` + dir + `/run.sh"},
			"inputs":[{"from":"s3://` + bucket + `/demo/compute/run.sh","to":"` + dir + `","cover":true},{"from":"s3://` + bucket + `/demo/compute/params.nml","to":"` + dir + `","cover":true}],
			"outputs":["` + dir + `/result.dat","` + dir + `/params-used.nml"]}}`},
		{id: "demo-container", kind: "container", want: state.StatusSucceeded, spec: `{"id":"demo-container","kind":"container","output":{"prefix":"demo"},"container":{
			"instance":{"image":"registry:5000/gpu/admin/base/torch:2.1","version":"torch:2.1","accelerator":"gpu","resource_group":"TeslaM40","cpus":4,"gpus":1,"ram_mb":16384,"timeout":"00:30:00"},
			"script":"echo training a small model on params.nml\n#SIM output model.bin 128K\nexit 0\n",
			"work_dir":"` + ctrDir + `",
			"inputs":[{"from":"s3://` + bucket + `/demo/compute/params.nml","to":"` + ctrDir + `","cover":true}],
			"outputs":["` + ctrDir + `/model.bin"]}}`},
		{id: "demo-pipeline", kind: "pipeline", want: state.StatusSucceeded, spec: `{"id":"demo-pipeline","kind":"pipeline","labels":{"demo":"yes"},"pipeline":{"steps":[
			{"name":"voice","spec":{"kind":"speech","output":{"prefix":"demo"},"speech":{"model":"speech-model","input":{"text":"A voice-over for the render.","voice":"alloy"}}}},
			{"name":"render","needs":["voice"],"spec":{"kind":"compute","output":{"prefix":"demo"},"compute":{
				"template":{"type":"BASIC","name":"BASE"},
				"job":{"queue":"normal","nodes":1,"ppn":1,"wall_time":"00:10:00","work_dir":"` + plDir + `","script":"` + plDir + `/render.sh"},
				"inputs":[{"from":"s3://` + bucket + `/demo/pipeline/render.sh","to":"` + plDir + `","cover":true},{"from":{"step":"voice","artifact":"result-0"},"to":"` + plDir + `","cover":true}],
				"outputs":["` + plDir + `/voice-used.mp3"]}}}]}}`},
		{id: "demo-invalid", kind: "video", want: state.StatusFailed, wantCode: "invalid_spec", spec: `{"id":"demo-invalid","kind":"video","video":{"model":"video-model","input":{"prompt":""},"parameters":{"resolution":"4K","duration":30}}}`},
		{id: "demo-cancelled", kind: "video", want: state.StatusCancelled, cancel: true, spec: `{"id":"demo-cancelled","kind":"video","video":{"model":"video-model","input":{"prompt":"a very long take [sim:duration=10m]"},"parameters":{"resolution":"768P","duration":15,"ratio":"21:9"}}}`},
	}, nil
}

// runJobs publishes the jobs, prints their events as they arrive, cancels
// the job meant to be cancelled once it runs, and returns each job's
// terminal event.
func runJobs(ctx context.Context, w io.Writer, nc *nats.Conn, js jetstream.JetStream, jobs []job) (map[string]events.Event, error) {
	cons, err := js.OrderedConsumer(ctx, contract.EventsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{contract.EventsSubjectPrefix + ">"}})
	if err != nil {
		return nil, err
	}
	byID := map[string]job{}
	for _, j := range jobs {
		byID[j.id] = j
		m := nats.NewMsg(contract.JobSubject(j.kind))
		m.Data = []byte(j.spec)
		m.Header.Set(contract.HeaderMsgID, j.id)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return nil, fmt.Errorf("publish %s: %w", j.id, err)
		}
	}
	fmt.Fprintf(w, "enqueued %d jobs; events as they arrive:\n", len(jobs))
	start := time.Now()
	results := map[string]events.Event{}
	for len(results) < len(jobs) {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if ctx.Err() != nil {
			return results, fmt.Errorf("timed out with %d of %d jobs finished", len(results), len(jobs))
		}
		if err != nil {
			continue
		}
		var ev events.Event
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			continue
		}
		j, ok := byID[ev.Subject]
		if !ok {
			continue
		}
		line := fmt.Sprintf("  %6.1fs  %-24s %-8s %s", time.Since(start).Seconds(), ev.Subject, ev.Data.Kind, ev.Data.Status)
		if ev.Data.Error != nil {
			line += "  (" + ev.Data.Error.Code + ")"
		}
		fmt.Fprintln(w, line)
		if j.cancel && ev.Data.Status == string(state.StatusRunning) {
			body, _ := json.Marshal(contract.CancelRequest{JobID: j.id})
			if _, err := nc.Request(contract.CancelSubject, body, 5*time.Second); err != nil {
				return results, fmt.Errorf("cancel %s: %w", j.id, err)
			}
			fmt.Fprintf(w, "  %6.1fs  %-24s          cancel requested\n", time.Since(start).Seconds(), j.id)
		}
		if state.Status(ev.Data.Status).Terminal() {
			results[ev.Subject] = ev
		}
	}
	return results, nil
}

// report prints each job's outcome and artifacts, reading every artifact
// back to check its sha256, and returns an error naming every surprise.
func report(ctx context.Context, w io.Writer, s3c *s3.Client, jobs []job, results map[string]events.Event) error {
	var problems []string
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "JOB\tKIND\tOUTCOME\tEXPECTED\tDETAIL")
	for _, j := range jobs {
		ev := results[j.id]
		got := ev.Data.Status
		detail := ""
		if ev.Data.Error != nil {
			detail = ev.Data.Error.Code + ": " + ev.Data.Error.Message
			if len(detail) > 90 {
				detail = detail[:87] + "..."
			}
		}
		mark := "ok"
		if got != string(j.want) || (j.wantCode != "" && (ev.Data.Error == nil || ev.Data.Error.Code != j.wantCode)) {
			mark = "UNEXPECTED"
			problems = append(problems, fmt.Sprintf("%s ended %s, want %s %s", j.id, got, j.want, j.wantCode))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\n", j.id, j.kind, got, j.want, mark, detail)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nARTIFACTS")
	tw = tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSIZE\tSHA256\tCHECK")
	for _, j := range jobs {
		for _, a := range artifactsOf(results[j.id]) {
			check := "ok"
			if sum, err := objectSHA(ctx, s3c, a.Bucket, a.Key); err != nil || sum != a.SHA256 {
				check = "MISMATCH"
				problems = append(problems, fmt.Sprintf("%s: stored object does not match its event (%v)", a.Key, err))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", a.Key, a.Size, a.SHA256, check)
		}
		if j.want == state.StatusSucceeded && len(artifactsOf(results[j.id])) == 0 {
			problems = append(problems, j.id+" succeeded without artifacts")
		}
	}
	tw.Flush()
	if len(problems) > 0 {
		return errors.New("demo failed:\n  " + strings.Join(problems, "\n  "))
	}
	fmt.Fprintf(w, "\nall %d jobs ended as expected\n", len(jobs))
	return nil
}

// artifactsOf is a job's artifacts: a pipeline's are its steps'.
func artifactsOf(ev events.Event) []state.Artifact {
	arts := ev.Data.Artifacts
	for _, s := range ev.Data.Steps {
		arts = append(arts, s.Artifacts...)
	}
	return arts
}

func objectSHA(ctx context.Context, s3c *s3.Client, bucket, key string) (string, error) {
	out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
