package containertest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Credentials of the stack. The secret ones must never appear in a worker's
// log (checked when each worker container is removed).
const (
	mediaKey    = "sk-media-SECRET-ct-4e1d"
	computeUser = "alice"
	computePass = "pw-compute-SECRET-ct-82a0"
	computeOrg  = "org-1"
	s3AccessKey = "sluice-ct"
	s3SecretKey = "s3-secret-SECRET-ct-7b13"
	bucket      = "sluice-ct"
)

// hostAlias is how containers reach the test process (where the simulators
// run): Docker maps it to the host with the host-gateway extra host.
const hostAlias = "host.docker.internal"

// image returns the image named by the environment variable env, or
// sluice-<name> with the tag images/build.sh gave it (SLUICE_IMAGE_TAG,
// default dev).
func image(env, name string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return "sluice-" + name + ":" + cmp.Or(os.Getenv("SLUICE_IMAGE_TAG"), "dev")
}

func natsImage() string   { return image("SLUICE_NATS_IMAGE", "nats") }
func s3Image() string     { return image("SLUICE_S3_IMAGE", "versitygw") }
func workerImage() string { return image("SLUICE_WORKER_IMAGE", "worker") }

func TestMain(m *testing.M) {
	// Before testcontainers reads its configuration: the reaper (Ryuk) is
	// an image that would have to be pulled. Each test removes what it
	// started instead.
	_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	code := m.Run()
	if docker.provider != nil {
		_ = docker.provider.Close()
	}
	os.Exit(code)
}

// docker is the engine, connected to once for the whole run.
var docker struct {
	once     sync.Once
	provider *testcontainers.DockerProvider
	err      error
}

// requireDocker returns the Docker provider, or skips the test when no
// engine answers or an image the suite runs is missing.
func requireDocker(t *testing.T) *testcontainers.DockerProvider {
	t.Helper()
	docker.once.Do(func() {
		defer func() {
			// testcontainers panics on some broken Docker set-ups.
			if r := recover(); r != nil {
				docker.err = fmt.Errorf("%v", r)
			}
		}()
		p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(tclog.NewNoopLogger()))
		if err != nil {
			docker.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Health(ctx); err != nil {
			docker.err = err
			return
		}
		// The simulators run in this process, and the containers reach it
		// through the engine's host: that must be this machine.
		if h := p.Client().DaemonHost(); !strings.HasPrefix(h, "unix://") && !strings.HasPrefix(h, "npipe://") {
			docker.err = fmt.Errorf("the engine at %s is not local", h)
			return
		}
		if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" && engineBeside(ctx, p) {
			// testcontainers takes a test that runs inside a container
			// for a sibling of the engine's containers and looks for their
			// published ports at its default gateway. An engine running
			// beside the test, in its network namespace, publishes them
			// on the loopback interface.
			_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
		}
		docker.provider = p
	})
	if docker.err != nil {
		t.Skipf("Docker is not reachable, so the container tests do not run: %v", docker.err)
	}
	for _, img := range []string{natsImage(), s3Image(), workerImage()} {
		if _, err := docker.provider.Client().ImageInspect(context.Background(), img); err != nil {
			t.Skipf("image %s is not there (run make images first; nothing is pulled): %v", img, err)
		}
	}
	return docker.provider
}

// engineBeside reports whether the engine runs in this network namespace:
// an address of this machine is in the engine's default bridge network
// (the bridge's own, docker0's).
func engineBeside(ctx context.Context, p *testcontainers.DockerProvider) bool {
	nw, err := p.Client().NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, cfg := range nw.Network.IPAM.Config {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && cfg.Subnet.IsValid() && cfg.Subnet.Contains(ip.Unmap()) {
				return true
			}
		}
	}
	return false
}

// stack is one test's sluice: a Docker network with NATS and versitygw on
// it, the simulators in this process, and the workers started with
// startWorker.
type stack struct {
	provider *testcontainers.DockerProvider
	network  *testcontainers.DockerNetwork
	nats, s3 *testcontainers.DockerContainer
	sim      *simulator

	mu  sync.Mutex
	cur natsConn
}

