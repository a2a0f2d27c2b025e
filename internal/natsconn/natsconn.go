// Package natsconn builds the options with which the worker and the
// enqueue CLI authenticate to NATS and check its servers: a credentials
// file, a CA bundle and a client certificate for mutual TLS. Both binaries
// read the same variables, and their errors name them.
package natsconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/nats-io/nats.go"
)

// The variables Security is read from.
const (
	VarCreds   = "SLUICE_NATS_CREDS"
	VarTLSCA   = "SLUICE_NATS_TLS_CA"
	VarTLSCert = "SLUICE_NATS_TLS_CERT"
	VarTLSKey  = "SLUICE_NATS_TLS_KEY"
)

// Security is how a client proves who it is to NATS and checks who the
// servers are. Every field is a file path; empty means not used.
type Security struct {
	// CredsFile is a NATS credentials file (user JWT and seed).
	CredsFile string
	// TLSCA is a PEM bundle of the CAs that sign the servers'
	// certificates. Empty means the system's roots (when TLS is used).
	TLSCA string
	// TLSCert and TLSKey are the client's PEM certificate and key for
	// mutual TLS; both or neither.
	TLSCert, TLSKey string
}

// FromEnv reads Security from the variables through getenv.
func FromEnv(getenv func(string) string) Security {
	return Security{
		CredsFile: getenv(VarCreds), TLSCA: getenv(VarTLSCA),
		TLSCert: getenv(VarTLSCert), TLSKey: getenv(VarTLSKey),
	}
}

// TLS reports whether any TLS setting is given: the connection then
// requires TLS whatever the scheme of the server URLs.
func (s Security) TLS() bool { return s.TLSCA != "" || s.TLSCert != "" || s.TLSKey != "" }

// Options checks the files and returns the nats.Options that use them.
// Every error names the variable at fault; none carries a file's contents.
func (s Security) Options() ([]nats.Option, error) {
	var opts []nats.Option
	var errs []error
	if s.CredsFile != "" {
		if err := readable(s.CredsFile); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", VarCreds, err))
		}
		opts = append(opts, nats.UserCredentials(s.CredsFile))
	}
	if !s.TLS() {
		return opts, errors.Join(errs...)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSCA != "" {
		pool, err := loadCA(s.TLSCA)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", VarTLSCA, err))
		}
		cfg.RootCAs = pool
	}
	switch {
	case s.TLSCert != "" && s.TLSKey == "":
		errs = append(errs, fmt.Errorf("%s is set but %s is not: a client certificate needs both", VarTLSCert, VarTLSKey))
	case s.TLSKey != "" && s.TLSCert == "":
		errs = append(errs, fmt.Errorf("%s is set but %s is not: a client certificate needs both", VarTLSKey, VarTLSCert))
	case s.TLSCert != "":
		cert, err := loadKeyPair(s.TLSCert, s.TLSKey)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return append(opts, nats.Secure(cfg)), nil
}

// Explain adds to a connection error what the TLS settings have to do
// with it: a server certificate no CA in SLUICE_NATS_TLS_CA signs, a
// server that closes the handshake of a client without a certificate, or a
// server that wants TLS from a client that has none configured.
func (s Security) Explain(err error) error {
	if err == nil {
		return nil
	}
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown) || errors.As(err, &verify):
		if s.TLSCA == "" {
			return fmt.Errorf("%w (the server's certificate is not signed by a system CA: set %s to the CA bundle that signs it)", err, VarTLSCA)
		}
		return fmt.Errorf("%w (the server's certificate is not signed by a CA in %s=%s)", err, VarTLSCA, s.TLSCA)
	case (errors.Is(err, nats.ErrTLS) || tlsAlert(err)) && s.TLSCert == "":
		return fmt.Errorf("%w (the server may require a client certificate: set %s and %s)", err, VarTLSCert, VarTLSKey)
	case errors.Is(err, nats.ErrSecureConnRequired) && !s.TLS():
		return fmt.Errorf("%w (set %s to the CA bundle that signs the server's certificate)", err, VarTLSCA)
	}
	return err
}

// tlsAlert reports whether err is an alert the server sent during or
// right after the handshake (such as "certificate required").
func tlsAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// loadCA reads a PEM bundle of CA certificates.
func loadCA(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// loadKeyPair reads the client certificate and its key. The errors of
// crypto/tls describe the PEM blocks, never their bytes.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", VarTLSCert, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", VarTLSKey, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s=%s and %s=%s: %w", VarTLSCert, certFile, VarTLSKey, keyFile, err)
	}
	return cert, nil
}
