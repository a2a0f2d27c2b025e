package testenv

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// OpTap counts the NATS operations every client of a server sends, by
// kind: key-value writes and reads, stream publishes, acknowledgements,
// heartbeats, pull requests and other JetStream API requests. It listens
// on ">" with a connection of its own, so it sees every message published
// in the account (replies to inboxes are not counted) and changes nothing
// that the server answers.
type OpTap struct {
	nc  *nats.Conn
	sub *nats.Subscription
	mu  sync.Mutex
	n   map[string]int
}

// StartOpTap taps the server at url until the test ends.
func StartOpTap(t testing.TB, url string) *OpTap {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("op tap"))
	if err != nil {
		t.Fatalf("op tap: %v", err)
	}
	tap := &OpTap{nc: nc, n: make(map[string]int)}
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		op := Op(m)
		if op == "" {
			return
		}
		tap.mu.Lock()
		tap.n[op]++
		tap.mu.Unlock()
	})
	if err != nil {
		t.Fatalf("op tap: %v", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	tap.sub = sub
	if err := nc.Flush(); err != nil {
		t.Fatalf("op tap: %v", err)
	}
	t.Cleanup(nc.Close)
	return tap
}

// Op names the operation m is, or "" for a message that is not one (a
// reply to an inbox).
func Op(m *nats.Msg) string {
	s := m.Subject
	switch {
	case strings.HasPrefix(m.Reply, "$JS.ACK."):
		// A consumer's delivery: the tap sees it with the stream's
		// subject on its way to the puller's inbox.
		stream, _, _ := strings.Cut(strings.TrimPrefix(m.Reply, "$JS.ACK."), ".")
		return "delivery from " + stream
	case strings.HasPrefix(s, "_INBOX."), strings.HasPrefix(s, "$JS.FC."):
		return ""
	case strings.HasPrefix(s, "$KV."):
		bucket, _, _ := strings.Cut(strings.TrimPrefix(s, "$KV."), ".")
		switch {
		case m.Header.Get("KV-Operation") != "":
			return "kv " + bucket + " delete"
		case m.Header.Get("Nats-Expected-Last-Subject-Sequence") == "0":
			return "kv " + bucket + " create"
		case m.Header.Get("Nats-Expected-Last-Subject-Sequence") != "":
			return "kv " + bucket + " update"
		}
		return "kv " + bucket + " put"
	case strings.HasPrefix(s, "$JS.API.DIRECT.GET."), strings.HasPrefix(s, "$JS.API.STREAM.MSG.GET."):
		stream, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(s, "$JS.API.DIRECT.GET."), "$JS.API.STREAM.MSG.GET."), ".")
		return "get " + strings.TrimPrefix(stream, "KV_")
	case strings.HasPrefix(s, "$JS.API.CONSUMER.MSG.NEXT."):
		return "pull request"
	case strings.HasPrefix(s, "$JS.API."):
		return "api " + strings.Join(strings.Split(strings.TrimPrefix(s, "$JS.API."), ".")[:min(2, strings.Count(s, ".")-1)], ".")
	case strings.HasPrefix(s, "$JS.ACK."):
		switch body := bytes.TrimSpace(m.Data); {
		case len(body) == 0, bytes.Equal(body, []byte("+ACK")):
			if m.Reply != "" {
				return "ack, confirmed"
			}
			return "ack"
		case bytes.Equal(body, []byte("+WPI")):
			return "in progress"
		case bytes.HasPrefix(body, []byte("-NAK")):
			return "nak"
		case bytes.HasPrefix(body, []byte("+TERM")):
			return "term"
		}
		return "ack other"
	case strings.HasPrefix(s, "$JS.EVENT."):
		return "advisory " + strings.Join(strings.Split(s, ".")[3:min(5, strings.Count(s, ".")+1)], ".")
	case strings.HasPrefix(s, "$"):
		return "other " + strings.SplitN(s, ".", 3)[1]
	}
	parts := strings.Split(s, ".")
	if len(parts) >= 3 && parts[0] == "sluice" {
		if parts[1] == "events" && len(parts) >= 4 {
			return "publish events." + parts[3]
		}
		return "publish " + parts[1]
	}
	return "publish other"
}

// Reset forgets what was counted, once every message published before
// the call has been counted.
func (t *OpTap) Reset() {
	t.settle()
	t.mu.Lock()
	t.n = make(map[string]int)
	t.mu.Unlock()
}

// Counts returns what was counted, once every message published before
// the call has been counted.
func (t *OpTap) Counts() map[string]int {
	t.settle()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.n))
	for k, v := range t.n {
		out[k] = v
	}
	return out
}

// settle waits until the tap has been handed what the server had routed
// to it (a round trip), and its handler has run through it.
func (t *OpTap) settle() {
	_ = t.nc.Flush()
	for range 200 {
		if n, _, _ := t.sub.Pending(); n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Table formats counts divided by jobs, one operation per line, sorted.
func Table(counts map[string]int, jobs int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%-34s %8.2f\n", k, float64(counts[k])/float64(jobs))
	}
	return b.String()
}
