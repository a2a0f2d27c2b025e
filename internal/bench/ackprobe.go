package bench

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
)

// ackProbe times the acknowledgement of a job message in SLUICE_JOBS,
// where a work-queue stream deletes what is acknowledged: every 100 ms it
// publishes one message on sluice.jobs.speech (a kind B1's worker does not
// serve), fetches it from that kind's consumer and times AckSync, the
// round trip until the server confirms the ack (and the delete).
type ackProbe struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []ackSample
}

type ackSample struct {
	at   time.Time
	took time.Duration
}

func startAckProbe(ctx context.Context, js jetstream.JetStream) (*ackProbe, error) {
	cons, err := js.Consumer(ctx, contract.JobsStream, contract.ConsumerName("speech"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &ackProbe{cancel: cancel, done: make(chan struct{})}
	go p.loop(ctx, js, cons)
	return p, nil
}

func (p *ackProbe) loop(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer) {
	defer close(p.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := js.Publish(ctx, contract.JobSubject("speech"), []byte(`{"probe":true}`)); err != nil {
			continue
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			continue
		}
		for m := range batch.Messages() {
			start := time.Now()
			if m.DoubleAck(ctx) == nil {
				p.mu.Lock()
				p.samples = append(p.samples, ackSample{at: start, took: time.Since(start)})
				p.mu.Unlock()
			}
		}
	}
}

// between returns the percentiles of the acks timed between t0 and t1.
func (p *ackProbe) between(t0, t1 time.Time) percentiles {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ds []time.Duration
	for _, s := range p.samples {
		if !s.at.Before(t0) && s.at.Before(t1) {
			ds = append(ds, s.took)
		}
	}
	return percentilesOf(ds)
}

func (p *ackProbe) stop() {
	p.cancel()
	<-p.done
}
