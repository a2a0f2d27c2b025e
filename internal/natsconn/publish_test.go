package natsconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestQuickAckAgreesWithJSON: every acknowledgement quickAck reads, it
// reads as encoding/json does; what it leaves (errors, other members,
// escapes) goes to slowAck.
func TestQuickAckAgreesWithJSON(t *testing.T) {
	cases := []struct {
		ack  string
		read bool
	}{
		{`{"stream":"KV_SLUICE_STATE","seq":42}`, true},
		{`{"stream":"SLUICE_EVENTS","seq":7,"duplicate":true}`, true},
		{`{"stream":"S","domain":"hub","seq":18446744073709551615}`, true},
		{`{"seq":3,"stream":"S","duplicate":false}`, true},
		{`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 41"},"stream":"S","seq":0}`, false},
		{`{"stream":"S"}`, false},
		{`{"seq":3}`, false},
		{`{"stream":"S","seq":-1}`, false},
		{`{"stream":"S","seq":1,"batch":"b"}`, false},
		{`{"stream":"S\"x","seq":1}`, false},
		{`{"stream": "S", "seq": 1}`, false},
		{`{"stream":"S","seq":1,"duplicate":yes}`, false},
		{`{}`, false},
		{``, false},
		{`[1]`, false},
	}
	for _, c := range cases {
		seq, ok := quickAck([]byte(c.ack))
		if ok != c.read {
			t.Errorf("quickAck(%s) read = %v, want %v", c.ack, ok, c.read)
			continue
		}
		if !ok {
			continue
		}
		want, err := slowAck([]byte(c.ack))
		if err != nil || want != seq {
			t.Errorf("quickAck(%s) = %d; encoding/json: %d, %v", c.ack, seq, want, err)
		}
	}
}

// TestPublishAnswersAsNATSGo: at the wire, against a real server, Publish
// returns what jetstream's PublishMsg returns: the sequence, the same
// sequence for a duplicate, a compare-and-set conflict matching
// ErrKeyExists, and ErrNoStreamResponse where no stream listens.
func TestPublishAnswersAsNATSGo(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := n.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	msg := func(subj, id, lastSeq string) *nats.Msg {
		m := nats.NewMsg(subj)
		m.Data = []byte("x")
		if id != "" {
			m.Header.Set(jetstream.MsgIDHeader, id)
		}
		if lastSeq != "" {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, lastSeq)
		}
		return m
	}
	first, err := Publish(ctx, n.Conn, msg("t.a", "one", ""))
	if err != nil || first != 1 {
		t.Fatalf("first publish: seq %d, %v; want 1", first, err)
	}
	if again, err := Publish(ctx, n.Conn, msg("t.a", "one", "")); err != nil || again != first {
		t.Fatalf("duplicate: seq %d, %v; want %d", again, err, first)
	}
	if _, err := Publish(ctx, n.Conn, msg("t.a", "", "0")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("compare-and-set against a stale sequence: %v, want ErrKeyExists", err)
	}
	if seq, err := Publish(ctx, n.Conn, msg("t.a", "", "1")); err != nil || seq != 2 {
		t.Fatalf("compare-and-set against the last sequence: seq %d, %v; want 2", seq, err)
	}
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := Publish(nctx, n.Conn, msg("nowhere", "", "")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish where no stream listens: %v, want ErrNoStreamResponse", err)
	}
}
