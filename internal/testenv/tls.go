package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles is a CA made for one test, a server certificate it signs for
// 127.0.0.1 and localhost, and a client certificate it signs; every file is
// PEM in the test's temporary directory.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	ca                                               *x509.Certificate
	caKey                                            *ecdsa.PrivateKey
	pool                                             *x509.CertPool
}

// NewTLSFiles makes a CA named name and the certificates it signs.
func NewTLSFiles(t testing.TB, name string) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	f := &TLSFiles{CA: filepath.Join(dir, "ca.pem"), ca: ca, caKey: key, pool: x509.NewCertPool()}
	f.pool.AddCert(ca)
	writePEM(t, f.CA, "CERTIFICATE", der)
	f.ServerCert, f.ServerKey = f.issue(t, dir, "server", x509.ExtKeyUsageServerAuth)
	f.ClientCert, f.ClientKey = f.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	return f
}

// issue signs a certificate for 127.0.0.1 and localhost.
func (f *TLSFiles) issue(t testing.TB, dir, cn string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca, &key.PublicKey, f.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
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

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
