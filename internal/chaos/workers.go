package chaos

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fleet runs the worker binary as separate processes, one per slot, and
// kills and restarts them.
type fleet struct {
	bin    string
	env    []string
	logDir string
	// offsets are the slots' clock offsets (Config.ClockOffsets).
	offsets []time.Duration

	tally

	mu      sync.Mutex
	procs   []*workerProc
	started int
}

// tally counts a fleet's kills and restarts.
type tally struct {
	mu              sync.Mutex
	kills, restarts int
}

func (t *tally) killed()    { t.mu.Lock(); t.kills++; t.mu.Unlock() }
func (t *tally) restarted() { t.mu.Lock(); t.restarts++; t.mu.Unlock() }

func (t *tally) counts() (kills, restarts int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kills, t.restarts
}

// workerProc is one running worker process.
type workerProc struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed once the process has exited and been reaped
	// name is its SLUICE_WORKER_NAME, started when it was started, and
	// logFrom the size of its log file before it: its own lines follow.
	name    string
	started time.Time
	logFrom int64
}

// workerFleet is the run's workers: processes (fleet) or containers
// (containerFleet), one per slot.
type workerFleet interface {
	// start starts slot i's worker.
	start(i int) error
	// restart kills slot i's worker with SIGKILL and starts it again.
	restart(i int) error
	// stop stops every worker, SIGKILL after grace, and leaves each one's
	// log in the log directory as worker-<i>.log.
	stop(grace time.Duration)
	counts() (kills, restarts int)
}

// workerEnv is the environment of every worker process: the caller's
// minus any SLUICE_ or AWS_ setting, plus the run's.
func workerEnv(in *infra, cfg Config) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return append(env, runEnv(in, cfg)...)
}

// runEnv is the run's settings of every worker. Short ack wait and
// heartbeats make a killed worker's jobs come back within seconds.
func runEnv(in *infra, cfg Config) []string {
	env := []string{
		"SLUICE_NATS_URL=" + in.workerNATSURL(),
		"SLUICE_S3_ENDPOINT=" + in.workerS3Endpoint(), "SLUICE_S3_BUCKET=" + bucket, "SLUICE_S3_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + s3AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + s3Secret, "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"SLUICE_MEDIA_BASE_URL=" + in.simURL, "SLUICE_MEDIA_API_KEY=" + mediaAPIKey,
		"SLUICE_COMPUTE_BASE_URL=" + in.simURL, "SLUICE_COMPUTE_USER=" + computeUser,
		"SLUICE_COMPUTE_PASSWORD=" + computePassword, "SLUICE_COMPUTE_ORGID=" + computeOrgID,
		"SLUICE_POLL_INTERVAL=1s", "SLUICE_POLL_FIRST=200ms", "SLUICE_COMPUTE_POLL_INTERVAL=500ms",
		"SLUICE_ALLOW_PRIVATE_URLS=true",
		"SLUICE_LOG_LEVEL=info", "SLUICE_LOG_FORMAT=json",
		"SLUICE_MAX_INFLIGHT=64",
		"SLUICE_ACK_WAIT=" + cfg.AckWait.String(),
		fmt.Sprintf("SLUICE_MAX_DELIVER=%d", cfg.MaxDeliver),
		"SLUICE_SHUTDOWN_TIMEOUT=10s",
		"SLUICE_TASK_TIMEOUT=10m", "SLUICE_COMPUTE_TIMEOUT=10m",
	}
	if cfg.FleetMediaTasks > 0 {
		env = append(env, fmt.Sprintf("SLUICE_FLEET_MEDIA_TASKS=%d", cfg.FleetMediaTasks))
	}
	if in.cl == nil {
		return append(env, "SLUICE_HTTP_ADDR=127.0.0.1:0", fmt.Sprintf("SLUICE_NATS_REPLICAS=%d", in.replicas()))
	}
	// The containers' CA file is mounted there by containerFleet.start.
	return append(env, "SLUICE_NATS_REPLICAS=3", "SLUICE_NATS_TLS_CA=/etc/sluice/ca.pem")
}

func newFleet(bin string, env []string, logDir string, n int, offsets []time.Duration) *fleet {
	return &fleet{bin: bin, env: env, logDir: logDir, offsets: offsets, procs: make([]*workerProc, n)}
}

// start starts slot i's worker; its output is appended to worker-<i>.log.
func (f *fleet) start(i int) error {
	log, err := os.OpenFile(filepath.Join(f.logDir, fmt.Sprintf("worker-%d.log", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	logFrom, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		log.Close()
		return err
	}
	f.mu.Lock()
	gen := f.started
	f.started++
	f.mu.Unlock()
	name := fmt.Sprintf("chaos-w%d-%d", i, gen)
	cmd := exec.Command(f.bin)
	cmd.Env = append(append([]string(nil), f.env...), "SLUICE_WORKER_NAME="+name)
	if len(f.offsets) > 0 {
		cmd.Env = append(cmd.Env, "SLUICE_FAULT_CLOCK_OFFSET="+f.offsets[i%len(f.offsets)].String())
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start worker %d: %w", i, err)
	}
	p := &workerProc{cmd: cmd, log: log, done: make(chan struct{}), name: name, started: time.Now(), logFrom: logFrom}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	f.mu.Lock()
	f.procs[i] = p
	f.mu.Unlock()
	return nil
}

// kill sends SIGKILL to slot i's worker and waits until it is gone.
func (f *fleet) kill(i int) {
	f.mu.Lock()
	p := f.procs[i]
	f.procs[i] = nil
	f.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	f.killed()
}

// restart kills slot i's worker and starts a new one in its place.
func (f *fleet) restart(i int) error {
	f.kill(i)
	if err := f.start(i); err != nil {
		return err
	}
	f.restarted()
	return nil
}

// stop asks every worker to stop (SIGTERM) and kills those still running
// after grace.
func (f *fleet) stop(grace time.Duration) {
	f.mu.Lock()
	procs := append([]*workerProc(nil), f.procs...)
	clear(f.procs)
	f.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	timeout := time.After(grace)
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-timeout:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

// live is the worker processes running now, in slot order.
func (f *fleet) live() []*workerProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*workerProc
	for _, p := range f.procs {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}
