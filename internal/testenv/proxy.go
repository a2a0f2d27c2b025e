package testenv

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on a loopback port that a test can cut and heal:
// the network between two parts, under the test's control. It counts how
// often a pattern passes from the dialling side to the target, so a test
// can bound how many requests a client sent without changing what the
// server answers.
type Proxy struct {
	ln      net.Listener
	pattern []byte
	count   atomic.Int64

	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards every connection
// to target (host:port; "" until SetTarget: connections are closed until
// then). pattern, when not empty, is counted in what dialers send. The
// proxy stops when the test ends.
func StartProxy(t testing.TB, target, pattern string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, pattern: []byte(pattern), conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Addr is the host:port to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets where new connections go.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Cut closes every connection through the proxy and closes new ones at
// once, until Heal: to both sides the network is gone.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Count is how many times the pattern has passed towards the target.
func (p *Proxy) Count() int64 { return p.count.Load() }

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(in) })
	}
}

func (p *Proxy) forward(in net.Conn) {
	p.mu.Lock()
	target, cut := p.target, p.cut
	p.mu.Unlock()
	if cut || target == "" {
		_ = in.Close()
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var both sync.WaitGroup
	both.Go(func() { p.pipe(out, in, true) })
	both.Go(func() { p.pipe(in, out, false) })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// pipe copies src to dst, counting the pattern when counted, and closes
// both when either side ends.
func (p *Proxy) pipe(dst, src net.Conn, counted bool) {
	defer dst.Close()
	defer src.Close()
	if !counted || len(p.pattern) == 0 {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, 32<<10)
	var tail []byte // the last len(pattern)-1 bytes, for a match across reads
	for {
		n, err := src.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			p.count.Add(int64(bytes.Count(seen, p.pattern)))
			keep := min(len(p.pattern)-1, len(seen))
			tail = append([]byte(nil), seen[len(seen)-keep:]...)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
