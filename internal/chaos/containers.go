package chaos

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/devcerts"
)

// Containers runs a scenario on containers instead of processes: three
// nats-server containers clustered with JetStream (R3, sync_interval:
// always, TLS towards clients and mutual TLS between them, the
// least-privilege users of config/nats/users.conf: the configuration of
// docker-compose.cluster.yml), the Versity S3 gateway and the workers, each
// in a container of its own on a private Docker network. The simulators stay
// in the harness, which the workers reach on the Docker host.
//
// The faults change with it: no S3 outage and no single-server restart,
// but a NATS node killed with SIGKILL and started again, a node paused
// (docker pause) and unpaused, a node restarted gracefully, and one node
// with one worker cut off from the rest (docker network disconnect: the
// two keep only a network of their own) and connected again; a worker is
// killed with SIGKILL every KillEvery and started again.
type Containers struct {
	// Name prefixes every container and network of the run. Defaults to
	// "sluice-chaos".
	Name string
	// NATSConfig is the directory holding cluster-tls.conf and users.conf.
	// Defaults to config/nats (the harness runs from the repository).
	NATSConfig string
	// NATSImage, S3Image and WorkerImage are the images to run. Default
	// to sluice-nats:dev, sluice-versitygw:dev and sluice-worker:dev.
	NATSImage, S3Image, WorkerImage string
	// NodeDownFor is how long a killed node stays down; PauseFor how long
	// a node stays paused; PartitionFor how long the partition lasts.
	// Default to 5s, 10s and 20s.
	NodeDownFor, PauseFor, PartitionFor time.Duration
}

func (c *Containers) withDefaults() {
	c.Name = cmp.Or(c.Name, "sluice-chaos")
	c.NATSConfig = cmp.Or(c.NATSConfig, "config/nats")
	c.NATSImage = cmp.Or(c.NATSImage, "sluice-nats:dev")
	c.S3Image = cmp.Or(c.S3Image, "sluice-versitygw:dev")
	c.WorkerImage = cmp.Or(c.WorkerImage, "sluice-worker:dev")
	c.NodeDownFor = cmp.Or(c.NodeDownFor, 5*time.Second)
	c.PauseFor = cmp.Or(c.PauseFor, 10*time.Second)
	c.PartitionFor = cmp.Or(c.PartitionFor, 20*time.Second)
}

// The fault types of a container run.
const (
	FaultNodeKill    = "node_kill"    // kill -9 the SLUICE_JOBS leader, start it again
	FaultNodePause   = "node_pause"   // docker pause the SLUICE_STATE leader, unpause
	FaultNodeRestart = "node_restart" // docker restart (SIGTERM) the SLUICE_EVENTS leader
	FaultPartition   = "partition"    // nats-3 and the last worker cut off, reconnected
	FaultNATSRestart = "nats_restart" // the single server of a process run restarted
	FaultS3Outage    = "s3_outage"    // the store of a process run taken away
)

// hostAlias is how the containers reach the harness's simulators.
const hostAlias = "host.docker.internal"

// partitionNode is the node cut off with a worker by FaultPartition.
const partitionNode = "nats-3"

// dockerCmd runs the docker CLI and returns its trimmed output. The error
// carries the output (never an environment: secrets go in env files).
func dockerCmd(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args[:min(len(args), 3)], " "), err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// cluster is a container run's NATS nodes, S3 gateway and networks.
type cluster struct {
	c          Containers
	dir        string
	net, side  string // the private network; the partitioned pair's own
	certs      *devcerts.Files
	passwords  map[string]string
	natsPorts  []int // host ports of nats-1..3
	s3Port     int
	mu         sync.Mutex
	containers []string // every container started, for the teardown
}

func (cl *cluster) name(s string) string { return cl.c.Name + "-" + s }

