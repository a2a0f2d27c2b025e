package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A class consumer idle for classIdle is deleted; one whose queue holds a
// job, a recent one, and the kind's own consumer stay.
func TestDropIdleClasses(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	idle, busy := contract.ClassSubject("video", 3, "idle"), contract.ClassSubject("video", 3, "busy")
	for _, subject := range []string{idle, busy} {
		cfg := contract.ConsumerConfig("video", contract.Options{})
		cl, _ := contract.ParseClassSubject(subject)
		cfg.Durable, cfg.FilterSubject, cfg.FilterSubjects = contract.ClassConsumerName(cl.Kind, cl.Priority, cl.Tenant), subject, nil
		if _, err := n.JS.CreateOrUpdateConsumer(ctx, contract.JobsStream, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.JS.PublishMsg(ctx, &nats.Msg{Subject: busy, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{JS: n.JS, Kinds: []string{"video"}, Policy: &order.Static{On: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		_, err := stream.Consumer(ctx, name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	idleName, busyName := contract.ClassConsumerName("video", 3, "idle"), contract.ClassConsumerName("video", 3, "busy")
	c.dropIdleClasses(ctx, stream, time.Now())
	if !exists(idleName) {
		t.Fatal("a class consumer made a moment ago was deleted")
	}
	later := time.Now().Add(2 * classIdle)
	c.idleChecked = later.Add(-idleCheckEvery / 2)
	c.dropIdleClasses(ctx, stream, later)
	if !exists(idleName) {
		t.Fatal("a check within idleCheckEvery of the last deleted a consumer")
	}
	c.idleChecked = time.Time{}
	c.dropIdleClasses(ctx, stream, later)
	if exists(idleName) || !exists(busyName) || !exists(contract.ConsumerName("video")) {
		t.Errorf("after the idle check: %s exists %v (want false), %s %v, %s %v (want true)", idleName, exists(idleName),
			busyName, exists(busyName), contract.ConsumerName("video"), exists(contract.ConsumerName("video")))
	}
}
