package worker_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
)

// BenchmarkComputeHistoryLookups runs b.N compute jobs (queued 200 ms, run
// 1 s) against the compute simulator in platform mode (an ended job stays
// in the realtime detail for 2 s) and reports the history calls and the
// realtime detail queries per finished job, for a poll interval shorter
// than that delay (the end is seen in the detail, the history is asked
// once for the accounting) and one longer (the job has left the detail;
// the history gives its end), and the queue limit reads per job (one read
// serves every job of the region for a while). BENCHMARKS.md shows the
// figures.
func BenchmarkComputeHistoryLookups(b *testing.B) {
	for _, poll := range []time.Duration{500 * time.Millisecond, 5 * time.Second} {
		b.Run("poll="+poll.String(), func(b *testing.B) {
			sim := apisim.NewCompute(apisim.ComputeConfig{User: "u", Password: "p", OrgID: "o", QueuedFor: 200 * time.Millisecond, RunFor: time.Second, Root: b.TempDir()})
			b.Cleanup(func() { _ = sim.Close() })
			srv := httptest.NewServer(sim)
			b.Cleanup(srv.Close)
			dir := "/public/home/u/bench"
			if err := os.MkdirAll(filepath.Join(sim.Root(), dir), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sim.Root(), dir, "run.sh"), []byte("#!/bin/sh\necho bench\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			nt := startBenchWorkerWith(b, apisim.NewMedia(apisim.MediaConfig{APIKey: "k"}), func(c *config.Config) {
				c.Kinds = []string{"compute"}
				c.ComputeBaseURL, c.ComputeUser, c.ComputePassword, c.ComputeOrgID = srv.URL, "u", "p", "o"
				c.ComputePoll, c.ComputeConc, c.ComputeRate = poll, 64, 1000
			})
			ended := make(chan string, 1<<16)
			sub, err := nt.Conn.Subscribe(contract.EventsSubjectPrefix+"compute.*", func(m *nats.Msg) {
				if !strings.HasSuffix(m.Subject, ".submitted") && !strings.HasSuffix(m.Subject, ".running") {
					ended <- m.Subject
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("hist-%06d", i)
				m := nats.NewMsg(contract.JobSubject("compute"))
				m.Header.Set(contract.HeaderMsgID, id)
				m.Data = fmt.Appendf(nil, `{"id":%q,"kind":"compute","compute":{"template":{"type":"BASIC","name":"BASE"},`+
					`"job":{"queue":"normal","nodes":1,"ppn":2,"wall_time":"00:10:00","work_dir":%q,"script":%q}}}`, id, dir, dir+"/run.sh")
				if _, err := nt.JS.PublishMsg(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
			for range b.N {
				select {
				case s := <-ended:
					if !strings.HasSuffix(s, ".succeeded") {
						b.Fatalf("a job ended with %s", s)
					}
				case <-time.After(2 * time.Minute):
					b.Fatal("no terminal event for two minutes")
				}
			}
			b.StopTimer()
			c := sim.Counters()
			n := float64(b.N)
			b.ReportMetric(float64(c.Requests(apisim.EndpointComputeHistory)+c.Requests(apisim.EndpointComputeHistoryList))/n, "history-calls/job")
			b.ReportMetric(float64(c.Requests(apisim.EndpointComputeJob))/n, "detail-queries/job")
			b.ReportMetric(float64(c.Requests(apisim.EndpointComputeLimits))/n, "limit-reads/job")
		})
	}
}