// startCluster makes the TLS files and passwords, the networks, the NATS
// nodes and the S3 gateway, and waits until every node is healthy.
func startCluster(ctx context.Context, cfg Config) (_ *cluster, err error) {
	c := *cfg.Containers
	c.withDefaults()
	cl := &cluster{c: c, dir: cfg.Dir, passwords: map[string]string{}}
	defer func() {
		if err != nil {
			cl.close()
		}
	}()
	if _, err := dockerCmd(ctx, "version", "-f", "{{.Server.Version}}"); err != nil {
		return nil, fmt.Errorf("the container run needs Docker: %w", err)
	}
	for _, img := range []string{c.NATSImage, c.S3Image, c.WorkerImage} {
		if _, err := dockerCmd(ctx, "image", "inspect", "-f", "{{.Id}}", img); err != nil {
			return nil, fmt.Errorf("image %s is missing (make images builds it; nothing is pulled): %w", img, err)
		}
	}
	conf, err := filepath.Abs(c.NATSConfig)
	if err != nil {
		return nil, err
	}
	// The containers run as their own user: they must read the files.
	if err := os.Chmod(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	cl.certs, err = devcerts.Write(filepath.Join(cfg.Dir, "certs"), devcerts.Options{
		Name: c.Name, Hosts: []string{"nats-1", "nats-2", "nats-3", "localhost", "127.0.0.1"}, KeyMode: 0o644,
	})
	if err != nil {
		return nil, err
	}
	for _, user := range []string{"producer", "worker", "admin"} {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		cl.passwords[user] = user + "-" + hex.EncodeToString(b)
	}
	cl.net, cl.side = cl.name("net"), cl.name("side")
	if _, err := dockerCmd(ctx, "network", "create", cl.net); err != nil {
		return nil, err
	}
	// The partitioned pair's own network reaches nothing else (internal:
	// no route out, not even to the simulators).
	if _, err := dockerCmd(ctx, "network", "create", "--internal", cl.side); err != nil {
		return nil, err
	}
	natsEnv, err := cl.envFile("nats.env", map[string]string{
		"PRODUCER_PASSWORD": cl.passwords["producer"], "WORKER_PASSWORD": cl.passwords["worker"], "ADMIN_PASSWORD": cl.passwords["admin"],
	})
	if err != nil {
		return nil, err
	}
	for i := range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cl.natsPorts = append(cl.natsPorts, port)
		node := fmt.Sprintf("nats-%d", i+1)
		args := []string{"run", "-d", "--name", cl.name(node), "--network", cl.net, "--network-alias", node,
			"--env-file", natsEnv, "-e", "SERVER_NAME=" + node,
			"-v", filepath.Join(conf, "cluster-tls.conf") + ":/etc/nats/cluster-tls.conf:ro",
			"-v", filepath.Join(conf, "users.conf") + ":/etc/nats/users.conf:ro",
			"-v", filepath.Dir(cl.certs.CA) + ":/etc/nats/certs:ro",
			"-p", fmt.Sprintf("127.0.0.1:%d:4222", port),
			c.NATSImage, "--config", "/etc/nats/cluster-tls.conf"}
		if err := cl.run(ctx, cl.name(node), args); err != nil {
			return nil, err
		}
	}
	if _, err := dockerCmd(ctx, "network", "connect", "--alias", partitionNode, cl.side, cl.name(partitionNode)); err != nil {
		return nil, err
	}
	if cl.s3Port, err = freePort(); err != nil {
		return nil, err
	}
	s3Env, err := cl.envFile("s3.env", map[string]string{"ROOT_ACCESS_KEY_ID": s3AccessKeyID, "ROOT_SECRET_ACCESS_KEY": s3Secret, "VGW_HEALTH": "/health"})
	if err != nil {
		return nil, err
	}
	if err := cl.run(ctx, cl.name("s3"), []string{"run", "-d", "--name", cl.name("s3"), "--network", cl.net, "--network-alias", "s3",
		"--env-file", s3Env, "-p", fmt.Sprintf("127.0.0.1:%d:7070", cl.s3Port), c.S3Image, "--quiet", "posix", "/data"}); err != nil {
		return nil, err
	}
	names := []string{cl.name("s3")}
	for i := range 3 {
		names = append(names, cl.name(fmt.Sprintf("nats-%d", i+1)))
	}
	return cl, cl.awaitHealthy(ctx, 2*time.Minute, names...)
}

