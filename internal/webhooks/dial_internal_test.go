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
	_, err = URLPolicy{}.dialer().Dial("tcp", ln.Addr().String())
	if !errors.Is(err, artifacts.ErrPrivateAddress) {
		t.Errorf("dial %s = %v, want ErrPrivateAddress", ln.Addr(), err)
	}
	c, err := URLPolicy{AllowPrivate: true}.dialer().Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Errorf("with private allowed: %v", err)
	} else {
		c.Close()
	}
}
