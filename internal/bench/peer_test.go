package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStatFields reads a stat line whose command name holds spaces and
// parentheses, as /proc writes it.
func TestStatFields(t *testing.T) {
	line := "4242 (post gres: (idle)) S 17 4242 4242 0 -1 4194560 100 0 0 0 31 7 5 3 20 0 1 0 12345 0 0\n"
	f := statFields(line)
	if f[0] != "S" || f[1] != "17" {
		t.Fatalf("state, ppid = %q, %q; want S, 17", f[0], f[1])
	}
	if f[11] != "31" || f[12] != "7" || f[13] != "5" || f[14] != "3" {
		t.Fatalf("utime stime cutime cstime = %v; want 31 7 5 3", f[11:15])
	}
}

// TestTreeCPU checks that a process tree's CPU time includes the children
// it has reaped, as a Postgres postmaster reaps its ended backends: the
// parent shell itself does almost nothing; its child burns CPU and exits.
func TestTreeCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; echo reaped; exec sleep 60`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "reaped\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	own, err := statCPU(cmd.Process.Pid, false)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := treeCPU(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if tree <= own {
		t.Fatalf("tree CPU %s, own %s: the reaped child's CPU time is missing", tree, own)
	}
}

// TestStartPostgres starts the private server as the peer lane does and
// checks what it promises: a loopback port only, trust for 127.0.0.1 only,
// durable settings, and nothing left behind after stop.
func TestStartPostgres(t *testing.T) {
	bin, err := FindPostgresBin(DefaultPostgresBin)
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	logDir := t.TempDir()
	pg, err := startPostgres(context.Background(), bin, logDir)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			pg.stop()
		}
	})
	conf, err := os.ReadFile(filepath.Join(pg.dir, "data", "postgresql.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listen_addresses = '127.0.0.1'", fmt.Sprintf("port = %d", pg.port), "fsync = on", "synchronous_commit = on", "track_commit_timestamp = on"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("postgresql.conf lacks %q", want)
		}
	}
	hba, err := os.ReadFile(filepath.Join(pg.dir, "data", "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(hba) != "host all all 127.0.0.1/32 trust\n" {
		t.Errorf("pg_hba.conf = %q", hba)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", pg.port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-pg.proc.done:
			log, _ := os.ReadFile(filepath.Join(logDir, "postgres.log"))
			t.Fatalf("postgres exited: %v\n%s", pg.proc.err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres does not accept connections on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cpu, err := pg.cpu(); err != nil || cpu < 0 {
		t.Fatalf("server CPU %s, %v", cpu, err)
	}
	pg.stop()
	stopped = true
	if _, err := os.Stat(pg.dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory %s still there after stop (%v)", pg.dir, err)
	}
}

// TestPeerReport renders two pairs and checks the table's medians and
// ratios.
func TestPeerReport(t *testing.T) {
	pass := func(who string, rate float64, worker, store time.Duration, lat time.Duration) peerPass {
		return peerPass{who: who, jobs: 1000, elapsed: time.Duration(1000 / rate * float64(time.Second)),
			worker: worker * 1000, store: store * 1000, s3: time.Millisecond * 1000, rest: time.Millisecond * 500,
			latencies: []time.Duration{lat}}
	}
	rep := &PeerReport{Jobs: 1000, Latency: 1, Pairs: []PeerPair{
		{Sluice: pass("sluice", 400, 2*time.Millisecond, time.Millisecond, 10*time.Millisecond),
			River: pass("River", 200, 3*time.Millisecond, time.Millisecond, 500*time.Millisecond)},
		{Sluice: pass("sluice", 300, 2*time.Millisecond, time.Millisecond, 12*time.Millisecond),
			River: pass("River", 300, 2*time.Millisecond, 2*time.Millisecond, 400*time.Millisecond), RiverFirst: true},
	}}
	var b strings.Builder
	rep.WriteMarkdown(&b)
	got := b.String()
	for _, want := range []string{
		// jobs/s: medians 350 and 250; pair ratios 2.00 and 1.00, median 1.50.
		"| 1,000 quick jobs, jobs/s (pairs ranged 1.00–2.00×) | 350 | 250 | **1.50×** (median of the pairs' ratios) |",
		// worker + store: 3 ms both sluice passes, 4 ms both River passes.
		"| CPU per job, worker + store (headline; pairs ranged 0.75–0.75×) | 3.00 ms | 4.00 ms | **0.75×** |",
		"| CPU per job, all processes | 4.50 ms | 5.50 ms | **0.82×** |",
		"| CPU per job, the store (nats-server vs Postgres) | 1.00 ms | 1.50 ms | **0.67×** |",
		"| enqueue → completion, median of 1 one at a time | 11.00 ms | 450.00 ms | 0.02× |",
		"| 2 | River | 300 | 300 | 1.00× | 3.00 ms | 4.00 ms | 0.75× | 12.0 ms / 400.0 ms | 0.00 / 0.00 cores |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks\n%s\nin\n%s", want, got)
		}
	}
}