// run starts a container and remembers it for the teardown.
func (cl *cluster) run(ctx context.Context, name string, args []string) error {
	cl.mu.Lock()
	cl.containers = append(cl.containers, name)
	cl.mu.Unlock()
	_, err := dockerCmd(ctx, args...)
	return err
}

// envFile writes vars into the run's directory, readable by its owner only,
// and returns its path.
func (cl *cluster) envFile(name string, vars map[string]string) (string, error) {
	var b strings.Builder
	for k, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	path := filepath.Join(cl.dir, name)
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// awaitHealthy waits until every named container's health check passes.
func (cl *cluster) awaitHealthy(ctx context.Context, within time.Duration, names ...string) error {
	deadline := time.Now().Add(within)
	for {
		pending := ""
		for _, n := range names {
			st, err := dockerCmd(ctx, "inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}", n)
			if err != nil || (st != "healthy" && st != "running") {
				pending = n + " (" + cmp.Or(st, fmt.Sprint(err)) + ")"
				break
			}
		}
		if pending == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become healthy within %s", pending, within)
		}
		if err := backoff.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// adminURL lists every node's host port, as the administrator.
func (cl *cluster) adminURL() string {
	var urls []string
	for _, p := range cl.natsPorts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(urls, ",")
}

// adminOptions authenticate the harness as admin over TLS.
func (cl *cluster) adminOptions() []nats.Option {
	return []nats.Option{nats.UserInfo("admin", cl.passwords["admin"]), nats.RootCAs(cl.certs.CA)}
}

// workerNATSURL is every node as the workers reach them, as user worker.
func (cl *cluster) workerNATSURL() string {
	var urls []string
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("nats://worker:%s@nats-%d:4222", cl.passwords["worker"], i+1))
	}
	return strings.Join(urls, ",")
}

// leader returns the node leading stream, e.g. "nats-2".
func leader(ctx context.Context, js jetstream.JetStream, stream string) (string, error) {
	for {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := js.Stream(ictx, stream)
		cancel()
		if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" {
			return s.CachedInfo().Cluster.Leader, nil
		}
		if err := backoff.Sleep(ctx, 500*time.Millisecond); err != nil {
			return "", fmt.Errorf("leader of %s: %w", stream, err)
		}
	}
}

// killNode kills the node with SIGKILL, waits down and starts it again.
func (cl *cluster) killNode(ctx context.Context, node string) error {
	if _, err := dockerCmd(ctx, "kill", "-s", "KILL", cl.name(node)); err != nil {
		return err
	}
	_ = backoff.Sleep(ctx, cl.c.NodeDownFor)
	_, err := dockerCmd(context.WithoutCancel(ctx), "start", cl.name(node))
	return err
}

// pauseNode freezes the node's processes for PauseFor.
func (cl *cluster) pauseNode(ctx context.Context, node string) error {
	if _, err := dockerCmd(ctx, "pause", cl.name(node)); err != nil {
		return err
	}
	_ = backoff.Sleep(ctx, cl.c.PauseFor)
	_, err := dockerCmd(context.WithoutCancel(ctx), "unpause", cl.name(node))
	return err
}

// restartNode stops the node (SIGTERM, 10s grace) and starts it again.
func (cl *cluster) restartNode(ctx context.Context, node string) error {
	_, err := dockerCmd(ctx, "restart", "-t", "10", cl.name(node))
	return err
}

