package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/sluice-dev/sluice/internal/devcerts"
)

// TLSFiles is a CA made for one test, a server certificate it signs for
// 127.0.0.1 and localhost, and a client certificate it signs; every file is
// PEM in the test's temporary directory.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	pool                                             *x509.CertPool
}

// NewTLSFiles makes a CA named name and the certificates it signs.
func NewTLSFiles(t testing.TB, name string) *TLSFiles {
	t.Helper()
	files, err := devcerts.Write(t.TempDir(), devcerts.Options{Name: name + " test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &TLSFiles{CA: files.CA, ServerCert: files.ServerCert, ServerKey: files.ServerKey,
		ClientCert: files.ClientCert, ClientKey: files.ClientKey, pool: x509.NewCertPool()}
	f.pool.AddCert(files.CACert())
	return f
}

// ServerConfig is the server side: its certificate, and with mutual a
// required client certificate signed by the CA.
func (f *TLSFiles) ServerConfig(t testing.TB, mutual bool) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if mutual {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, f.pool
	}
	return cfg
}

// ClientConfig is the client side: the CA and the client certificate.
func (f *TLSFiles) ClientConfig(t testing.TB) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: f.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}
