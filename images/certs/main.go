// Command certs makes the cluster stack's TLS files
// (docker-compose.cluster.yml): a CA made on this machine, a certificate it
// signs for the NATS servers (nats-1, nats-2, nats-3, localhost and
// 127.0.0.1; also used between them on the cluster's routes) and a client
// certificate. The CA's private key is not kept. The keys are readable by
// every user (0644), because the containers read them as their own
// non-root user: keep the directory to yourself (-dir is created 0755
// inside a directory of yours; dist/ is not committed).
//
// Usage: go run ./images/certs -dir dist/cluster/certs [-hosts a,b,c] [-valid 720h] [-force]
//
// Without -force, a directory that already holds ca.pem is left as it is.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/devcerts"
)

func main() {
	dir := flag.String("dir", "dist/cluster/certs", "directory for ca.pem, server.pem, server-key.pem, client.pem, client-key.pem")
	hosts := flag.String("hosts", "nats-1,nats-2,nats-3,localhost,127.0.0.1", "names and addresses of the servers' certificate, comma-separated")
	valid := flag.Duration("valid", 30*24*time.Hour, "validity of every certificate")
	force := flag.Bool("force", false, "replace existing files")
	flag.Parse()
	if _, err := os.Stat(filepath.Join(*dir, "ca.pem")); err == nil && !*force {
		fmt.Printf("certs: %s already holds a CA (use -force to replace it)\n", *dir)
		return
	}
	files, err := devcerts.Write(*dir, devcerts.Options{
		Name: "sluice cluster", Hosts: strings.Split(*hosts, ","), ValidFor: *valid, KeyMode: 0o644,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "certs:", err)
		os.Exit(1)
	}
	fmt.Printf("certs: CA %s, server certificate %s for %s, client certificate %s (valid %s)\n",
		files.CA, files.ServerCert, *hosts, files.ClientCert, *valid)
}
