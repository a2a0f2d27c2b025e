package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestReplyDropperDecidesEachWrite puts one key per fate through a bucket
// behind the dropper and reads what the server holds directly.
func TestReplyDropperDecidesEachWrite(t *testing.T) {
	n := StartNATS(t)
	ctx := Context(t, 30*time.Second)
	direct, err := n.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "FATES"})
	if err != nil {
		t.Fatal(err)
	}
	drop := StartReplyDropper(t, strings.TrimPrefix(n.URL, "nats://"))
	fates := map[string]WriteFate{"passes": WritePasses, "reply": WriteReplyLost, "lost": WriteLost, "cut": WriteThenCut}
	drop.SetDecide(func(subject string) WriteFate {
		key, ok := strings.CutPrefix(subject, "$KV.FATES.")
		if !ok {
			return WritePasses
		}
		return fates[key]
	})
	nc, err := nats.Connect(drop.URL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "FATES")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"passes", "reply", "lost", "cut"} {
		// A reply that is never coming is waited for a second; the one
		// that comes, as long as the test allows.
		wait := time.Second
		if key == "passes" {
			wait = 20 * time.Second
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		_, err := kv.PutString(pctx, key, "v")
		cancel()
		if answered := err == nil; answered != (key == "passes") {
			t.Errorf("put %s: answered %v (%v)", key, answered, err)
		}
		_, err = direct.Get(ctx, key)
		if stored := err == nil; stored == (key == "lost") {
			t.Errorf("put %s: stored %v (%v)", key, stored, err)
		} else if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatal(err)
		}
	}
	if !nc.IsClosed() {
		t.Error("the connection outlived a WriteThenCut")
	}
	if _, err := nats.Connect(drop.URL(), nats.Timeout(time.Second)); err == nil {
		t.Error("the dropper accepted a connection after its cut")
	}
}
