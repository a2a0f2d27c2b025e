package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// DefaultPostgresBin is where Debian's postgresql package puts the server's
// binaries (initdb, postgres); FindPostgresBin looks for the newest version
// there.
const DefaultPostgresBin = "/usr/lib/postgresql"

// FindPostgresBin returns the directory holding initdb and postgres: dir
// itself when it has them, else the newest /usr/lib/postgresql/<version>/bin
// under it. The error says how to install them.
func FindPostgresBin(dir string) (string, error) {
	has := func(d string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if has(dir) {
		return dir, nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "bin"))
	slices.SortFunc(matches, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, m := range matches {
		if has(m) {
			return m, nil
		}
	}
	return "", fmt.Errorf("no Postgres server binaries (initdb, postgres) in %s or %s/<version>/bin: install Debian's postgresql package (apt-get install postgresql)", dir, dir)
}

// postgres is a private Postgres server for the River peer: a fresh cluster
// in a temporary directory, listening on a loopback port only, trust
// authentication from 127.0.0.1 only, durable like a real deployment
// (fsync, synchronous_commit and full_page_writes on, Postgres's defaults).
type postgres struct {
	proc *process
	dir  string
	// URL is the "postgres" database as the superuser "sluice".
	url  string
	port int
}

// pgConf is appended to the cluster's postgresql.conf. Everything not named
// here is Postgres's default. track_commit_timestamp lets the peer's driver
// read when each job's completion was committed.
const pgConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = ''
fsync = on
synchronous_commit = on
full_page_writes = on
track_commit_timestamp = on
`

// startPostgres initialises a cluster under a new temporary directory and
// starts the server, logging to logDir. Postgres refuses to run as root: as
// root, the cluster belongs to and the server runs as the "postgres" user
// (which Debian's package creates). The server is ready once a client can
// connect; "riverpeer db" waits for that.
func startPostgres(ctx context.Context, bin, logDir string) (_ *postgres, err error) {
	var attr procAttr
	dir, err := os.MkdirTemp("", "sluice-bench-pg-")
	if err != nil {
		return nil, err
	}
	pg := &postgres{dir: dir}
	defer func() {
		if err != nil {
			pg.stop()
		}
	}()
	attr.Dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and Postgres will not: no user \"postgres\" to run it as (%w); Debian's postgresql package creates it", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		attr.Cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "sluice", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	attr.apply(initdb)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, portStr, _ := net.SplitHostPort(addr)
	pg.port, _ = strconv.Atoi(portStr)
	if err := appendFile(filepath.Join(data, "postgresql.conf"), fmt.Sprintf(pgConf, pg.port)); err != nil {
		return nil, err
	}
	// Only TCP from 127.0.0.1; no Unix socket, no other address.
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte("host all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
		return nil, err
	}
	if attr.Cred != nil {
		if err := os.Chown(filepath.Join(data, "pg_hba.conf"), int(attr.Cred.Uid), int(attr.Cred.Gid)); err != nil {
			return nil, err
		}
	}
	if pg.proc, err = startProcessAs("postgres", filepath.Join(bin, "postgres"), []string{"-D", data}, nil, logDir, &attr); err != nil {
		return nil, err
	}
	pg.url = fmt.Sprintf("postgres://sluice@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	return pg, nil
}

// dbURL is the URL of database name on the server.
func (pg *postgres) dbURL(name string) string {
	return fmt.Sprintf("postgres://sluice@127.0.0.1:%d/%s?sslmode=disable", pg.port, name)
}

// cpu is the server's CPU time so far: the postmaster, its live children
// and every backend it has reaped.
func (pg *postgres) cpu() (time.Duration, error) { return treeCPU(pg.proc.pid()) }

// stop shuts the server down (SIGINT, Postgres's fast shutdown) and deletes
// the cluster.
func (pg *postgres) stop() {
	if pg.proc != nil {
		pg.proc.stopWith(syscall.SIGINT, 30*time.Second)
	}
	_ = os.RemoveAll(pg.dir)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}
