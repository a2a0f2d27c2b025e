// Package devcerts makes a throw-away certificate authority and the
// certificates it signs, as PEM files: a server certificate (for TLS
// towards clients and between cluster routes) and a client certificate
// (for mutual TLS). The test suites and the cluster stack
// (images/certs, docker-compose.cluster.yml) use it; the CA's private key
// is never written, so nothing can sign another certificate afterwards.
package devcerts

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Options says what to make. The zero value of each field takes its
// default.
type Options struct {
	// Name names the CA ("<Name> CA"). Defaults to "sluice dev".
	Name string
	// Hosts are the DNS names and IP addresses the server certificate is
	// valid for. Defaults to localhost and 127.0.0.1.
	Hosts []string
	// ValidFor is how long every certificate is valid from now. Defaults
	// to 24 hours.
	ValidFor time.Duration
	// KeyMode is the file mode of the private keys. Defaults to 0600; a
	// directory mounted into containers that run as another user needs
	// 0644.
	KeyMode os.FileMode
}

// Files are the paths of what Write made.
type Files struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	caCert                *x509.Certificate
	caKey                 *ecdsa.PrivateKey
}

// Write makes the CA, the server and the client certificates in dir
// (created when missing): ca.pem, server.pem, server-key.pem, client.pem
// and client-key.pem. Existing files are replaced.
func Write(dir string, o Options) (*Files, error) {
	o.Name = cmp.Or(o.Name, "sluice dev")
	if len(o.Hosts) == 0 {
		o.Hosts = []string{"localhost", "127.0.0.1"}
	}
	o.ValidFor = cmp.Or(o.ValidFor, 24*time.Hour)
	o.KeyMode = cmp.Or(o.KeyMode, 0o600)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: o.Name + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(o.ValidFor),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	f := &Files{CA: filepath.Join(dir, "ca.pem"), caKey: key}
	if f.caCert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	// The servers' certificate also authenticates them to each other on
	// the cluster's routes, where each is the other's client.
	f.ServerCert, f.ServerKey, err = f.issue(dir, "server", o,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	f.ClientCert, f.ClientKey, err = f.issue(dir, "client", o, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// CACert is the CA's certificate.
func (f *Files) CACert() *x509.Certificate { return f.caCert }

// issue signs a certificate named cn for o.Hosts.
func (f *Files) issue(dir, cn string, o Options, usage []x509.ExtKeyUsage) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(o.ValidFor),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.caCert, &key.PublicKey, f.caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	return certFile, keyFile, errors.Join(
		writePEM(certFile, "CERTIFICATE", der, 0o644),
		writePEM(keyFile, "PRIVATE KEY", keyDER, o.KeyMode))
}

// writePEM replaces path with one PEM block, with mode perm.
func writePEM(path, typ string, der []byte, perm os.FileMode) error {
	_ = os.Remove(path) // WriteFile keeps an existing file's mode
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Chmod(path, perm) // regardless of the umask
}
