package apiclient

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// ComputeConfig configures a Compute client. Only BaseURL and the three
// credentials are required.
type ComputeConfig struct {
	// BaseURL is the platform's main address ({base_url} of the spec),
	// http or https, without user info, query or fragment. Required.
	BaseURL string
	// User is the platform login sent as header "user". Required.
	User string
	// Password is sent as header "password". Required.
	Password string
	// OrgID is sent as header "orgid". Required.
	OrgID string
	// HTTPClient sends every request, never following a redirect (a copy
	// with its own CheckRedirect is used). Its Timeout should be zero: uploads
	// and downloads are long streams, and each call is bounded by its ctx
	// and AttemptTimeout instead. Defaults to a new client on a clone of
	// http.DefaultTransport.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call, the first included.
	// Defaults to 4.
	MaxAttempts int
	// Backoff spaces retries that have no Retry-After. Defaults to
	// backoff.Exponential{} (200ms doubling to 10s, jittered).
	Backoff backoff.Exponential
	// Sleep waits between retries. Defaults to backoff.Sleep.
	Sleep func(context.Context, time.Duration) error
	// Now is the clock used to read Retry-After dates. Defaults to
	// time.Now.
	Now func() time.Time
	// AttemptTimeout bounds one attempt of a JSON call, the wait for a
	// download's response headers, and the wait for an upload's answer
	// after its last byte was sent. Defaults to 60s.
	AttemptTimeout time.Duration
}

const (
	defaultComputeAttempts = 4
	defaultAttemptTimeout  = 60 * time.Second
	// maxRetryAfterWait is the longest Retry-After a call waits out
	// itself; a longer one ends the call with an error carrying it (see
	// RetryAfterOf) so the caller can reschedule.
	maxRetryAfterWait = 2 * time.Minute
)

func (c ComputeConfig) withDefaults() ComputeConfig {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c.HTTPClient = withoutRedirects(c.HTTPClient)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, defaultComputeAttempts)
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, defaultAttemptTimeout)
	return c
}

// validate checks c and returns the parsed base URL. Errors name the field
// and never echo a credential.
func (c ComputeConfig) validate() (*url.URL, error) {
	u, err := ParseBaseURL(c.BaseURL)
	if err != nil {
		return nil, invalidArg("ComputeConfig.BaseURL", err.Error())
	}
	switch {
	case c.User == "":
		return nil, invalidArg("ComputeConfig.User", "is required")
	case c.Password == "":
		return nil, invalidArg("ComputeConfig.Password", "is required")
	case c.OrgID == "":
		return nil, invalidArg("ComputeConfig.OrgID", "is required")
	case c.MaxAttempts < 0:
		return nil, invalidArg("ComputeConfig.MaxAttempts", "must not be negative")
	case c.AttemptTimeout < 0:
		return nil, invalidArg("ComputeConfig.AttemptTimeout", "must not be negative")
	case c.Backoff.Min < 0 || c.Backoff.Max < 0:
		return nil, invalidArg("ComputeConfig.Backoff", "must not be negative")
	}
	return u, nil
}

// Compute is a client of the compute platform (spec/compute-api.md). It
// caches the per-cluster tokens and one ClusterSession per cluster. Safe for
// concurrent use.
type Compute struct {
	cfg  ComputeConfig
	base *url.URL

	// tokSem serializes token fetches; tokMu guards tokens.
	tokSem chan struct{}
	tokMu  sync.Mutex
	tokens []*tokenState

	// sessSem serializes session resolution; sessMu guards sessions.
	sessSem  chan struct{}
	sessMu   sync.Mutex
	sessions map[string]*ClusterSession
}

// tokenState is one cached token. worked records that some call succeeded
// with it, which makes a later error envelope look like expiry.
type tokenState struct {
	entry  TokenEntry
	worked atomic.Bool
}

// NewCompute validates cfg and returns a client. Nothing is sent until the
// first call. Errors match ErrInvalidArgument and name the field.
func NewCompute(cfg ComputeConfig) (*Compute, error) {
	base, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Compute{
		cfg:      cfg.withDefaults(),
		base:     base,
		tokSem:   make(chan struct{}, 1),
		sessSem:  make(chan struct{}, 1),
		sessions: make(map[string]*ClusterSession),
	}, nil
}

// String describes a token entry without its token, so an entry that
// reaches a log line does not leak it.
func (t TokenEntry) String() string {
	return fmt.Sprintf("{clusterId:%s clusterName:%s token:[redacted]}", t.ClusterID, t.ClusterName)
}

// GoString is String for %#v.
func (t TokenEntry) GoString() string { return "apiclient.TokenEntry" + t.String() }

// Tokens returns the token of every cluster, fetching them on first use and
// after a refresh (see ClusterSession). The token call is retried like an
// idempotent read: it creates nothing billable. Bad credentials give an
// *EnvelopeError matching ErrUnauthorized when the platform answers 401 or
// 403.
func (c *Compute) Tokens(ctx context.Context) ([]TokenEntry, error) {
	states, err := c.tokenStates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TokenEntry, len(states))
	for i, s := range states {
		out[i] = s.entry
	}
	return out, nil
}

func acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tokenStates returns the cached tokens, fetching them once if needed.
func (c *Compute) tokenStates(ctx context.Context) ([]*tokenState, error) {
	c.tokMu.Lock()
	cached := c.tokens
	c.tokMu.Unlock()
	if cached != nil {
		return cached, nil
	}
	if err := acquire(ctx, c.tokSem); err != nil {
		return nil, err
	}
	defer func() { <-c.tokSem }()
	c.tokMu.Lock()
	cached = c.tokens
	c.tokMu.Unlock()
	if cached != nil {
		return cached, nil
	}
	return c.fetchTokens(ctx)
}

// token returns the cached token of clusterID.
func (c *Compute) token(ctx context.Context, clusterID string) (*tokenState, error) {
	states, err := c.tokenStates(ctx)
	if err != nil {
		return nil, err
	}
	return stateOf(states, clusterID)
}

// stateOf returns the token state of clusterID among states.
func stateOf(states []*tokenState, clusterID string) (*tokenState, error) {
	for _, s := range states {
		if s.entry.ClusterID == clusterID {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w: cluster id %q is no longer in the token response", ErrClusterNotFound, clusterID)
}

// refresh fetches new tokens unless another caller already replaced stale,
// and returns the current token of clusterID.
func (c *Compute) refresh(ctx context.Context, clusterID string, stale *tokenState) (*tokenState, error) {
	if err := acquire(ctx, c.tokSem); err != nil {
		return nil, err
	}
	defer func() { <-c.tokSem }()
	c.tokMu.Lock()
	cached := c.tokens
	c.tokMu.Unlock()
	for _, s := range cached {
		if s.entry.ClusterID == clusterID && s != stale {
			return s, nil
		}
	}
	states, err := c.fetchTokens(ctx)
	if err != nil {
		return nil, err
	}
	return stateOf(states, clusterID)
}

// fetchTokens calls the token endpoint and replaces the cache. A token that
// did not change keeps its state. The caller holds tokSem.
func (c *Compute) fetchTokens(ctx context.Context) ([]*tokenState, error) {
	h := make(http.Header)
	h.Set("user", c.cfg.User)
	h.Set("password", c.cfg.Password)
	h.Set("orgid", c.cfg.OrgID)
	res, err := c.exchange(ctx, nil, &request{
		op: "tokens", method: http.MethodPost, svc: svcBase,
		path: "/ac/openapi/v2/tokens", header: h, class: classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	var entries []TokenEntry
	if err := json.Unmarshal(res.data, &entries); err != nil {
		return nil, fmt.Errorf("apiclient: compute tokens: %w: data is not a list of token entries", ErrMalformedResponse)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("apiclient: compute tokens: %w: the response lists no cluster", ErrMalformedResponse)
	}
	for i, e := range entries {
		if e.ClusterID == "" || e.Token == "" {
			return nil, fmt.Errorf("apiclient: compute tokens: %w: entry %d lacks clusterId or token", ErrMalformedResponse, i)
		}
	}
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	states := make([]*tokenState, len(entries))
	for i, e := range entries {
		for _, old := range c.tokens {
			if old.entry == e {
				states[i] = old
			}
		}
		if states[i] == nil {
			states[i] = &tokenState{entry: e}
		}
	}
	c.tokens = states
	return states, nil
}

// secrets lists what must never appear in an error: the password and
// every token known. The user name is not one: it appears in the user's
// own paths (/home/<user>/run.sh), which a failed job's message must show.
func (c *Compute) secrets() []string {
	s := []string{c.cfg.Password}
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	for _, t := range c.tokens {
		s = append(s, t.entry.Token)
	}
	return s
}

// Cluster returns the session of the cluster whose clusterName or clusterId
// is nameOrID ("" = the first cluster of the token response). The first
// call for a cluster fetches the tokens (if not cached) and the center; the
// session is cached and reused. Errors: ErrClusterNotFound for an unknown
// cluster, ErrNoServiceURL when the center lists no enabled efile or hpc
// address, or the failed call's error.
func (c *Compute) Cluster(ctx context.Context, nameOrID string) (*ClusterSession, error) {
	states, err := c.tokenStates(ctx)
	if err != nil {
		return nil, err
	}
	var entry *TokenEntry
	for _, s := range states {
		if nameOrID == "" || s.entry.ClusterName == nameOrID || s.entry.ClusterID == nameOrID {
			entry = &s.entry
			break
		}
	}
	if entry == nil {
		return nil, fmt.Errorf("%w: no cluster named %q in the token response", ErrClusterNotFound, nameOrID)
	}
	c.sessMu.Lock()
	s := c.sessions[entry.ClusterID]
	c.sessMu.Unlock()
	if s != nil {
		return s, nil
	}
	if err := acquire(ctx, c.sessSem); err != nil {
		return nil, err
	}
	defer func() { <-c.sessSem }()
	c.sessMu.Lock()
	s = c.sessions[entry.ClusterID]
	c.sessMu.Unlock()
	if s != nil {
		return s, nil
	}
	s = &ClusterSession{c: c, clusterID: entry.ClusterID, clusterName: entry.ClusterName}
	center, err := s.fetchCenter(ctx)
	if err != nil {
		return nil, err
	}
	if s.efile, err = enabledURLs("efileUrls", center.EfileURLs); err != nil {
		return nil, err
	}
	if s.hpc, err = enabledURLs("hpcUrls", center.HPCURLs); err != nil {
		return nil, err
	}
	s.center = center
	c.sessMu.Lock()
	c.sessions[entry.ClusterID] = s
	c.sessMu.Unlock()
	return s, nil
}
