package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat; it is 100 on every Linux platform Go supports.
const clockTicks = 100

// procStats is what the kernel says about one process.
type procStats struct {
	// HWM is the peak resident set size (VmHWM), RSS the current one
	// (VmRSS), both in bytes.
	HWM, RSS uint64
	// CPU is user plus system time so far.
	CPU time.Duration
}

// readProcStats reads /proc/<pid>/status and /proc/<pid>/stat.
func readProcStats(pid int) (procStats, error) {
	var st procStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return st, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		if name == "VmHWM" {
			st.HWM = kb << 10
		} else {
			st.RSS = kb << 10
		}
	}
	st.CPU, err = statCPU(pid, false)
	return st, err
}

// process is a child process of the harness: its stderr goes to a log file,
// its stdout lines to Lines.
type process struct {
	name  string
	cmd   *exec.Cmd
	log   *os.File
	lines chan string
	done  chan struct{}
	err   error
}

// startProcess runs path with args and env (added to a copy of the
// harness's environment without any SLUICE_ variable), logging to
// <logDir>/<name>.log.
func startProcess(name, path string, args, env []string, logDir string) (*process, error) {
	return startProcessAs(name, path, args, env, logDir, nil)
}

// startProcessAs is startProcess with the command's working directory and
// user set by attr (nil: this process's).
func startProcessAs(name, path string, args, env []string, logDir string, attr *procAttr) (*process, error) {
	log, err := os.Create(fmt.Sprintf("%s/%s.log", logDir, name))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	attr.apply(cmd)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		close(p.lines)
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// procAttr is where and as whom a child process runs.
type procAttr struct {
	// Dir is the working directory ("" for this process's).
	Dir string
	// Cred is the user and group to run as (nil for this process's).
	Cred *syscall.Credential
}

func (a *procAttr) apply(cmd *exec.Cmd) {
	if a == nil {
		return
	}
	cmd.Dir = a.Dir
	if a.Cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.Cred}
	}
}

// treeCPU is the CPU time (user + system) of process pid, of its children
// alive now and of the children it has reaped: a Postgres server's
// postmaster reaps every backend that ends, so this is the whole server's
// CPU time so far.
func treeCPU(pid int) (time.Duration, error) {
	own, err := statCPU(pid, true)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue // ended meanwhile
		}
		f := statFields(string(b))
		if len(f) < 15 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if c, err := statCPU(child, true); err == nil {
			own += c
		}
	}
	return own, nil
}

// statFields returns the fields of a /proc/<pid>/stat line after the
// command name (which may hold spaces and parentheses): state is [0],
// ppid [1], utime [11], stime [12], cutime [13], cstime [14].
func statFields(stat string) []string {
	return strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
}

// statCPU reads utime + stime of pid, plus cutime + cstime (its reaped
// children's) when withChildren.
func statCPU(pid int, withChildren bool) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := statFields(string(b))
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	idx := []int{11, 12}
	if withChildren {
		idx = append(idx, 13, 14)
	}
	var ticks uint64
	for _, i := range idx {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// pid is the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stats reads the process's memory and CPU counters.
func (p *process) stats() (procStats, error) { return readProcStats(p.pid()) }

// line waits for the next stdout line that starts with prefix and returns
// the rest of it.
func (p *process) line(ctx context.Context, prefix string, within time.Duration) (string, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				return "", fmt.Errorf("%s exited (%v) before printing %q; see %s", p.name, p.err, prefix, p.log.Name())
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest), nil
			}
		case <-t.C:
			return "", fmt.Errorf("%s did not print %q within %s; see %s", p.name, prefix, within, p.log.Name())
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it.
func (p *process) stop(grace time.Duration) { p.stopWith(syscall.SIGTERM, grace) }

// stopWith sends sig, waits up to grace for the process to exit, then
// kills it.
func (p *process) stopWith(sig syscall.Signal, grace time.Duration) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// wait waits for the process to exit by itself.
func (p *process) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return ctx.Err()
	}
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, url string, within time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s", url, within)
		}
		select {
		case <-exited:
			return fmt.Errorf("process exited before %s was ready", url)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// metricValue reads one unlabelled sample from a Prometheus text page.
func metricValue(ctx context.Context, url, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found at %s", name, url)
}

// kill kills the process outright (SIGKILL) and waits for it to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
