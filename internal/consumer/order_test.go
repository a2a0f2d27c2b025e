package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// delivered is what a Handler saw of one delivery.
type delivered struct {
	subject, jobID, trace string
	published             time.Time
}

// recorder records every delivery and acks it.
type recorder struct {
	mu  sync.Mutex
	got []delivered
}

func (r *recorder) Handle(_ context.Context, d *consumer.Delivery) consumer.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, delivered{subject: d.Msg.Subject(), jobID: contract.MessageID(d.Msg.Subject(), d.Msg.Headers()),
		trace: d.Msg.Headers().Get("X-Trace"), published: d.Published()})
	return consumer.Outcome{Action: consumer.Ack}
}

func (r *recorder) deliveries() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (b *testBundle) publishJob(t *testing.T, subject, msgID, body string) time.Time {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	m.Header.Set("X-Trace", "t-"+msgID)
	if msgID != "" {
		m.Header.Set(contract.HeaderMsgID, msgID)
	}
	ack, err := b.n.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	return raw.Time
}

// With fair scheduling on, admission moves each job to its class queue
// with its headers, its resolved id and its original publish time; a
// second copy of an admitted job is deduplicated.
func TestAdmissionKeepsHeadersAndDedups(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	video := contract.JobSubject("video")
	jobs := []struct{ msgID, body, subject, id string }{
		{"m-1", `{"id":"spec-1","kind":"video","tenant":"acme","priority":1}`, contract.ClassSubject("video", 1, "acme"), "spec-1"},
		{"m-2", `{"kind":"video"}`, contract.ClassSubject("video", 3, "default"), "m-2"},
		{"", `not json`, contract.ClassSubject("video", 3, "default"), "js-3"},
		{"m-4", `{"kind":"video","tenant":"a.b","priority":"high"}`, contract.ClassSubject("video", 3, "default"), "m-4"},
		{"m-5", `{"kind":"video","tenant":"beta","priority":5}`, contract.ClassSubject("video", 5, "beta"), "m-5"},
	}
	published := map[string]time.Time{}
	for _, j := range jobs {
		published[j.id] = b.publishJob(t, video, j.msgID, j.body)
	}
	var r recorder
	b.run(t, consumer.Config{AckWait: 5 * time.Second, Policy: &order.Static{On: true}}, &r)
	waitFor(t, "every job delivered", func() bool { return len(r.deliveries()) == len(jobs) })
	byID := map[string]delivered{}
	for _, d := range r.deliveries() {
		byID[d.jobID] = d
	}
	for _, j := range jobs {
		d, ok := byID[j.id]
		switch {
		case !ok:
			t.Errorf("job %s: not delivered under its id; got %+v", j.id, r.deliveries())
		case d.subject != j.subject:
			t.Errorf("job %s: delivered on %s, want %s", j.id, d.subject, j.subject)
		case d.trace != "t-"+j.msgID:
			t.Errorf("job %s: header X-Trace %q, want it kept", j.id, d.trace)
		case !d.published.Equal(published[j.id]):
			t.Errorf("job %s: published %v, want the intake's %v", j.id, d.published, published[j.id])
		}
	}
	m := nats.NewMsg(contract.ClassSubject("video", 1, "acme"))
	m.Data = []byte(jobs[0].body)
	m.Header.Set(contract.HeaderMsgID, "spec-1:q")
	ack, err := b.n.JS.PublishMsg(testenv.Context(t, 5*time.Second), m)
	if err != nil || !ack.Duplicate {
		t.Errorf("a second admitted copy of spec-1: ack %+v, err %v; want a duplicate", ack, err)
	}
}

