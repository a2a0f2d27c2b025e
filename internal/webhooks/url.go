package webhooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/artifacts"
)

// PolicyOf is the policy of a worker or CLI: private destinations only
// with SLUICE_ALLOW_PRIVATE_URLS; plain http to any address only with
// SLUICE_DEV, to private ones also with SLUICE_ALLOW_PRIVATE_URLS (both
// for development and tests only); https in production.
func PolicyOf(allowPrivate, dev bool) URLPolicy {
	return URLPolicy{AllowPrivate: allowPrivate, AllowHTTP: dev}
}

// ErrRefusedURL matches every error of CheckURL.
var ErrRefusedURL = errors.New("webhook URL refused")

// URLPolicy says which webhook destinations are allowed.
type URLPolicy struct {
	// AllowPrivate allows loopback, private and other non-public
	// destinations (SLUICE_ALLOW_PRIVATE_URLS).
	AllowPrivate bool
	// AllowHTTP allows plain http to any address (development,
	// SLUICE_DEV). Without it, plain http reaches only the non-public
	// addresses AllowPrivate allows, checked at connect time too, so
	// that signed events never cross to a public host in the clear.
	AllowHTTP bool
}

// CheckURL refuses a webhook URL that is not an absolute http(s) URL with a
// host, carries credentials, is plain http while the policy wants https, or
// names a non-public address (an IP literal or localhost) while the policy
// does not allow private ones. A name is checked again when a delivery
// connects (artifacts.PublicOnly), since DNS can change its answer.
func (p URLPolicy) CheckURL(raw string) error {
	refuse := func(why string) error { return fmt.Errorf("%w: %s", ErrRefusedURL, why) }
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return refuse("not an absolute URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (p.AllowHTTP || p.AllowPrivate && !publicLiteral(u.Hostname())):
	case u.Scheme == "http":
		return refuse("must be https (plain http only with SLUICE_DEV, or to a private address with SLUICE_ALLOW_PRIVATE_URLS)")
	default:
		return refuse(fmt.Sprintf("scheme %q, want https", u.Scheme))
	}
	host := u.Hostname()
	if host == "" {
		return refuse("no host")
	}
	if u.User != nil {
		return refuse("credentials in the URL are not allowed")
	}
	if p.AllowPrivate {
		return nil
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return refuse(host + " is a loopback name (allowed only with SLUICE_ALLOW_PRIVATE_URLS)")
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		if !artifacts.IsPublicAddr(a) {
			return refuse(a.String() + " is not a public address (allowed only with SLUICE_ALLOW_PRIVATE_URLS)")
		}
		return nil
	}
	// 2130706433, 0x7f000001, 0177.0.0.1 and 127.1 are IPv4 addresses to
	// some resolvers; no public name has a last label starting with a
	// digit (top-level domains are letters).
	if last := lower[strings.LastIndex(lower, ".")+1:]; last == "" || (last[0] >= '0' && last[0] <= '9') {
		return refuse(host + " is not a host name nor an IP address in standard form")
	}
	return nil
}

// errPlainPublic refuses plain http to a public address.
var errPlainPublic = errors.New("plain http to a public address refused (https only outside SLUICE_DEV)")

// publicLiteral reports whether host is an IP address that is public.
func publicLiteral(host string) bool {
	a, err := netip.ParseAddr(strings.TrimSuffix(host, "."))
	return err == nil && artifacts.IsPublicAddr(a)
}

// dialer is the dialer of deliveries, plain http or https: with
// PublicOnly unless private destinations are allowed; for plain http
// without AllowHTTP, refusing every public address instead.
func (p URLPolicy) dialer(plain bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	switch {
	case plain && !p.AllowHTTP:
		d.Control = func(_, address string, _ syscall.RawConn) error {
			if ap, err := netip.ParseAddrPort(address); err != nil || artifacts.IsPublicAddr(ap.Addr()) {
				return errPlainPublic
			}
			return nil
		}
	case !p.AllowPrivate:
		d.Control = artifacts.PublicOnly
	}
	return d
}
