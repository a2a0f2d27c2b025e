package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// bundle is one runner test's sluice without the worker: embedded NATS
// with the contract's streams and buckets, the S3 dev store, the media
// and compute simulators over HTTP, and a Runner wired to them. Tests hand it
// deliveries of real SLUICE_JOBS messages (deliver) and read the job's
// record.
type bundle struct {
	nats    *testenv.NATS
	media   *apisim.Media
	client  *apiclient.Media
	compute *apisim.Compute
	s3      *testenv.S3Env
	store   *state.Store
	cancels *Cancels
	r       *Runner
	// wrap, when set before startCompute, stands between the compute
	// client and the simulator.
	wrap func(http.Handler) http.Handler
	// deliverMu keeps one delivery's publish and fetch together: every
	// message of a kind comes through its one consumer.
	deliverMu sync.Mutex
}

// setup builds a bundle; opts tune the compute simulator's config.
func setup(t *testing.T, opts ...func(*apisim.ComputeConfig)) *bundle {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	b := &bundle{nats: testenv.StartNATS(t), cancels: NewCancels()}
	s3env := testenv.StartS3(t)
	b.s3 = s3env
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{Replicas: 1, AckWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	kv, err := b.nats.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	b.store = state.NewStore(kv, "runner-test", nil)

	b.media = apisim.NewMedia(apisim.MediaConfig{APIKey: "test-key", TaskDuration: 300 * time.Millisecond, ResultSize: 16 << 10})
	srv := httptest.NewServer(b.media)
	t.Cleanup(srv.Close)
	if b.client, err = apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL, APIKey: "test-key"}); err != nil {
		t.Fatal(err)
	}
	poller := NewPoller(PollerConfig{Client: b.client, MaxInterval: 100 * time.Millisecond, FirstDelay: 20 * time.Millisecond})
	bg, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go poller.Run(bg)

	compute := b.startCompute(t, opts...)

	store, err := artifacts.NewStore(artifacts.StoreConfig{Client: s3env.Client, Bucket: s3env.Bucket, Prefix: "sluice"})
	if err != nil {
		t.Fatal(err)
	}
	b.r, err = New(Config{
		State: b.store, Events: events.NewPublisher(b.nats.JS), Store: store, Cancels: b.cancels,
		Fetcher: artifacts.NewFetcher(artifacts.FetcherConfig{AllowPrivate: true, MaxBytes: 64 << 20}),
		Media:   b.client, Poller: poller, TaskTimeout: time.Minute,
		Compute: compute, ComputePoll: 100 * time.Millisecond, ComputeTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// videoSpec is a video job's spec; prompt carries the simulator's
// directives ([sim:duration=...]).
func videoSpec(id, prompt string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": id, "kind": "video",
		"video": map[string]any{
			"model": "video-model", "input": map[string]any{"prompt": prompt},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	})
	return b
}

// startCompute starts the compute simulator, whose jobs queue for a
// second and run for computeRun, and returns a client of it; opts tune
// the simulator's config.
func (b *bundle) startCompute(t *testing.T, opts ...func(*apisim.ComputeConfig)) *apiclient.Compute {
	t.Helper()
	cfg := apisim.ComputeConfig{
		User: "alice", Password: "pw-compute", OrgID: "org-1",
		QueuedFor: time.Second, RunFor: computeRun, Root: t.TempDir(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	b.compute = apisim.NewCompute(cfg)
	t.Cleanup(func() { _ = b.compute.Close() })
	var h http.Handler = b.compute
	if b.wrap != nil {
		h = b.wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := apiclient.NewCompute(apiclient.ComputeConfig{BaseURL: srv.URL, User: "alice", Password: "pw-compute", OrgID: "org-1"})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// computeRun is how long a compute job runs on the simulator: long
// enough for a test to see it running, whatever the machine's load.
const computeRun = 5 * time.Second

// deliver publishes spec as a video job and returns a delivery of it, as
// the consumer would hand it over at its delivered-th delivery.
func (b *bundle) deliver(t *testing.T, spec []byte, delivered uint64) *consumer.Delivery {
	t.Helper()
	return b.deliverKind(t, "video", spec, delivered)
}

// deliverKind is deliver for a job of kind.
func (b *bundle) deliverKind(t *testing.T, kind string, spec []byte, delivered uint64) *consumer.Delivery {
	t.Helper()
	b.deliverMu.Lock()
	defer b.deliverMu.Unlock()
	ctx := testenv.Context(t, 10*time.Second)
	m := nats.NewMsg(contract.JobSubject(kind))
	m.Data = spec
	if _, err := b.nats.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	c, err := b.nats.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName(kind))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := <-batch.Messages()
	if !ok {
		t.Fatalf("no message fetched: %v", batch.Error())
	}
	meta, err := msg.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	// The message stays unacknowledged: the runner is driven without its
	// consumer, and the test ends before the message is delivered again.
	meta.NumDelivered = delivered
	return &consumer.Delivery{Kind: kind, Msg: msg, Meta: meta}
}

// write sets the record of id as a delivery that stopped would have left
// it.
func (b *bundle) write(t *testing.T, id string, fn func(*state.Record)) {
	t.Helper()
	if _, err := b.store.Update(testenv.Context(t, 10*time.Second), id, func(rec *state.Record) error {
		fn(rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// record reads id's record.
func (b *bundle) record(t *testing.T, id string) *state.Record {
	t.Helper()
	rec, _, err := b.store.Get(testenv.Context(t, 10*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// waitEnd waits until id's record is terminal and returns it.
func (b *bundle) waitEnd(t *testing.T, id string) *state.Record {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, _, err := b.store.Get(testenv.Context(t, 10*time.Second), id)
		if err == nil && rec.Status.Terminal() {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not finished in 30s: %+v (%v)", id, rec, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus waits until id's record shows status.
func (b *bundle) waitStatus(t *testing.T, id string, status state.Status) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rec, _, err := b.store.Get(testenv.Context(t, 10*time.Second), id); err == nil && rec.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not %s in 30s: %+v", id, status, b.record(t, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// submitTask submits prompt's task upstream as an earlier delivery did.
func (b *bundle) submitTask(t *testing.T, prompt string) *apiclient.Task {
	t.Helper()
	spec, err := jobspec.Decode(videoSpec("upstream", prompt), jobspec.Kind("video"))
	if err != nil {
		t.Fatal(err)
	}
	task, err := b.client.SubmitVideo(testenv.Context(t, 10*time.Second), spec.Video.Request())
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// cancel sends a cancel request for id as sluice.control.cancel does.
func (b *bundle) cancel(t *testing.T, id string) {
	t.Helper()
	reply := handleCancel(testenv.Context(t, 10*time.Second), b.store, b.cancels, fmt.Appendf(nil, `{"job_id":%q}`, id))
	if reply.Error != "" {
		t.Fatalf("cancel %s: %s", id, reply.Error)
	}
}
