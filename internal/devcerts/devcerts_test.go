package devcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/sluice-dev/sluice/internal/devcerts"
)

// TestWrite: the server certificate verifies against the CA for every
// host, as a server and as a route's client; the client certificate as a
// client only; the keys have the mode asked for and match their
// certificates; no CA key is written.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"nats-1", "nats-2", "localhost", "127.0.0.1"}
	f, err := devcerts.Write(dir, devcerts.Options{Name: "t", Hosts: hosts, KeyMode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(f.CACert())
	load := func(cert, key string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatalf("%s with %s: %v", cert, key, err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	server := load(f.ServerCert, f.ServerKey)
	for _, h := range hosts {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := server.Verify(x509.VerifyOptions{DNSName: h, Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("server certificate for %s, usage %v: %v", h, usage, err)
			}
		}
	}
	if _, err := server.Verify(x509.VerifyOptions{DNSName: "elsewhere", Roots: roots}); err == nil {
		t.Error("the server certificate is valid for a host it was not made for")
	}
	client := load(f.ClientCert, f.ClientKey)
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("the client certificate serves as a server's")
	}
	for _, key := range []string{f.ServerKey, f.ClientKey} {
		if mode := perm(t, key); mode != 0o644 {
			t.Errorf("%s: mode %v, want 0644", key, mode)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Errorf("%d files written, want ca.pem and two certificates with their keys", len(entries))
	}
	// The default mode keeps the keys to their owner.
	g, err := devcerts.Write(t.TempDir(), devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if mode := perm(t, g.ServerKey); mode != 0o600 {
		t.Errorf("default key mode %v, want 0600", mode)
	}
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
