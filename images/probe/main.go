// Command probe is the health check built into sluice's FROM scratch
// images, which have no shell and no curl. It checks every address given
// and exits 0 only when all of them answer within the timeout:
//
//	probe http://127.0.0.1:8222/healthz   a GET must return a 2xx status
//	probe tcp://127.0.0.1:8080            a TCP connection must open
//
// It prints one line per failed address to stderr (Docker keeps the last
// lines of a failing check in `docker inspect`).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 3*time.Second, "time allowed for each address")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: probe [-timeout 3s] http://host:port/path | tcp://host:port ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	failed := false
	for _, addr := range flag.Args() {
		if err := check(addr, *timeout); err != nil {
			fmt.Fprintf(os.Stderr, "probe %s: %v\n", addr, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// check probes one address.
func check(addr string, timeout time.Duration) error {
	u, err := url.Parse(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	switch u.Scheme {
	case "tcp":
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return err
		}
		return conn.Close()
	case "http", "https":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	default:
		return fmt.Errorf("unsupported scheme %q (want http, https or tcp)", u.Scheme)
	}
}