// Without fair scheduling, a job in a class queue (left from a time it
// was on) is served, not failed as a stray: the sweep counts it and the
// fetch loop pulls it from its class consumer.
func TestClassSubjectsServedWithoutPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	subject := contract.ClassSubject("video", 2, "acme")
	b.publishJob(t, subject, "left-1", `{"kind":"video"}`)
	var mu sync.Mutex
	waiting, classWaiting := -1, -1
	var r recorder
	b.run(t, consumer.Config{AckWait: 5 * time.Second, SweepInterval: 200 * time.Millisecond, Observer: consumer.Observer{
		Waiting: func(kind string, n int) {
			mu.Lock()
			defer mu.Unlock()
			if kind == "video" && waiting < 0 {
				waiting = n
			}
		},
		WaitingClass: func(kind, tenant string, priority, n int) {
			mu.Lock()
			defer mu.Unlock()
			if kind == "video" && tenant == "acme" && priority == 2 && classWaiting < 0 {
				classWaiting = n
			}
		},
	}}, &r)
	waitFor(t, "the class job delivered", func() bool { return len(r.deliveries()) == 1 })
	if d := r.deliveries()[0]; d.subject != subject || d.jobID != "left-1" {
		t.Errorf("delivered %+v, want left-1 on %s", d, subject)
	}
	mu.Lock()
	defer mu.Unlock()
	if waiting != 1 || classWaiting != 1 {
		t.Errorf("first sweep: waiting %d, class waiting %d; want 1 and 1", waiting, classWaiting)
	}
	waitFor(t, "the class job acked", func() bool { return b.stored(t) == 0 })
}

// A backlog of 10,000 jobs of tenant A at priority 5, published before
// one job of tenant B and three of A at priority 1, does not hold those
// back: once admitted they start among the next starts, long before A's
// backlog is through.
func TestBacklogDoesNotHideOtherJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, 30*time.Second)
	video := contract.JobSubject("video")
	const backlog = 10000
	ctx := testenv.Context(t, 60*time.Second)
	for i := range backlog {
		m := nats.NewMsg(video)
		m.Data = fmt.Appendf(nil, `{"id":"a5-%d","kind":"video","tenant":"a","priority":5}`, i)
		if _, err := b.n.JS.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			select {
			case <-b.n.JS.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal("backlog not published")
			}
		}
	}
	b.publishJob(t, video, "", `{"id":"b-0","kind":"video","tenant":"b"}`)
	for i := range 3 {
		b.publishJob(t, video, "", fmt.Sprintf(`{"id":"a1-%d","kind":"video","tenant":"a","priority":1}`, i))
	}
	var mu sync.Mutex
	var starts []string
	b.run(t, consumer.Config{MaxInflight: 2, AckWait: 30 * time.Second, Policy: &order.Static{On: true}}, handlerFunc(
		func(_ context.Context, d *consumer.Delivery) consumer.Outcome {
			mu.Lock()
			starts = append(starts, contract.MessageID(d.Msg.Subject(), d.Msg.Headers()))
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			return consumer.Outcome{Action: consumer.Ack}
		}))
	special := []string{"b-0", "a1-0", "a1-1", "a1-2"}
	at := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		pos := map[string]int{}
		for i, id := range starts {
			if slices.Contains(special, id) {
				pos[id] = i
			}
		}
		return pos
	}
	waitFor(t, "the jobs behind the backlog started", func() bool { return len(at()) == len(special) })
	pos := at()
	t.Logf("starts of %v: %v", special, pos)
	first, last := backlog, 0
	for _, p := range pos {
		first, last = min(first, p), max(last, p)
	}
	// Each round pulls at most MaxInflight (2); the four may come in up to
	// two admissions, so allow a few rounds between the first and last.
	if last-first > 8 || last > backlog/2 {
		t.Errorf("starts of %v: %v; want them within a few starts of each other and before half of A's backlog", special, pos)
	}
	// Two handlers run at once (MaxInflight 2), so two jobs handed over
	// together may record their starts either way round: an inversion of
	// neighbours is the handlers' race, any other is the order's fault.
	if !(pos["a1-0"] < pos["a1-1"]+2 && pos["a1-1"] < pos["a1-2"]+2 && pos["a1-0"] < pos["a1-2"]) {
		t.Errorf("A's priority-1 jobs started out of publish order: %v", pos)
	}
}