// partition cuts partitionNode and the worker container off the private
// network for PartitionFor: the two keep only their own network, where
// they see each other and nothing else. Then it connects them again.
func (cl *cluster) partition(ctx context.Context, worker string) error {
	node := cl.name(partitionNode)
	var errs []error
	for _, n := range []string{node, worker} {
		if _, err := dockerCmd(ctx, "network", "disconnect", cl.net, n); err != nil {
			errs = append(errs, err)
		}
	}
	_ = backoff.Sleep(ctx, cl.c.PartitionFor)
	ctx = context.WithoutCancel(ctx)
	if _, err := dockerCmd(ctx, "network", "connect", "--alias", partitionNode, cl.net, node); err != nil {
		errs = append(errs, err)
	}
	if _, err := dockerCmd(ctx, "network", "connect", cl.net, worker); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// close removes every container (with its anonymous volumes) and both
// networks.
func (cl *cluster) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl.mu.Lock()
	names := append([]string(nil), cl.containers...)
	cl.mu.Unlock()
	if len(names) > 0 {
		_, _ = dockerCmd(ctx, append([]string{"rm", "-f", "-v"}, names...)...)
	}
	for _, n := range []string{cl.net, cl.side} {
		if n != "" {
			_, _ = dockerCmd(ctx, "network", "rm", n)
		}
	}
}

// containerFleet runs the workers as containers, one per slot, named
// <Name>-worker-<i>; a kill is docker kill -s KILL, and the same container
// is started again (its log goes on).
type containerFleet struct {
	cl      *cluster
	envFile string
	logDir  string
	n       int
	tally
}

func newContainerFleet(cl *cluster, env []string, logDir string, n int) (*containerFleet, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	path, err := cl.envFile("worker.env", vars)
	if err != nil {
		return nil, err
	}
	return &containerFleet{cl: cl, envFile: path, logDir: logDir, n: n}, nil
}

func (f *containerFleet) container(i int) string { return f.cl.name(fmt.Sprintf("worker-%d", i)) }

// partitioned is the worker cut off with partitionNode: the last one.
func (f *containerFleet) partitioned() string { return f.container(f.n - 1) }

func (f *containerFleet) start(i int) error {
	ctx := context.Background()
	name := f.container(i)
	args := []string{"run", "-d", "--name", name, "--network", f.cl.net,
		"--add-host", hostAlias + ":host-gateway", "--env-file", f.envFile,
		"-e", fmt.Sprintf("SLUICE_WORKER_NAME=chaos-w%d", i),
		"-v", f.cl.certs.CA + ":/etc/sluice/ca.pem:ro", f.cl.c.WorkerImage}
	if err := f.cl.run(ctx, name, args); err != nil {
		return err
	}
	if name == f.partitioned() {
		_, err := dockerCmd(ctx, "network", "connect", f.cl.side, name)
		return err
	}
	return nil
}

func (f *containerFleet) restart(i int) error {
	ctx := context.Background()
	if _, err := dockerCmd(ctx, "kill", "-s", "KILL", f.container(i)); err != nil {
		return err
	}
	f.killed()
	if _, err := dockerCmd(ctx, "start", f.container(i)); err != nil {
		return err
	}
	f.restarted()
	return nil
}

// stop stops every worker (SIGTERM, SIGKILL after grace) and writes each
// one's log to worker-<i>.log.
func (f *containerFleet) stop(grace time.Duration) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range f.n {
		wg.Go(func() {
			_, _ = dockerCmd(ctx, "stop", "-t", fmt.Sprint(int(grace.Seconds())), f.container(i))
			log, err := os.Create(filepath.Join(f.logDir, fmt.Sprintf("worker-%d.log", i)))
			if err != nil {
				return
			}
			defer log.Close()
			cmd := exec.CommandContext(ctx, "docker", "logs", f.container(i))
			cmd.Stdout, cmd.Stderr = log, log
			_ = cmd.Run()
		})
	}
	wg.Wait()
}
