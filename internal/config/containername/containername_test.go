package containername

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// serveDNS answers PTR questions from names on a loopback UDP port, as
// Docker's embedded DNS does for container addresses.
func serveDNS(t *testing.T, names map[string]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if name, ok := names[q.Name.String()]; ok && q.Type == dnsmessage.TypePTR {
				_ = b.PTRResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 600},
					dnsmessage.PTRResource{PTR: dnsmessage.MustNewName(name)})
			}
			msg, _ := b.Finish()
			_, _ = pc.WriteTo(msg, from)
		}
	}()
	return pc.LocalAddr().String()
}

func TestPTR(t *testing.T) {
	t.Parallel()
	srv := serveDNS(t, map[string]string{
		"3.2.1.10.in-addr.arpa.": "sluice-worker-2.sluice_default.",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.": "sluice_worker_1.sluice_default.",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ip, want := range map[string]string{"10.1.2.3": "sluice-worker-2.sluice_default.", "2001:db8::1": "sluice_worker_1.sluice_default."} {
		got, err := PTR(ctx, srv, netip.MustParseAddr(ip))
		if err != nil || got != want {
			t.Errorf("PTR(%s) = %q, %v; want %q", ip, got, err, want)
		}
	}
	if got, err := PTR(ctx, srv, netip.MustParseAddr("10.9.9.9")); err == nil {
		t.Errorf("PTR of an unknown address = %q", got)
	}
}
