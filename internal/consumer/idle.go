package consumer

import (
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
)

// A class queue's consumer (classes.go) is made on first use and is
// deleted again once idle: no message waiting for it, none delivered and
// unacknowledged, nothing delivered for classIdle. A tenant's classes that
// have long been empty so do not pile up. A fetch loop that still knows a
// deleted consumer fails one pull, forgets it, and makes it again when
// its class has jobs; the messages wait in the stream meanwhile.
const (
	classIdle = time.Hour
	// idleCheckEvery spaces the checks: each lists every consumer of
	// SLUICE_JOBS.
	idleCheckEvery = 10 * time.Minute
)

// dropIdleClasses deletes the idle class consumers of the kinds served,
// at most every idleCheckEvery, and only while fair scheduling is on or
// after this worker saw jobs in class queues: a fleet that never used
// them makes no request for them. It reports nothing to the sweep: a user
// not allowed to list or delete consumers keeps them (docs/operating.md).
func (c *Consumer) dropIdleClasses(ctx context.Context, stream jetstream.Stream, now time.Time) {
	if now.Sub(c.idleChecked) < idleCheckEvery || !(c.cfg.Policy.Enabled() || c.classesUsed) {
		return
	}
	c.idleChecked = now
	list := stream.ListConsumers(ctx)
	for info := range list.Info() {
		cl, ok := contract.ParseClassSubject(info.Config.FilterSubject)
		if !ok || !slices.Contains(c.cfg.Kinds, cl.Kind) || info.Name != contract.ClassConsumerName(cl.Kind, cl.Priority, cl.Tenant) {
			continue
		}
		last := info.Created
		if info.Delivered.Last != nil && info.Delivered.Last.After(last) {
			last = *info.Delivered.Last
		}
		if info.NumPending > 0 || info.NumAckPending > 0 || info.NumRedelivered > 0 || now.Sub(last) < classIdle {
			continue
		}
		if err := stream.DeleteConsumer(ctx, info.Name); err != nil {
			c.log.Debug().Err(err).Str("consumer", info.Name).Msg("idle class consumer not deleted")
			continue
		}
		c.log.Info().Str("consumer", info.Name).Msg("deleted an idle class consumer")
	}
	if err := list.Err(); err != nil {
		c.log.Debug().Err(err).Msg("class consumers not listed; idle ones stay")
	}
}
