package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// sampler keeps the resource series of every worker process of a soak
// (Config.SampleEvery).
type sampler struct {
	mu     sync.Mutex
	series []*Series
	byName map[string]*Series
	addrs  map[string]string // process name -> its /metrics host:port, once known
}

func newSampler() *sampler {
	return &sampler{byName: map[string]*Series{}, addrs: map[string]string{}}
}

// sample samples every live worker at once, half a SampleEvery later and
// then every SampleEvery until ctx ends. The half step keeps the samples
// off the kills' ticks when KillEvery is a multiple of SampleEvery: a
// sample taken as a kill lands would miss the restarted process each time.
func (r *run) sample(ctx context.Context) {
	procs := r.fleet.(*fleet)
	r.sampleOnce(ctx, procs.live())
	if backoff.Sleep(ctx, r.cfg.SampleEvery/2) != nil {
		return
	}
	t := time.NewTicker(r.cfg.SampleEvery)
	defer t.Stop()
	for {
		r.sampleOnce(ctx, procs.live())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce takes one sample of each of procs.
func (r *run) sampleOnce(ctx context.Context, procs []*workerProc) {
	at := time.Since(r.start)
	subs, err := r.in.subscriptions()
	if err != nil {
		subs = nil // the server is down for a fault: no figure this time
	}
	for _, p := range procs {
		var res Resources
		res[0], res[2] = procRSS(p.cmd.Process.Pid), procFiles(p.cmd.Process.Pid)
		res[1] = r.sampling.goroutines(ctx, p)
		res[3] = -1
		if n, ok := subs["sluice-worker "+p.name]; ok {
			res[3] = float64(n)
		}
		// A process killed meanwhile (a zombie has no VmRSS and no
		// files; the server still counts its connection) is no sample.
		select {
		case <-p.done:
			continue
		default:
		}
		if res[0] < 0 {
			continue
		}
		r.sampling.add(p, r.start, Sample{At: at, Resources: res})
	}
}

func (s *sampler) add(p *workerProc, runStart time.Time, sm Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ser := s.byName[p.name]
	if ser == nil {
		ser = &Series{Process: p.name, Started: p.started.Sub(runStart)}
		s.byName[p.name] = ser
		s.series = append(s.series, ser)
	}
	ser.Samples = append(ser.Samples, sm)
}

// all is a copy of every series so far, in the order the processes were
// first sampled.
func (s *sampler) all() []Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Series, len(s.series))
	for i, ser := range s.series {
		out[i] = *ser
		out[i].Samples = append([]Sample(nil), ser.Samples...)
	}
	return out
}

// goroutines reads go_goroutines from p's /metrics; -1 while p does not
// serve it yet (or has just been killed).
func (s *sampler) goroutines(ctx context.Context, p *workerProc) float64 {
	s.mu.Lock()
	addr := s.addrs[p.name]
	s.mu.Unlock()
	if addr == "" {
		if addr = servingAddr(p.log.Name(), p.logFrom); addr == "" {
			return -1
		}
		s.mu.Lock()
		s.addrs[p.name] = addr
		s.mu.Unlock()
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(mctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// servingAddr finds, in the worker's log from offset on, the address its
// ops server listens on (SLUICE_HTTP_ADDR is 127.0.0.1:0, so the worker
// says which port it got); "" before it said so.
func servingAddr(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"serving `)) {
			continue
		}
		var l struct {
			Addr    string `json:"addr"`
			Message string `json:"message"`
		}
		if json.Unmarshal(line, &l) == nil && strings.HasPrefix(l.Message, "serving ") && l.Addr != "" {
			return l.Addr
		}
	}
	return ""
}

// procRSS is the process's resident memory in MiB (VmRSS), -1 when it
// cannot be read (the process gone).
func procRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// procFiles is the number of the process's open file descriptors, -1
// when they cannot be listed.
func procFiles(pid int) float64 {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return float64(len(ents))
}
