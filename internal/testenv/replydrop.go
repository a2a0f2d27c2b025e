package testenv

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReplyDropper is a proxy between NATS clients and a server that, when
// armed, forwards a client's next publish to a subject under a prefix and
// drops the server's answer to it: the request is applied, its answer is
// lost, as when a connection or a leader goes away at the wrong moment.
// Armed with ArmUnapplied it drops the publish itself: the request is
// never applied, and the client hears nothing either, the other side of
// the same doubt.
// It understands the client protocol's PUB, HPUB, MSG and HMSG; every
// other line passes as it is.
type ReplyDropper struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	prefix  string
	armed   int
	swallow bool            // drop the armed publishes themselves (ArmUnapplied)
	replies map[string]bool // reply subjects whose answer is dropped
	dropped int
	// decide, when set, chooses the fate of every publish (SetDecide);
	// cut refuses every connection (Cut).
	decide func(subject string) WriteFate
	cut    bool
	// cutOn: reply subjects whose answer cuts the dropper instead.
	cutOn map[string]bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartReplyDropper listens on a free loopback port and forwards every
// connection to target (host:port). It stops when the test ends.
func StartReplyDropper(t testing.TB, target string) *ReplyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("reply dropper: %v", err)
	}
	d := &ReplyDropper{ln: ln, target: target, replies: map[string]bool{}, cutOn: map[string]bool{}, conns: map[net.Conn]struct{}{}}
	d.wg.Go(d.serve)
	t.Cleanup(d.close)
	return d
}

// URL is the nats:// URL to connect to instead of the server's.
func (d *ReplyDropper) URL() string { return "nats://" + d.ln.Addr().String() }

// Arm drops the answers to the next n publishes to a subject that starts
// with prefix (e.g. "$KV.SLUICE_STATE." for writes to the state bucket).
func (d *ReplyDropper) Arm(prefix string, n int) { d.arm(prefix, n, false) }

// ArmUnapplied drops the next n publishes to a subject that starts with
// prefix before they reach the server: the writer waits for an answer to
// a request that was never applied.
func (d *ReplyDropper) ArmUnapplied(prefix string, n int) { d.arm(prefix, n, true) }

func (d *ReplyDropper) arm(prefix string, n int, swallow bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prefix, d.armed, d.swallow = prefix, n, swallow
}

// Dropped is how many answers (or, armed with ArmUnapplied, publishes)
// were dropped so far.
func (d *ReplyDropper) Dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// WriteFate is what the dropper does with one publish (SetDecide).
type WriteFate int

const (
	// WritePasses forwards the publish and its answer.
	WritePasses WriteFate = iota
	// WriteReplyLost forwards the publish and drops its answer: applied,
	// the writer never hears so.
	WriteReplyLost
	// WriteLost drops the publish: not applied, and no answer comes.
	WriteLost
	// WriteThenCut forwards the publish and cuts the dropper (Cut) when
	// its answer comes, dropping it: applied, and the writer is gone
	// before the answer reaches it.
	WriteThenCut
)

// SetDecide makes decide choose the fate of every later publish (and of
// its answer) from its subject; Arm's prefix is not consulted then.
// decide is called on the connection's reading goroutine, in order.
func (d *ReplyDropper) SetDecide(decide func(subject string) WriteFate) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.decide = decide
}

// Cut closes every connection through the dropper and refuses new ones:
// to the client the server is gone for good.
func (d *ReplyDropper) Cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for c := range d.conns {
		_ = c.Close()
	}
}

func (d *ReplyDropper) close() {
	_ = d.ln.Close()
	d.mu.Lock()
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

func (d *ReplyDropper) serve() {
	for {
		in, err := d.ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		cut := d.cut
		d.mu.Unlock()
		if cut {
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", d.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		d.mu.Lock()
		d.conns[in], d.conns[out] = struct{}{}, struct{}{}
		if d.cut {
			_ = in.Close()
			_ = out.Close()
		}
		d.mu.Unlock()
		d.wg.Go(func() { d.pipe(out, in, d.fromClient) })
		d.wg.Go(func() { d.pipe(in, out, d.fromServer) })
	}
}

// pipe copies src to dst operation by operation; keep decides, from an
// operation's line, whether it and its payload pass.
func (d *ReplyDropper) pipe(dst, src net.Conn, keep func(op []string) bool) {
	defer dst.Close()
	defer src.Close()
	r := bufio.NewReaderSize(src, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		op := bytes.Fields(line)
		fields := make([]string, len(op))
		for i, f := range op {
			fields[i] = string(f)
		}
		var payload []byte
		if n := payloadLen(fields); n >= 0 {
			payload = make([]byte, n+2) // and its CRLF
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
		}
		if !keep(fields) {
			continue
		}
		if _, err := dst.Write(append(line, payload...)); err != nil {
			return
		}
	}
}

// payloadLen is the length of the payload that follows an operation's
// line, or -1 when none does.
func payloadLen(op []string) int {
	if len(op) < 2 {
		return -1
	}
	switch op[0] {
	case "PUB", "pub", "HPUB", "hpub", "MSG", "msg", "HMSG", "hmsg":
		n, err := strconv.Atoi(op[len(op)-1])
		if err != nil {
			return -1
		}
		return n
	}
	return -1
}

// fromClient notes the reply subject of an armed publish, or drops the
// publish when armed with ArmUnapplied.
func (d *ReplyDropper) fromClient(op []string) bool {
	var subject, reply string
	switch {
	case (op[0] == "PUB" || op[0] == "pub") && len(op) == 4, (op[0] == "HPUB" || op[0] == "hpub") && len(op) == 5:
		subject, reply = op[1], op[2]
	default:
		return true
	}
	d.mu.Lock()
	decide := d.decide
	d.mu.Unlock()
	if decide != nil {
		switch decide(subject) {
		case WriteLost:
			return false
		case WriteReplyLost:
			d.mu.Lock()
			d.replies[reply] = true
			d.mu.Unlock()
		case WriteThenCut:
			// Cut when the answer comes (and drop it): the write is
			// then applied for certain, and the writer never hears.
			// Cutting right after forwarding could reset the server's
			// socket before it read the publish.
			d.mu.Lock()
			d.cutOn[reply] = true
			d.mu.Unlock()
		}
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed > 0 && len(subject) >= len(d.prefix) && subject[:len(d.prefix)] == d.prefix {
		d.armed--
		if d.swallow {
			d.dropped++
			return false
		}
		d.replies[reply] = true
	}
	return true
}

// fromServer drops the answer to an armed publish.
func (d *ReplyDropper) fromServer(op []string) bool {
	if len(op) < 2 || (op[0] != "MSG" && op[0] != "msg" && op[0] != "HMSG" && op[0] != "hmsg") {
		return true
	}
	d.mu.Lock()
	cut := d.cutOn[op[1]]
	delete(d.cutOn, op[1])
	if d.replies[op[1]] {
		delete(d.replies, op[1])
		d.dropped++
		d.mu.Unlock()
		return false
	}
	d.mu.Unlock()
	if cut {
		d.Cut()
		return false
	}
	return true
}

// JetStream connects through the dropper and returns a JetStream context
// on the connection, which is closed when the test ends.
func (d *ReplyDropper) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(d.URL())
	if err != nil {
		t.Fatalf("connect through the reply dropper: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}