// A job in a class queue at or below its class consumer's ack floor,
// which that consumer will never deliver, is handed over by the sweep as
// an orphan like one of the kind's own consumer.
func TestSweepHandsOverClassOrphans(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	subject := contract.ClassSubject("video", 4, "acme")
	b.publishJob(t, subject, "lost-1", `{"kind":"video"}`)
	ctx := testenv.Context(t, 10*time.Second)
	cfg := contract.ConsumerConfig("video", contract.Options{AckWait: 5 * time.Second})
	cfg.Durable, cfg.FilterSubject, cfg.FilterSubjects = contract.ClassConsumerName("video", 4, "acme"), subject, nil
	if _, err := b.n.JS.CreateOrUpdateConsumer(ctx, contract.JobsStream, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := b.n.JS.ResetConsumerToSequence(ctx, contract.JobsStream, cfg.Durable, 2); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var orphaned []bool
	b.run(t, consumer.Config{AckWait: 5 * time.Second, SweepInterval: 100 * time.Millisecond}, handlerFunc(
		func(_ context.Context, d *consumer.Delivery) consumer.Outcome {
			mu.Lock()
			defer mu.Unlock()
			if d.Msg.Subject() == subject {
				orphaned = append(orphaned, d.Orphaned())
			}
			return consumer.Outcome{Action: consumer.Ack}
		}))
	waitFor(t, "the class orphan handed over and removed", func() bool { return b.stored(t) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(orphaned, []bool{true}) {
		t.Errorf("deliveries of the class job (orphaned or not): %v, want one handover", orphaned)
	}
}

// Admission reads a priority as validation does: a JSON number that is an
// integer is that integer, however it is written.
func TestAdmissionReadsIntegerPriorities(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	video := contract.JobSubject("video")
	jobs := map[string]string{ // job id: its subject once admitted
		"p10":    contract.ClassSubject("video", 1, "acme"),
		"p2e0":   contract.ClassSubject("video", 2, "acme"),
		"p40em1": contract.ClassSubject("video", 4, "acme"),
		"p15":    contract.ClassSubject("video", 3, "acme"),
	}
	bodies := map[string]string{"p10": "1.0", "p2e0": "2e0", "p40em1": "40e-1", "p15": "1.5"}
	for id, p := range bodies {
		b.publishJob(t, video, id, fmt.Sprintf(`{"id":%q,"kind":"video","tenant":"acme","priority":%s}`, id, p))
	}
	var r recorder
	b.run(t, consumer.Config{AckWait: 5 * time.Second, Policy: &order.Static{On: true}}, &r)
	waitFor(t, "every job delivered", func() bool { return len(r.deliveries()) == len(jobs) })
	for _, d := range r.deliveries() {
		if d.subject != jobs[d.jobID] {
			t.Errorf("job %s (priority %s): admitted to %s, want %s", d.jobID, bodies[d.jobID], d.subject, jobs[d.jobID])
		}
	}
}

// A job published with JetStream's publish-control headers (expected
// stream, sequence or message id, a TTL, a rollup) is admitted: its class
// copy carries none of them, which would refuse the copy for ever.
func TestAdmissionDropsPublishControlHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	video := contract.JobSubject("video")
	b.publishJob(t, video, "plain-1", `{"id":"plain-1","kind":"video","tenant":"acme"}`)
	m := nats.NewMsg(video)
	m.Data = []byte(`{"id":"ctl-1","kind":"video","tenant":"acme"}`)
	m.Header.Set(contract.HeaderMsgID, "ctl-1")
	m.Header.Set("Nats-Expected-Stream", contract.JobsStream)
	m.Header.Set("Nats-Expected-Last-Sequence", "1")
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", "1")
	m.Header.Set("Nats-Expected-Last-Msg-Id", "plain-1")
	m.Header.Set("X-Trace", "kept")
	if _, err := b.n.JS.PublishMsg(testenv.Context(t, 5*time.Second), m); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]nats.Header{}
	b.run(t, consumer.Config{AckWait: 5 * time.Second, Policy: &order.Static{On: true}}, handlerFunc(
		func(_ context.Context, d *consumer.Delivery) consumer.Outcome {
			mu.Lock()
			defer mu.Unlock()
			got[contract.MessageID(d.Msg.Subject(), d.Msg.Headers())] = d.Msg.Headers()
			return consumer.Outcome{Action: consumer.Ack}
		}))
	waitFor(t, "both jobs delivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	mu.Lock()
	defer mu.Unlock()
	h := got["ctl-1"]
	for k := range h {
		if strings.HasPrefix(k, "Nats-Expected-") {
			t.Errorf("the class copy of ctl-1 carries %s: %v", k, h[k])
		}
	}
	if h.Get("X-Trace") != "kept" {
		t.Errorf("the class copy of ctl-1 lost its header X-Trace: %v", h)
	}
}

// Admission decides whether a job arrived on a tenant subject before it
// moves the job to its class, and records it so (contract.ArrivedFor);
// the same header a producer set on the plain subject is dropped. A job
// on a tenant subject waits in its subject's tenant's class.
func TestAdmissionRecordsTenantSubject(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	forged := nats.NewMsg(contract.JobSubject("video"))
	forged.Data = []byte(`{"id":"forged-1","kind":"video","tenant":"acme"}`)
	forged.Header.Set(contract.HeaderMsgID, "forged-1")
	forged.Header.Set(contract.HeaderTenantSubject, "acme")
	if _, err := b.n.JS.PublishMsg(testenv.Context(t, 5*time.Second), forged); err != nil {
		t.Fatal(err)
	}
	b.publishJob(t, contract.TenantSubject("video", "acme"), "bound-1", `{"id":"bound-1","kind":"video","priority":2}`)
	b.publishJob(t, contract.TenantSubject("video", "other"), "claim-1", `{"id":"claim-1","kind":"video","tenant":"acme"}`)
	b.publishJob(t, "sluice.jobs.video.t.-x", "badtoken-1", `{"id":"badtoken-1","kind":"video","tenant":"acme"}`)
	want := map[string]struct{ subject, arrivedFor string }{
		"badtoken-1": {contract.ClassSubject("video", 3, "acme"), ""},
		"forged-1":   {contract.ClassSubject("video", 3, "acme"), ""},
		"bound-1":    {contract.ClassSubject("video", 2, "acme"), "acme"},
		"claim-1":    {contract.ClassSubject("video", 3, "other"), "other"},
	}
	var mu sync.Mutex
	got := map[string][2]string{}
	b.run(t, consumer.Config{AckWait: 5 * time.Second, Policy: &order.Static{On: true}}, handlerFunc(
		func(_ context.Context, d *consumer.Delivery) consumer.Outcome {
			mu.Lock()
			defer mu.Unlock()
			got[contract.MessageID(d.Msg.Subject(), d.Msg.Headers())] = [2]string{d.Msg.Subject(), contract.ArrivedFor(d.Msg.Subject(), d.Msg.Headers())}
			return consumer.Outcome{Action: consumer.Ack}
		}))
	waitFor(t, "every job delivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == len(want) })
	mu.Lock()
	defer mu.Unlock()
	for id, w := range want {
		if g := got[id]; g[0] != w.subject || g[1] != w.arrivedFor {
			t.Errorf("job %s: delivered on %s arrived for %q; want %s, %q", id, g[0], g[1], w.subject, w.arrivedFor)
		}
	}
}

// Without fair scheduling, a kind's consumer delivers its tenant subjects.
func TestTenantSubjectServedWithoutPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	subject := contract.TenantSubject("video", "acme")
	b.publishJob(t, subject, "bound-2", `{"id":"bound-2","kind":"video"}`)
	var r recorder
	b.run(t, consumer.Config{AckWait: 5 * time.Second, SweepInterval: 200 * time.Millisecond}, &r)
	waitFor(t, "the job delivered", func() bool { return len(r.deliveries()) == 1 })
	if d := r.deliveries()[0]; d.subject != subject || d.jobID != "bound-2" {
		t.Errorf("delivered %+v", d)
	}
}
