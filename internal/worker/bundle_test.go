package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/devstack"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/worker"
)

// Known secret values: no log line, event, dead letter or error may carry
// any of them.
const (
	secretMediaKey    = "sk-media-SECRET-7f3a9"
	secretComputePass = "pw-compute-SECRET-91b2"
	secretComputeSK   = "sk-compute-SECRET-4d8e"
	computeAccessKey  = "ak-alice-0c1d"
	secretS3Key       = "s3-secret-SECRET-c0d4"
	secretConsole     = "console-token-SECRET-5e6f"
)

// bundle is one test's sluice: embedded NATS, the S3 store, both
// simulators over HTTP and the worker configuration pointing at them.
type bundle struct {
	nats    *testenv.NATS
	s3      *testenv.S3Env
	media   *apisim.Media
	compute *apisim.Compute
	simURL  string
	cfg     config.Config
	logs    *testenv.SyncBuffer
	// ep is where the last worker started listens.
	ep      worker.Endpoints
	checker *testenv.EventChecker

	// checkedMu guards checked: the stream sequences of the events checked
	// with the CloudEvents SDK and the schemas.
	checkedMu sync.Mutex
	checked   map[uint64]bool

	// enqueueEnv is added to the environment of the enqueue runs, and
	// enqueueURL, when set, replaces the NATS URL they are given.
	enqueueEnv []string
	enqueueURL string
	// spawnEnv is added to the environment of the workers spawned as
	// processes.
	spawnEnv []string
	// mediaAhead is how far the media simulator's clock runs ahead of
	// the wall clock (advanceMedia): a test ends tasks when it chooses.
	mediaAhead atomic.Int64
}

// advanceMedia moves the media simulator's clock on by d: tasks whose
// duration has passed on it end at their next query.
func (b *bundle) advanceMedia(d time.Duration) { b.mediaAhead.Add(int64(d)) }

type setupOpts struct {
	taskTime    time.Duration
	computeTime time.Duration
	// cluster, when set, is the NATS the bundle uses (its client reaches
	// the nodes clientNodes, every node when empty) instead of a server of
	// its own; the worker gets NATS_REPLICAS=3.
	cluster     *testenv.Cluster
	clientNodes []int
	// simSkipInputs makes the media simulator accept media inputs without
	// fetching them.
	simSkipInputs bool
	// mediaConcurrency is the media simulator's ConcurrencyLimit: the
	// account's tasks at once, past which a submit is answered 433/10007.
	mediaConcurrency int
	// computeLetter runs the compute simulator in Letter mode
	// (compute-api.md's letter); historyDelay is its HistoryDelay.
	computeLetter bool
	historyDelay  time.Duration
	// nats secures the NATS server. With TLS, the worker's configuration
	// and enqueue's environment get the CA and the client certificate.
	nats testenv.NATSOptions
}

