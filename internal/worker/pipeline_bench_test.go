package worker_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// stepClock records, in one process and so on one clock, when each step
// job's terminal event arrived and when its first upstream submit came.
type stepClock struct {
	mu     sync.Mutex
	ended  map[string]time.Time
	submit map[string]time.Time
}

// jobInPrompt finds the job id a bench prompt names ("job <id> ").
var jobInPrompt = regexp.MustCompile(`job (\S+) `)

// front records the first submit of each job in front of the simulator.
func (c *stepClock) front(sim http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/videos/generations") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if m := jobInPrompt.FindSubmatch(body); m != nil {
				now := time.Now()
				c.mu.Lock()
				if _, seen := c.submit[string(m[1])]; !seen {
					c.submit[string(m[1])] = now
				}
				c.mu.Unlock()
			}
		}
		sim.ServeHTTP(w, r)
	})
}

// chainSpec is pipeline id of n instant video steps, each needing the one
// before; each step's prompt names its job.
func chainSpec(id string, n int) []byte {
	var steps []string
	for i := range n {
		needs := ""
		if i > 0 {
			needs = fmt.Sprintf(`,"needs":["s%d"]`, i-1)
		}
		steps = append(steps, fmt.Sprintf(`{"name":"s%d"%s,"spec":{"kind":"video","video":{"model":"m",`+
			`"input":{"prompt":"a paper boat, job %s--s%d [sim:duration=0s]"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}}`,
			i, needs, id, i))
	}
	return fmt.Appendf(nil, `{"id":%q,"kind":"pipeline","pipeline":{"steps":[%s]}}`, id, strings.Join(steps, ","))
}

// startPipelineBench starts a worker serving video and pipeline jobs over
// the embedded parts, the simulator behind c's front; it returns its NATS
// and its simulator.
func startPipelineBench(b *testing.B, c *stepClock) (*testenv.NATS, *apisim.Media) {
	media := apisim.NewMedia(apisim.MediaConfig{APIKey: "k", ResultSize: 4 << 10})
	nt := startBenchWorkerWith(b, media, func(cfg *config.Config) {
		cfg.Kinds, cfg.PollFirst = []string{"video", "pipeline"}, 5*time.Millisecond
	}, c.front)
	return nt, media
}

// publishPipelines publishes n chains of steps steps.
func publishPipelines(b *testing.B, nt *testenv.NATS, prefix string, n, steps int) {
	b.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		m := nats.NewMsg(contract.JobSubject("pipeline"))
		m.Header.Set(contract.HeaderMsgID, id)
		m.Data = chainSpec(id, steps)
		if _, err := nt.JS.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 || i == n-1 {
			<-nt.JS.PublishAsyncComplete()
		}
	}
}

