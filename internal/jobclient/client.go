package jobclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/state"
)

// DefaultURL is the NATS server used when none is configured.
const DefaultURL = "nats://127.0.0.1:4222"

// Config describes the connection of a Client.
type Config struct {
	// URL is one NATS server URL or a comma-separated list of them.
	// Defaults to nats://127.0.0.1:4222.
	URL string
	// Security is the credentials file and the TLS files. Defaults to
	// none: a plain connection without authentication.
	Security natsconn.Security
	// ConnectTimeout bounds connecting to each server. Defaults to 3s.
	ConnectTimeout time.Duration
	// Name is the connection's name in the server's monitoring. Defaults
	// to "sluice-enqueue".
	Name string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.URL = cmp.Or(strings.TrimSpace(c.URL), DefaultURL)
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, 3*time.Second)
	c.Name = cmp.Or(c.Name, "sluice-enqueue")
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("jobclient: ConnectTimeout must not be negative, got %s", c.ConnectTimeout)
	}
	return nil
}

// Client talks to one NATS server (or cluster) on behalf of a producer.
type Client struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	url string // scrubbed, for messages
	now func() time.Time
	// refused learns of the server's refusals of this client's publishes;
	// nil on a connection the caller brought (New).
	refused *refusals
	// jobsStream and scheduler remember, for a long-lived client (the
	// worker's HTTP API), what a publish need not ask again: that
	// SLUICE_JOBS exists and that the scheduler marker is set.
	jobsStream, scheduler atomic.Bool
}

// Dial connects to NATS. It returns a *ConnectError when no server could be
// reached; the error names the servers without their user information.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	secure, err := cfg.Security.Options()
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.ConnectTimeout),
	}, secure...)
	safe := redact.ServerURLs(cfg.URL)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, &ConnectError{URL: safe, Err: cfg.Security.Explain(err)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream on %s: %w", safe, err)
	}
	return &Client{nc: nc, js: js, url: safe, now: cfg.Now, refused: watchRefusals(nc)}, nil
}

// New returns a Client on a connection the caller already has (a worker
// serving the console shares its own); Close then closes nc.
func New(nc *nats.Conn, now func() time.Time) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Client{nc: nc, js: js, url: nc.ConnectedUrlRedacted(), now: now}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// jsErr turns the errors of a JetStream API call that mean "no JetStream
// here" (an API request without responders included) into
// ErrJetStreamDisabled naming the server, and passes every other error
// through.
func (c *Client) jsErr(err error) error {
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) ||
		errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w (%s)", ErrJetStreamDisabled, c.url)
	}
	return err
}

// ensureJobsStream creates SLUICE_JOBS when it does not exist. An existing
// stream is left as it is: its replicas and limits belong to whoever set it
// up, and the worker brings it to the contract's definition at start.
func (c *Client) ensureJobsStream(ctx context.Context) error {
	if c.jobsStream.Load() {
		return nil
	}
	_, err := c.js.Stream(ctx, contract.JobsStream)
	if err == nil {
		c.jobsStream.Store(true)
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return c.jsErr(fmt.Errorf("look up stream %s: %w", contract.JobsStream, err))
	}
	if err := contract.EnsureJobsStream(ctx, c.js, contract.Options{}); err != nil {
		if err = c.jsErr(err); errors.Is(err, ErrJetStreamDisabled) {
			return err
		}
		// A producer with least privilege may read the stream's info but
		// not create it: the workers create it when they start.
		return fmt.Errorf("stream %s does not exist and could not be created (credentials without stream-create permission need a worker to have started once): %w",
			contract.JobsStream, err)
	}
	return nil
}

// stateStore opens SLUICE_STATE. With create it creates the bucket when it
// is missing; otherwise a missing bucket is ErrNotSetUp.
func (c *Client) stateStore(ctx context.Context, create bool) (*state.Store, error) {
	kv, err := c.js.KeyValue(ctx, contract.StateBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return nil, fmt.Errorf("%w (bucket %s does not exist)", ErrNotSetUp, contract.StateBucket)
		}
		kv, err = c.js.CreateKeyValue(ctx, contract.StateBucketConfig(contract.Options{}))
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = c.js.KeyValue(ctx, contract.StateBucket)
		}
	}
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("open bucket %s: %w", contract.StateBucket, err))
	}
	// An empty writer name keeps the worker's name in the records.
	st := state.NewStore(kv, "", c.now)
	st.Direct(c.nc)
	return st, nil
}

// eventsStream looks up SLUICE_EVENTS (its CachedInfo is fresh); a
// missing stream is ErrNotSetUp.
func (c *Client) eventsStream(ctx context.Context) (jetstream.Stream, error) {
	s, err := c.js.Stream(ctx, contract.EventsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w (stream %s does not exist)", ErrNotSetUp, contract.EventsStream)
	}
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("look up stream %s: %w", contract.EventsStream, err))
	}
	return s, nil
}