// natsConn is the test's connection to the NATS container.
type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// newStack starts NATS and S3 (with the bucket) and the simulators.
func newStack(t *testing.T, o simOptions) *stack {
	t.Helper()
	s := &stack{provider: requireDocker(t)}
	nw, err := network.New(context.Background())
	testcontainers.CleanupNetwork(t, nw)
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	s.network = nw
	s.sim = startSimulator(t, o)
	s.nats = s.run(t, natsImage(), "nats",
		testcontainers.WithExposedPorts("4222/tcp", "8222/tcp"),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/healthz?js-enabled-only=true").WithPort("8222/tcp").WithStartupTimeout(time.Minute)))
	s.s3 = s.run(t, s3Image(), "s3",
		testcontainers.WithExposedPorts("7070/tcp"),
		testcontainers.WithEnv(map[string]string{"ROOT_ACCESS_KEY_ID": s3AccessKey, "ROOT_SECRET_ACCESS_KEY": s3SecretKey, "VGW_HEALTH": "/health"}),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/health").WithPort("7070/tcp").WithStartupTimeout(time.Minute)))
	s.dial(t)
	t.Cleanup(func() { s.conn().nc.Close() })
	if _, err := s.s3Client(t).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return s
}

// run starts image on the stack's network under alias and removes it when
// the test ends.
func (s *stack) run(t *testing.T, img, alias string, opts ...testcontainers.ContainerCustomizer) *testcontainers.DockerContainer {
	t.Helper()
	opts = append(opts, network.WithNetwork([]string{alias}, s.network), testcontainers.WithLogger(tclog.TestLogger(t)))
	ctr, err := testcontainers.Run(context.Background(), img, opts...)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatalf("start %s (%s): %v", alias, img, err)
	}
	return ctr
}

// startWorker starts a worker container named name (also its
// SLUICE_WORKER_NAME) and waits until it is ready. Its log is checked for
// secrets before the container goes, and shown when the test failed.
func (s *stack) startWorker(t *testing.T, name string) *testcontainers.DockerContainer {
	t.Helper()
	env := map[string]string{
		"SLUICE_WORKER_NAME": name, "SLUICE_NATS_URL": "nats://nats:4222",
		"SLUICE_S3_ENDPOINT": "http://s3:7070", "SLUICE_S3_BUCKET": bucket, "SLUICE_S3_PATH_STYLE": "true",
		"SLUICE_S3_PART_SIZE": "5242880", "AWS_ACCESS_KEY_ID": s3AccessKey, "AWS_SECRET_ACCESS_KEY": s3SecretKey,
		"AWS_REGION":            "us-east-1",
		"SLUICE_MEDIA_BASE_URL": s.sim.url, "SLUICE_MEDIA_API_KEY": mediaKey,
		"SLUICE_COMPUTE_BASE_URL": s.sim.url, "SLUICE_COMPUTE_USER": computeUser,
		"SLUICE_COMPUTE_PASSWORD": computePass, "SLUICE_COMPUTE_ORGID": computeOrg,
		// The simulators' result URLs are the host's private address.
		"SLUICE_ALLOW_PRIVATE_URLS": "true",
		"SLUICE_POLL_INTERVAL":      "300ms", "SLUICE_POLL_FIRST": "100ms", "SLUICE_COMPUTE_POLL_INTERVAL": "200ms",
		// A killed worker's jobs come back to the fleet after AckWait.
		"SLUICE_ACK_WAIT": "3s", "SLUICE_SHUTDOWN_TIMEOUT": "5s", "SLUICE_LOG_LEVEL": "debug",
	}
	ctr := s.run(t, workerImage(), name,
		testcontainers.WithEnv(env),
		testcontainers.WithExposedPorts("9090/tcp"),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.ExtraHosts = append(hc.ExtraHosts, hostAlias+":host-gateway")
		}),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/readyz").WithPort("9090/tcp").WithStartupTimeout(time.Minute)))
	// Registered after the container's removal, so it runs before it.
	t.Cleanup(func() { checkLogs(t, name, ctr) })
	return ctr
}

// checkLogs fails the test when the container's log carries a secret, and
// shows its end when the test failed.
func checkLogs(t *testing.T, name string, ctr *testcontainers.DockerContainer) {
	t.Helper()
	rc, err := ctr.Logs(context.Background())
	if err != nil {
		t.Errorf("logs of %s: %v", name, err)
		return
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Errorf("logs of %s: %v", name, err)
	}
	logs := string(b)
	for _, secret := range []string{mediaKey, computePass, s3SecretKey, "X-Amz-Signature", "X-Amz-Credential"} {
		if i := strings.Index(logs, secret); i >= 0 {
			t.Errorf("%s logged a secret (%q): ...%s...", name, secret, logs[max(0, i-200):min(len(logs), i+100)])
		}
	}
	if t.Failed() {
		t.Logf("log of %s (last 16 KiB):\n%s", name, logs[max(0, len(logs)-16<<10):])
	}
}

// kill ends a container with SIGKILL, as a crash or the OOM killer would.
func (s *stack) kill(t *testing.T, ctr *testcontainers.DockerContainer) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.provider.Client().ContainerKill(ctx, ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill: %v", err)
	}
	for ctr.IsRunning() {
		st, err := ctr.State(ctx)
		if err != nil {
			t.Fatalf("state: %v", err)
		}
		if !st.Running {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop stops a container (SIGTERM, SIGKILL after 10 s).
func stop(t *testing.T, ctr *testcontainers.DockerContainer) {
	t.Helper()
	grace := 10 * time.Second
	if err := ctr.Stop(context.Background(), &grace); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// kill stops ctr at once (SIGKILL, no grace): a server given a grace
// period finishes the requests it is serving, and an outage meant to break
// them would then depend on timing.
func kill(t *testing.T, ctr *testcontainers.DockerContainer) {
	t.Helper()
	var grace time.Duration
	if err := ctr.Stop(context.Background(), &grace); err != nil {
		t.Fatalf("kill: %v", err)
	}
}

// start starts a stopped container again and waits until it is ready.
func start(t *testing.T, ctr *testcontainers.DockerContainer) {
	t.Helper()
	if err := ctr.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
}

// dial (re)connects the test to NATS: its host port changes when the
// container restarts.
func (s *stack) dial(t *testing.T) {
	t.Helper()
	url, err := s.nats.PortEndpoint(context.Background(), "4222/tcp", "nats")
	if err != nil {
		t.Fatalf("NATS endpoint: %v", err)
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	s.mu.Lock()
	old := s.cur
	s.cur = natsConn{nc: nc, js: js}
	s.mu.Unlock()
	if old.nc != nil {
		old.nc.Close()
	}
}

// conn returns the test's current NATS connection.
func (s *stack) conn() natsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// restartNATS stops the NATS container and starts it again.
func (s *stack) restartNATS(t *testing.T) {
	t.Helper()
	stop(t, s.nats)
	start(t, s.nats)
	s.dial(t)
}

// s3Client returns a client of the S3 container at its current host port.
func (s *stack) s3Client(t *testing.T) *s3.Client {
	t.Helper()
	endpoint, err := s.s3.PortEndpoint(context.Background(), "7070/tcp", "http")
	if err != nil {
		t.Fatalf("S3 endpoint: %v", err)
	}
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3AccessKey, s3SecretKey, ""),
	})
}