func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	if o.taskTime == 0 {
		o.taskTime = 300 * time.Millisecond
	}
	if o.computeTime == 0 {
		o.computeTime = 500 * time.Millisecond
	}
	b := &bundle{s3: testenv.StartS3(t), logs: &testenv.SyncBuffer{}, checker: testenv.NewEventChecker(t)}
	if o.cluster != nil {
		b.nats = o.cluster.Client(t, o.clientNodes...)
	} else {
		b.nats = testenv.StartNATSWith(t, o.nats)
	}
	b.media = apisim.NewMedia(apisim.MediaConfig{APIKey: secretMediaKey, TaskDuration: o.taskTime, PendingFor: o.taskTime / 3, ResultSize: 96 << 10, SkipInputChecks: o.simSkipInputs,
		ConcurrencyLimit: o.mediaConcurrency, Now: func() time.Time { return time.Now().Add(time.Duration(b.mediaAhead.Load())) }})
	b.compute = apisim.NewCompute(apisim.ComputeConfig{
		User: "alice", Password: secretComputePass, OrgID: "org-1",
		AccessKey: computeAccessKey, SecretKey: secretComputeSK,
		QueuedFor: o.computeTime / 3, RunFor: o.computeTime, Root: t.TempDir(),
		Letter: o.computeLetter, HistoryDelay: o.historyDelay,
	})
	srv := httptest.NewServer(devstack.Handler(b.media, b.compute))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = b.compute.Close() })
	b.simURL = srv.URL
	b.cfg = config.Config{
		DataDir: t.TempDir(), NATSURL: b.nats.URL, Kinds: []string{"video", "speech", "compute"},
		S3Endpoint: b.s3.Endpoint, S3Region: "us-east-1", S3Bucket: b.s3.Bucket, S3Prefix: "sluice", S3PathStyle: true,
		S3AccessKeyID: "sluice", S3SecretAccessKey: secretS3Key,
		MediaBaseURL: srv.URL, MediaAPIKey: secretMediaKey,
		ComputeBaseURL: srv.URL, ComputeUser: "alice", ComputePassword: secretComputePass, ComputeOrgID: "org-1",
		MaxInflight: 64, PollInterval: 200 * time.Millisecond, PollFirst: 50 * time.Millisecond,
		ComputePoll: 100 * time.Millisecond, AllowPrivateURLs: true, MaxArtifactBytes: 64 << 20,
		HTTPAddr: "127.0.0.1:0", LogLevel: "debug", LogFormat: "json", ShutdownTimeout: 10 * time.Second,
		Console: true, ConsoleToken: secretConsole, WorkerName: "test-worker", AckWait: 5 * time.Second, MaxDeliver: 10, TaskTimeout: time.Minute,
		ComputeTimeout: time.Minute, MediaConcurrency: 8, MediaRate: 500, ComputeConc: 8, ComputeRate: 500,
		CopyConcurrency: 4, PartSize: 5 << 20, NATSReplicas: 1, EventsMaxAge: time.Hour, StateTTL: time.Hour,
		PresignTTL: time.Hour, S3CreateBucket: true, DevSimTaskTime: time.Second, DevSimComputeTime: time.Second,
		NATSMoveAfter: 10 * time.Second, SweepInterval: 200 * time.Millisecond,
	}
	if o.cluster != nil {
		b.cfg.NATSReplicas = 3
	}
	if f := o.nats.TLS; f != nil {
		b.cfg.NATSTLSCA, b.cfg.NATSTLSCert, b.cfg.NATSTLSKey = f.CA, f.ClientCert, f.ClientKey
		b.enqueueEnv = []string{"SLUICE_NATS_TLS_CA=" + f.CA, "SLUICE_NATS_TLS_CERT=" + f.ClientCert, "SLUICE_NATS_TLS_KEY=" + f.ClientKey}
	}
	t.Cleanup(func() {
		b.assertNoSecrets(t)
		if t.Failed() {
			logs := b.logs.String()
			t.Logf("worker logs (last 20 KiB):\n%s", logs[max(0, len(logs)-20<<10):])
		}
	})
	return b
}

// start runs a worker until the returned stop is called (or the test
// ends) and waits until it consumes.
func (b *bundle) start(t *testing.T, mutate ...func(*config.Config)) (stop func()) {
	t.Helper()
	cfg := b.cfg
	for _, m := range mutate {
		m(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	ready, done, stop := b.launch(t, cfg)
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not start in 20s")
	}
	return stop
}

// launch runs a worker with cfg until stop is called (or the test ends):
// ready is closed once it consumes, and done receives what Run returned
// (a receiver that does not stop the test puts it back for stop).
func (b *bundle) launch(t *testing.T, cfg config.Config) (ready <-chan struct{}, done chan error, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	consuming := make(chan struct{})
	done = make(chan error, 1)
	log := logging.New(b.logs, "json", "debug")
	go func() {
		done <- worker.Run(ctx, cfg, log, func(ep worker.Endpoints) { b.ep = ep; close(consuming) })
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("worker did not stop in 30s")
			}
		})
	}
	t.Cleanup(stop)
	return consuming, done, stop
}

// publish sends one spec (any JSON value or raw string) to kind's subject
// with Nats-Msg-Id = id when id is not empty, and returns its SLUICE_JOBS
// sequence.
func (b *bundle) publish(t *testing.T, kind, id string, spec any) uint64 {
	t.Helper()
	return b.publishOn(t, contract.JobSubject(kind), id, spec, nil)
}

