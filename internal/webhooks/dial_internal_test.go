package webhooks

import (
	"errors"
	"net"
	"testing"

	"github.com/sluice-dev/sluice/internal/artifacts"
)

// TestDialRefusesPrivate: a name that resolves to a private address
// (DNS rebinding) is refused when the delivery connects.
func TestDialRefusesPrivate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = URLPolicy{}.dialer(false).Dial("tcp", ln.Addr().String())
	if !errors.Is(err, artifacts.ErrPrivateAddress) {
		t.Errorf("dial %s = %v, want ErrPrivateAddress", ln.Addr(), err)
	}
	c, err := URLPolicy{AllowPrivate: true}.dialer(false).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Errorf("with private allowed: %v", err)
	} else {
		c.Close()
	}
}

// TestPlainHTTPStaysPrivate: SLUICE_ALLOW_PRIVATE_URLS lets plain http
// reach private receivers, never a public address (https only outside
// SLUICE_DEV): a public IP literal is refused when added, and a name
// that resolves to a public address is refused when the delivery
// connects, before any byte is sent.
func TestPlainHTTPStaysPrivate(t *testing.T) {
	t.Parallel()
	p := PolicyOf(true, false)
	if err := p.CheckURL("http://93.184.216.34/in"); !errors.Is(err, ErrRefusedURL) {
		t.Errorf("plain http to a public address: %v, want a refusal", err)
	}
	if err := p.CheckURL("http://127.0.0.1:8080/in"); err != nil {
		t.Errorf("plain http to a loopback receiver: %v", err)
	}
	_, err := p.dialer(true).Dial("tcp", "93.184.216.34:80")
	if !errors.Is(err, errPlainPublic) {
		t.Errorf("plain http dial to a public address = %v, want errPlainPublic", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := p.dialer(true).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Errorf("plain http dial to a loopback receiver: %v", err)
	} else {
		c.Close()
	}
	if err := PolicyOf(false, true).CheckURL("http://hooks.example.com/in"); err != nil {
		t.Errorf("plain http on a development worker: %v", err)
	}
}