// awaitPipelines waits for n pipelines' terminal events, each succeeded;
// each video step's terminal event's arrival goes to c.
func awaitPipelines(b *testing.B, nt *testenv.NATS, c *stepClock, n int, within time.Duration) func() {
	ended := make(chan string, n)
	sub, err := nt.Conn.Subscribe(contract.EventsSubjectPrefix+">", func(m *nats.Msg) {
		now := time.Now()
		var ev events.Event
		if json.Unmarshal(m.Data, &ev) != nil || !strings.HasSuffix(m.Subject, ".succeeded") && !strings.HasSuffix(m.Subject, ".failed") && !strings.HasSuffix(m.Subject, ".cancelled") {
			return
		}
		if ev.Data.Kind == "pipeline" {
			ended <- ev.Data.JobID + " " + ev.Data.Status
			return
		}
		c.mu.Lock()
		c.ended[ev.Data.JobID] = now
		c.mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	return func() {
		defer func() { _ = sub.Unsubscribe() }()
		for range n {
			select {
			case e := <-ended:
				if !strings.HasSuffix(e, " succeeded") {
					b.Fatalf("pipeline %s", e)
				}
			case <-time.After(within):
				b.Fatalf("no pipeline ended for %s", within)
			}
		}
	}
}

// handoffs is, for every step but the first of the chains, the time from
// its parent's terminal event to its own first submit upstream, sorted.
func (c *stepClock) handoffs() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for id, t := range c.submit {
		pid, name, _ := strings.Cut(id, "--s")
		k, err := strconv.Atoi(name)
		if err != nil || k == 0 {
			continue
		}
		if ended, ok := c.ended[fmt.Sprintf("%s--s%d", pid, k-1)]; ok {
			out = append(out, t.Sub(ended))
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkPipelineHandoff runs b.N pipelines of 3 instant video steps in
// a chain, one at a time, and reports the median time from a step's
// terminal event (as a subscriber receives it) to its child's first
// upstream call, over loopback (BENCHMARKS.md, "Pipelines").
func BenchmarkPipelineHandoff(b *testing.B) {
	c := &stepClock{ended: map[string]time.Time{}, submit: map[string]time.Time{}}
	nt, _ := startPipelineBench(b, c)
	b.ResetTimer()
	for i := range b.N {
		wait := awaitPipelines(b, nt, c, 1, time.Minute)
		publishPipelines(b, nt, fmt.Sprintf("hand-%d", i), 1, 3)
		wait()
	}
	b.StopTimer()
	h := c.handoffs()
	if len(h) != 2*b.N {
		b.Fatalf("%d handoffs measured, want %d", len(h), 2*b.N)
	}
	b.ReportMetric(float64(h[len(h)/2])/float64(time.Millisecond), "handoff-ms-median")
	b.ReportMetric(float64(h[len(h)*9/10])/float64(time.Millisecond), "handoff-ms-p90")
}

// BenchmarkPipelineFleet runs PIPE_BENCH_PIPELINES (1,000) pipelines of
// PIPE_BENCH_STEPS (10) instant video steps in a chain, all published at
// once, then the same number of plain video jobs; it checks that every
// step was submitted once and reports the worker process's CPU per step
// with and without the pipelines, the difference being the driver's.
func BenchmarkPipelineFleet(b *testing.B) {
	pipes, steps := envInt("PIPE_BENCH_PIPELINES", 1000), envInt("PIPE_BENCH_STEPS", 10)
	for range b.N {
		c := &stepClock{ended: map[string]time.Time{}, submit: map[string]time.Time{}}
		nt, media := startPipelineBench(b, c)
		wait := awaitPipelines(b, nt, c, pipes, 2*time.Minute)
		cpu0, start := processCPU(b), time.Now()
		publishPipelines(b, nt, "fleet", pipes, steps)
		wait()
		withPipes, took := processCPU(b)-cpu0, time.Since(start)
		for i := range pipes {
			for k := range steps {
				if n := media.SubmitCount(fmt.Sprintf("a paper boat, job fleet-%05d--s%d [sim:duration=0s]", i, k)); n != 1 {
					b.Fatalf("step %d of pipeline %d submitted %d times", k, i, n)
				}
			}
		}
		cpu1 := processCPU(b)
		runPlainVideos(b, nt, pipes*steps)
		plain := processCPU(b) - cpu1
		n := float64(pipes * steps)
		b.ReportMetric(n/took.Seconds(), "steps/s")
		b.ReportMetric(float64(withPipes)/float64(time.Millisecond)/n, "cpu-ms/step")
		b.ReportMetric(float64(plain)/float64(time.Millisecond)/n, "cpu-ms/plain-job")
		b.ReportMetric(float64(withPipes-plain)/float64(time.Millisecond)/n, "driver-cpu-ms/step")
	}
}

// runPlainVideos publishes n instant video jobs and waits for their ends.
func runPlainVideos(b *testing.B, nt *testenv.NATS, n int) {
	ended := make(chan struct{}, n)
	sub, err := nt.Conn.Subscribe(contract.EventsSubjectPrefix+"video.succeeded", func(m *nats.Msg) {
		if strings.Contains(string(m.Data), `"bench-`) {
			ended <- struct{}{}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	publishBenchJobs(b, nt, n, "[sim:duration=0s]")
	for range n {
		select {
		case <-ended:
		case <-time.After(2 * time.Minute):
			b.Fatal("no plain job ended for 2 minutes")
		}
	}
}

// envInt reads a positive integer from the environment, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
