package testenv_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// echo serves lines back until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, line string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(got), err
}

func TestProxyCountsCutsAndHeals(t *testing.T) {
	t.Parallel()
	p := testenv.StartProxy(t, echo(t), "PING.")
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "PING.a PING.b"); err != nil || got != "PING.a PING.b" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	if n := p.Count(); n != 2 {
		t.Errorf("counted %d, want 2", n)
	}
	p.Cut()
	if _, err := roundTrip(c, "PING.c"); err == nil {
		t.Error("a cut proxy still carries an open connection")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		if _, err := roundTrip(c2, "x"); err == nil {
			t.Error("a cut proxy carries a new connection")
		}
		c2.Close()
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	// The pattern split across two writes is still counted once.
	if _, err := c3.Write([]byte("PI")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the halves travel apart
	if got, err := roundTrip(c3, "NG.d"); err != nil || got != "PING.d" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
	if n := p.Count(); n != 3 {
		t.Errorf("counted %d, want 3", n)
	}
}
