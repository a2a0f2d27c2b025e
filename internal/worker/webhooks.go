package worker

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// webhookRun returns what starts the webhook dispatcher and sender, which
// then run until the context ends; nil when SLUICE_WEBHOOKS is off
// (docs/webhooks.md).
func webhookRun(cfg config.Config, js jetstream.JetStream, p parts, m *metrics.Metrics, log zerolog.Logger) func(context.Context) error {
	if !cfg.Webhooks {
		return nil
	}
	log = log.With().Str("component", "webhooks").Logger()
	return func(bg context.Context) error {
		cache, err := p.hooks.WatchSubscriptions(bg)
		if err != nil {
			return err
		}
		d := webhooks.NewDispatcher(webhooks.DispatcherConfig{JS: js, Store: p.hooks, Cache: cache, Specs: p.specs, Now: p.clock.Now, Log: log})
		s := webhooks.NewSender(webhooks.SenderConfig{
			JS: js, Store: p.hooks, Cache: cache, Policy: webhooks.PolicyOf(cfg.AllowPrivateURLs, cfg.Dev),
			Concurrency: cfg.WebhookConcurrency, PerEndpoint: cfg.WebhookPerEndpoint, Timeout: cfg.WebhookTimeout,
			Now: p.clock.Now, Log: log, Metric: m,
		})
		for name, run := range map[string]func(context.Context) error{"dispatcher": d.Run, "sender": s.Run} {
			go func() {
				if err := run(bg); err != nil && bg.Err() == nil {
					log.Error().Err(err).Str("part", name).Msg("webhooks stopped")
				}
			}()
		}
		return nil
	}
}
