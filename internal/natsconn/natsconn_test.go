package natsconn_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestOptionsErrorsNameTheVariable: a half client certificate, a missing
// file and a file that is not what it should be are errors naming the
// variable, and no error carries a file's contents.
func TestOptionsErrorsNameTheVariable(t *testing.T) {
	files := testenv.NewTLSFiles(t, "good")
	dir := t.TempDir()
	const secret = "SECRET-file-contents-7c1e"
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not pem "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name string
		sec  natsconn.Security
		want []string
	}{
		{"cert without key", natsconn.Security{TLSCert: files.ClientCert}, []string{"SLUICE_NATS_TLS_CERT", "SLUICE_NATS_TLS_KEY"}},
		{"key without cert", natsconn.Security{TLSKey: files.ClientKey}, []string{"SLUICE_NATS_TLS_KEY", "SLUICE_NATS_TLS_CERT"}},
		{"missing CA", natsconn.Security{TLSCA: missing}, []string{"SLUICE_NATS_TLS_CA", missing}},
		{"CA not PEM", natsconn.Security{TLSCA: junk}, []string{"SLUICE_NATS_TLS_CA", "no PEM certificate"}},
		{"missing cert", natsconn.Security{TLSCert: missing, TLSKey: files.ClientKey}, []string{"SLUICE_NATS_TLS_CERT", missing}},
		{"missing key", natsconn.Security{TLSCert: files.ClientCert, TLSKey: missing}, []string{"SLUICE_NATS_TLS_KEY", missing}},
		{"key not PEM", natsconn.Security{TLSCert: files.ClientCert, TLSKey: junk}, []string{"SLUICE_NATS_TLS_CERT", "SLUICE_NATS_TLS_KEY"}},
		{"key of another cert", natsconn.Security{TLSCert: files.ClientCert, TLSKey: files.ServerKey}, []string{"SLUICE_NATS_TLS_KEY", "does not match"}},
		{"missing creds", natsconn.Security{CredsFile: missing}, []string{"SLUICE_NATS_CREDS", missing}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.sec.Options()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("error carries file contents: %q", err)
			}
		})
	}
	if opts, err := (natsconn.Security{}).Options(); err != nil || len(opts) != 0 {
		t.Errorf("no settings: %d options, %v", len(opts), err)
	}
}

func connect(t *testing.T, url string, sec natsconn.Security) error {
	t.Helper()
	opts, err := sec.Options()
	if err != nil {
		t.Fatalf("options: %v", err)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return sec.Explain(err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		return sec.Explain(err)
	}
	if !nc.TLSRequired() {
		t.Error("connected without TLS")
	}
	return nil
}

// TestTLS connects to a real server with TLS: the right CA is accepted, a
// wrong CA and no TLS settings are refused with errors that say which
// variable to fix.
func TestTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t, "good")
	other := testenv.NewTLSFiles(t, "other")
	srv := testenv.StartNATSWith(t, testenv.NATSOptions{TLS: files})
	if err := connect(t, srv.URL, natsconn.Security{TLSCA: files.CA}); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	err := connect(t, srv.URL, natsconn.Security{TLSCA: other.CA})
	if err == nil || !strings.Contains(err.Error(), "not signed by a CA in SLUICE_NATS_TLS_CA="+other.CA) {
		t.Errorf("wrong CA: %v", err)
	}
	err = connect(t, srv.URL, natsconn.Security{})
	if err == nil || !strings.Contains(err.Error(), "SLUICE_NATS_TLS_CA") {
		t.Errorf("no TLS settings: %v", err)
	}
}

// TestMutualTLS: a server that verifies clients accepts the client
// certificate its CA signed and refuses a client without one or with one
// another CA signed.
func TestMutualTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t, "good")
	other := testenv.NewTLSFiles(t, "other")
	srv := testenv.StartNATSWith(t, testenv.NATSOptions{TLS: files, MutualTLS: true})
	if err := connect(t, srv.URL, natsconn.Security{TLSCA: files.CA, TLSCert: files.ClientCert, TLSKey: files.ClientKey}); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if err := connect(t, srv.URL, natsconn.Security{TLSCA: files.CA}); err == nil ||
		!strings.Contains(err.Error(), "SLUICE_NATS_TLS_CERT and SLUICE_NATS_TLS_KEY") {
		t.Errorf("without a client certificate: %v", err)
	}
	if err := connect(t, srv.URL, natsconn.Security{TLSCA: files.CA, TLSCert: other.ClientCert, TLSKey: other.ClientKey}); err == nil {
		t.Error("connected with a client certificate another CA signed")
	}
}
