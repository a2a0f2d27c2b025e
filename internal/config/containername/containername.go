// Package containername finds the name a container network gives this
// container: Docker's embedded DNS answers a reverse lookup of a
// container's address with "<container name>.<network>.", and compose
// names containers by project, service and replica. It asks that DNS
// server directly, because Go's resolver answers a reverse lookup from
// /etc/hosts first, where Docker writes only the container id.
package containername

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Lookup returns the name DNS gives host's address (its first label), or
// "" when there is none (or it is host itself) within about a second.
func Lookup(host string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return ""
	}
	servers := nameservers("/etc/resolv.conf")
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.IsLoopback() {
			continue
		}
		for _, srv := range servers {
			name, err := PTR(ctx, srv, ip)
			if err != nil {
				continue
			}
			if first, _, _ := strings.Cut(name, "."); first != "" && first != host {
				return first
			}
		}
	}
	return ""
}

// nameservers lists the nameserver addresses of a resolv.conf file.
func nameservers(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			out = append(out, fields[1])
		}
	}
	return out
}

// PTR asks the DNS server at server (an address, port 53 when none is
// given) over UDP for the PTR name of ip.
func PTR(ctx context.Context, server string, ip netip.Addr) (string, error) {
	qname, err := dnsmessage.NewName(reverseName(ip))
	if err != nil {
		return "", err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: uint16(time.Now().UnixNano()), RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return "", err
	}
	if err := b.Question(dnsmessage.Question{Name: qname, Type: dnsmessage.TypePTR, Class: dnsmessage.ClassINET}); err != nil {
		return "", err
	}
	query, err := b.Finish()
	if err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(server); err != nil {
		server = net.JoinHostPort(server, "53")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write(query); err != nil {
		return "", err
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	var p dnsmessage.Parser
	if _, err := p.Start(buf[:n]); err != nil {
		return "", err
	}
	if err := p.SkipAllQuestions(); err != nil {
		return "", err
	}
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return "", errors.New("containername: no PTR answer")
		}
		if h.Type != dnsmessage.TypePTR {
			if err := p.SkipAnswer(); err != nil {
				return "", err
			}
			continue
		}
		r, err := p.PTRResource()
		if err != nil {
			return "", err
		}
		return r.PTR.String(), nil
	}
}

// reverseName is the in-addr.arpa (or ip6.arpa) name of ip.
func reverseName(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is4() {
		b := ip.As4()
		return strings.Join([]string{strconv.Itoa(int(b[3])), strconv.Itoa(int(b[2])), strconv.Itoa(int(b[1])), strconv.Itoa(int(b[0]))}, ".") + ".in-addr.arpa."
	}
	const hex = "0123456789abcdef"
	b := ip.As16()
	var sb strings.Builder
	for i := len(b) - 1; i >= 0; i-- {
		sb.WriteByte(hex[b[i]&0xf])
		sb.WriteByte('.')
		sb.WriteByte(hex[b[i]>>4])
		sb.WriteByte('.')
	}
	return sb.String() + "ip6.arpa."
}