// publishOn publishes spec on subject with the headers h besides
// Nats-Msg-Id.
func (b *bundle) publishOn(t *testing.T, subject, id string, spec any, h nats.Header) uint64 {
	t.Helper()
	var data []byte
	switch s := spec.(type) {
	case string:
		data = []byte(s)
	case []byte:
		data = s
	default:
		var err error
		if data, err = json.Marshal(spec); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.EnsureJobsStream(ctx, b.nats.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range h {
		m.Header[k] = v
	}
	if id != "" {
		m.Header.Set(contract.HeaderMsgID, id)
	}
	ack, err := b.nats.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ack.Sequence
}

// events returns every event published so far, in order.
func (b *bundle) events(t *testing.T) []events.Event {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := b.nats.JS.Stream(ctx, contract.EventsStream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Event
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("event %d is not JSON: %v", seq, err)
		}
		b.checkOnce(t, m)
		out = append(out, ev)
	}
	return out
}

// checkOnce checks an event message of SLUICE_EVENTS as a subscriber would
// (testenv.EventChecker), once per stream sequence.
func (b *bundle) checkOnce(t *testing.T, m *jetstream.RawStreamMsg) {
	t.Helper()
	b.checkedMu.Lock()
	defer b.checkedMu.Unlock()
	if b.checked == nil {
		b.checked = map[uint64]bool{}
	}
	if !b.checked[m.Sequence] {
		b.checked[m.Sequence] = true
		b.checker.Check(t, m.Subject, m.Header, m.Data)
	}
}

// await waits for id's terminal event and checks that it is the only one.
func (b *bundle) await(t *testing.T, id string, within time.Duration) events.Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var terminal []events.Event
		for _, ev := range b.events(t) {
			if ev.Subject == id && state.Status(ev.Data.Status).Terminal() {
				terminal = append(terminal, ev)
			}
		}
		if len(terminal) > 1 {
			t.Fatalf("job %s has %d terminal events", id, len(terminal))
		}
		if len(terminal) == 1 {
			return terminal[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec, _, _ := state.NewStore(b.kv(t), "", nil).Get(context.Background(), id)
	t.Fatalf("job %s: no terminal event within %s (state %+v)", id, within, rec)
	return events.Event{}
}

// awaitStatus waits until id has published an event with status.
func (b *bundle) awaitStatus(t *testing.T, id string, status state.Status, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, ev := range b.events(t) {
			if ev.Subject == id && ev.Data.Status == string(status) {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("job %s: no %s event within %s", id, status, within)
}

func (b *bundle) kv(t *testing.T) jetstream.KeyValue {
	t.Helper()
	kv, err := b.nats.JS.KeyValue(context.Background(), contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// record returns id's state record.
func (b *bundle) record(t *testing.T, id string) *state.Record {
	t.Helper()
	rec, _, err := state.NewStore(b.kv(t), "", nil).Get(context.Background(), id)
	if err != nil {
		t.Fatalf("state of %s: %v", id, err)
	}
	return rec
}

// deadLetters returns the messages in SLUICE_DLQ.
func (b *bundle) deadLetters(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := b.nats.JS.Stream(ctx, contract.DLQStream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		if m, err := s.GetMsg(ctx, seq); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// assertNoSecrets scans logs, events, dead letters and state records for
// the credentials, the compute tokens and presigned URL signatures.
func (b *bundle) assertNoSecrets(t *testing.T) {
	// A cluster still electing after a partition healed answers nothing
	// for a moment; the scan must read everything, not skip what it could
	// not read.
	ctx := testenv.Context(t, 30*time.Second)
	for {
		_, err := b.nats.JS.AccountInfo(ctx)
		if _, unreachable := reach.Reason(err); err == nil || !unreachable || backoff.Sleep(ctx, 500*time.Millisecond) != nil {
			break
		}
	}
	var hay strings.Builder
	hay.WriteString(b.logs.String())
	for _, ev := range b.events(t) {
		j, _ := json.Marshal(ev)
		hay.Write(j)
	}
	for _, m := range b.deadLetters(t) {
		fmt.Fprintf(&hay, "%v", m.Header)
	}
	hay.WriteString(b.stateDump(t))
	for _, l := range leaks(hay.String(), append(knownSecrets, b.compute.Tokens()...)) {
		t.Errorf("secret leaked: %s", l)
	}
}

// useNATS points the bundle's helpers at the NATS server on url (a dev
// worker's embedded one).
func (b *bundle) useNATS(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	b.nats = &testenv.NATS{URL: url, Conn: nc, JS: js}
}
