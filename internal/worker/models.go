package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/models"
)

// publishCatalog writes the model catalog this worker checks video specs
// against into SLUICE_TENANTS (models.Key), where enqueue reads the
// catalog in force. The workers of a fleet share one file, so the last
// writer's is everyone's. A write that fails is logged and left: the
// worker enforces its catalog all the same, and enqueue shows an older
// one (or the shipped one) until the next start.
func publishCatalog(ctx context.Context, kv jetstream.KeyValue, cfg config.Config, cat *models.Catalog, now func() time.Time, log zerolog.Logger) {
	p := models.Published{Catalog: cat, Source: models.SourceShipped, Worker: cfg.WorkerName, WrittenAt: now().UTC()}
	if cfg.MediaModels != "" {
		p.Source, p.File = models.SourceFile, cfg.MediaModels
	}
	data, err := json.Marshal(p)
	if err == nil {
		_, err = kv.Put(ctx, models.Key, data)
	}
	if err != nil {
		log.Warn().Err(err).Msg("cannot publish the model catalog; enqueue models shows an older one until the next start")
		return
	}
	log.Info().Str("source", p.Source).Int("models", len(cat.Models)).Msg("model catalog published")
}
