package artifacts

import (
	"fmt"
	"net/netip"
	"syscall"
)

// nonPublic4 lists IPv4 ranges that netip's predicates do not cover but a
// download must not reach either.
var nonPublic4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, includes broadcast
}

// Prefixes of IPv6 addresses that embed an IPv4 address, which is checked
// in turn: a NAT64 or 6to4 gateway would forward to it.
var (
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalPrefix = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFourPrefix  = netip.MustParsePrefix("2002::/16")
	v4CompatPrefix   = netip.MustParsePrefix("::/96")
	siteLocalPrefix  = netip.MustParsePrefix("fec0::/10")
)

// isPublic reports whether a is an address a download may connect to:
// not loopback, private (RFC 1918, fc00::/7), link-local, unspecified,
// multicast, shared (100.64.0.0/10), reserved or documentation space, nor
// an IPv6 form (IPv4-mapped, IPv4-compatible, NAT64, 6to4) of one of those.
func isPublic(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	if a.Is6() {
		switch {
		case nat64Prefix.Contains(a), v4CompatPrefix.Contains(a):
			b := a.As16()
			return isPublic(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixToFourPrefix.Contains(a):
			b := a.As16()
			return isPublic(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		case nat64LocalPrefix.Contains(a), siteLocalPrefix.Contains(a):
			return false
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return false
	}
	if a.Is4() {
		for _, p := range nonPublic4 {
			if p.Contains(a) {
				return false
			}
		}
	}
	return true
}

// dialGuard returns a net.Dialer Control function that refuses to connect
// to an address allowed rejects. Control sees the address after DNS
// resolution, for every connection including those of redirects, so
// neither a DNS name nor a redirect can reach a refused address.
func dialGuard(allowed func(netip.Addr) bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot parse %s address %q", ErrPrivateAddress, network, address)
		}
		if !allowed(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr().Unmap())
		}
		return nil
	}
}

// IsPublicAddr reports whether a is an address an outbound request of
// sluice may connect to (see isPublic). Webhook deliveries use the same
// rule as downloads.
func IsPublicAddr(a netip.Addr) bool { return isPublic(a) }

// PublicOnly is a net.Dialer Control function that refuses every address
// IsPublicAddr rejects, with an error matching ErrPrivateAddress. It sees
// the address after DNS resolution, so a name that resolves to a private
// address (DNS rebinding) is refused at connect time too.
func PublicOnly(network, address string, c syscall.RawConn) error {
	return dialGuard(isPublic)(network, address, c)
}
