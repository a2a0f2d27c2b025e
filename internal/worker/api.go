package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/models"
)

// startSurfaces starts the web console (into its slot of the ops server)
// and the HTTP API, each when configured. stop closes the API's listener.
func startSurfaces(ctx context.Context, cfg config.Config, cat *models.Catalog, consoleSlot *lateHandler, nc *nats.Conn, store *artifacts.Store,
	m *metrics.Metrics, log zerolog.Logger) (apiAddr string, stop func(), err error) {
	if cfg.Console {
		if err := startConsole(consoleSlot, nc, store, cfg.ConsoleToken, log); err != nil {
			return "", nil, err
		}
	}
	api, err := serveAPI(ctx, cfg, cat, nc, store, m, log)
	if err != nil || api == nil {
		return "", func() {}, err
	}
	return api.Addr, func() { _ = api.Close() }, nil
}

// serveAPI serves the HTTP API on SLUICE_API_ADDR, its own listener, once
// the worker reached NATS; nil when the variable is unset. Its job client
// shares nc, which Run closes.
func serveAPI(ctx context.Context, cfg config.Config, cat *models.Catalog, nc *nats.Conn, store *artifacts.Store, m *metrics.Metrics, log zerolog.Logger) (*http.Server, error) {
	if cfg.APIAddr == "" {
		return nil, nil
	}
	jc, err := jobclient.New(nc, nil)
	if err != nil {
		return nil, err
	}
	keys, err := jc.APIKeys(ctx, true)
	if err != nil {
		return nil, err
	}
	// Owners and idempotency keys go with the job records they stand for.
	keys = keys.WithRecordTTL(cmp.Or(cfg.StateTTL, contract.DefaultStateTTL))
	alog := log.With().Str("component", "api").Logger()
	api, err := httpapi.New(httpapi.Config{
		Client: jc, Keys: keys, Catalog: cat, Presigner: store, PresignTTL: cfg.PresignTTL, Metrics: m, Logger: &alog,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_API_ADDR %s: %w", cfg.APIAddr, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: api, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("api server")
		}
	}()
	log.Info().Str("addr", srv.Addr).Msg("serving the HTTP API /v1/")
	return srv, nil
}
