package consumer

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// roundBench is a Consumer with fair scheduling on, its video class
// queues, and the queue its pull rounds fill; no fetch loop runs, so each
// round is driven by the test.
type roundBench struct {
	c     *Consumer
	q     *classQueues
	queue chan jetstream.Msg
	n     *testenv.NATS
	// started holds every message a round started, in order.
	started []jetstream.Msg
	// published counts the jobs published, which makes their ids.
	published int
}

func newRoundBench(t *testing.T, policy order.Policy) *roundBench {
	return newKindBench(t, "video", policy)
}

func newKindBench(t *testing.T, kind string, policy order.Policy) *roundBench {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{AckWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{JS: n.JS, Kinds: []string{kind}, Policy: policy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := c.classes.of(kind)
	q.base = contract.ConsumerConfig(kind, contract.Options{AckWait: time.Minute})
	return &roundBench{c: c, q: q, queue: make(chan jetstream.Msg, 64), n: n}
}

func (b *roundBench) publish(t *testing.T, priority int, tenant string, count int) {
	t.Helper()
	for i := range count {
		m := nats.NewMsg(contract.ClassSubject(b.q.kind, priority, tenant))
		m.Data = fmt.Appendf(nil, `{"kind":%q,"tenant":%q,"priority":%d}`, b.q.kind, tenant, priority)
		b.published++
		m.Header.Set(contract.HeaderMsgID, fmt.Sprintf("%s-%d-%d-%d", tenant, priority, i, b.published))
		if _, err := b.n.JS.PublishMsg(testenv.Context(t, 5*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
}

// handBack Naks m and waits for the server to have taken the Nak (an
// acknowledgement sent as a request is answered once processed).
func (b *roundBench) handBack(t *testing.T, m jetstream.Msg) {
	t.Helper()
	if _, err := b.n.JS.Conn().Request(m.Reply(), []byte("-NAK"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// round runs one pull round with free slots and returns the tenants of
// the jobs it started, in order.
func (b *roundBench) round(t *testing.T, free int) []string {
	t.Helper()
	got, err := b.c.pullClasses(testenv.Context(t, 10*time.Second), b.q, free, b.queue)
	if err != nil {
		t.Fatalf("round of %d: %v", free, err)
	}
	var tenants []string
	for range got {
		m := <-b.queue
		b.started = append(b.started, m)
		cl, _ := contract.ParseClassSubject(m.Subject())
		tenants = append(tenants, cl.Tenant)
	}
	return tenants
}

// The reproduction, one round at a time: tenant A's two
// priority-1 jobs start and never end (held, unacknowledged); tenant B's
// five priority-3 jobs then start one per round with one place free each
// round. A running job is not a waiting one: no round with work waiting
// and a place free starts nothing.
func TestRoundSkipsRunningJobs(t *testing.T) {
	t.Parallel()
	b := newRoundBench(t, &order.Static{On: true})
	b.publish(t, 1, "a", 2)
	b.publish(t, 3, "b", 5)
	if got := b.round(t, 2); fmt.Sprint(got) != "[a a]" {
		t.Fatalf("first round of 2 started %v, want A's two priority-1 jobs", got)
	}
	for i := range 5 {
		if got := b.round(t, 1); fmt.Sprint(got) != "[b]" {
			t.Fatalf("round %d with A's jobs running and one place free started %v, want one of B's", i+1, got)
		}
	}
	if got := b.round(t, 1); len(got) != 0 || b.q.blocked {
		t.Errorf("a round with nothing waiting started %v (blocked %v): a copy stored next must wake the loop", got, b.q.blocked)
	}
	// A job handed back (a worker stopping, a retry) waits again even
	// though its class has nothing never delivered.
	b.handBack(t, b.started[0])
	if got := b.round(t, 1); fmt.Sprint(got) != "[a]" {
		t.Errorf("the round after A's job was handed back started %v, want it again", got)
	}
}

// A tenant whose budget is spent waits only with the jobs a budget can
// hold back: with a price table that prices video alone, its speech jobs,
// which cost it nothing, still start; its video jobs do not.
func TestRoundStartsUnpricedKindsOfSpentTenant(t *testing.T) {
	t.Parallel()
	now := time.Now()
	view := tenants.NewView(func() time.Time { return now })
	for key, value := range map[string]string{
		tenants.PricesKey:             `{"rules":{"video.768P.second":1}}`,
		tenants.TenantKey("acme"):     `{"budget":{"credits":10,"per":"day"},"on_budget":"wait"}`,
		tenants.SpendKey("acme", now): `{"spent":10,"jobs":1}`,
	} {
		if err := view.Apply(key, []byte(value), 1, false); err != nil {
			t.Fatal(err)
		}
	}
	if !view.WaitingForBudget("acme") {
		t.Fatal("the view does not see acme's budget spent")
	}
	for kind, want := range map[string]string{"speech": "[acme]", "video": "[]"} {
		b := newKindBench(t, kind, view)
		b.publish(t, 3, "acme", 1)
		if got := b.round(t, 1); fmt.Sprint(got) != want {
			t.Errorf("%s: a round of acme's jobs with its budget spent started %v, want %s", kind, got, want)
		}
		// A job its budget holds back leaves the loop to its poll: a
		// copy stored meanwhile would only wake it to start nothing.
		if blocked := want == "[]"; b.q.blocked != blocked {
			t.Errorf("%s: after the round, blocked = %v, want %v", kind, b.q.blocked, blocked)
		}
	}
}

// A job handed back (its worker stopped, or died and its lease was handed
// over) holds its place on the fleet's quota until its next delivery: that
// delivery comes before new jobs of a more urgent class, which would
// otherwise take the place the quota keeps for it and wait there.
func TestRoundTakesHandedBackJobsFirst(t *testing.T) {
	t.Parallel()
	b := newRoundBench(t, &order.Static{On: true})
	b.publish(t, 3, "a", 1)
	if got := b.round(t, 1); fmt.Sprint(got) != "[a]" {
		t.Fatalf("first round started %v, want A's job", got)
	}
	b.publish(t, 1, "b", 3)
	b.handBack(t, b.started[0])
	if got := b.round(t, 1); fmt.Sprint(got) != "[a]" {
		t.Errorf("with A's job handed back and B's more urgent ones new, the round started %v, want A's again", got)
	}
	if got := b.round(t, 3); fmt.Sprint(got) != "[b b b]" {
		t.Errorf("the next round started %v, want B's three", got)
	}
}

// A class consumer deleted behind the round (a sweep found it idle as a
// job arrived) is made again within the round: the job starts.
func TestRoundRemakesADeletedClassConsumer(t *testing.T) {
	t.Parallel()
	b := newRoundBench(t, &order.Static{On: true})
	b.publish(t, 2, "a", 1)
	if got := b.round(t, 1); fmt.Sprint(got) != "[a]" {
		t.Fatalf("first round started %v, want A's job", got)
	}
	if err := b.started[0].Ack(); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 5*time.Second)
	if err := b.n.JS.DeleteConsumer(ctx, contract.JobsStream, contract.ClassConsumerName("video", 2, "a")); err != nil {
		t.Fatal(err)
	}
	b.publish(t, 2, "a", 1)
	if got := b.round(t, 1); fmt.Sprint(got) != "[a]" {
		t.Errorf("the round after A's class consumer was deleted started %v, want A's new job", got)
	}
}

// A class whose consumer cannot be read this round (a timeout, its
// server slow or gone: here a handle on a closed connection) is left out
// of the round, and so is its tenant (its running jobs count against its
// cap, unread): the other tenants' jobs still start, and the class is
// read again the next round.
func TestRoundLeavesOutAClassItCannotRead(t *testing.T) {
	t.Parallel()
	b := newRoundBench(t, &order.Static{On: true})
	b.publish(t, 1, "a", 1)
	b.publish(t, 3, "b", 1)
	ctx := testenv.Context(t, 5*time.Second)
	subject := contract.ClassSubject("video", 1, "a")
	if _, err := b.c.classConsumer(ctx, b.q, subject); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(b.n.URL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := js.Consumer(ctx, contract.JobsStream, contract.ClassConsumerName("video", 1, "a"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	b.q.consumers[subject] = stale
	if got := b.round(t, 2); fmt.Sprint(got) != "[b]" {
		t.Errorf("with A's class unreadable the round started %v, want B's job", got)
	}
	if got := b.round(t, 1); fmt.Sprint(got) != "[a]" {
		t.Errorf("the next round started %v, want A's job", got)
	}
}
