package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// ComputeConfig configures a Compute client. BaseURL, User and either
// Password and OrgID (the token form of compute-api.md) or AccessKey and
// SecretKey (the AK/SK login of the platform) are required.
type ComputeConfig struct {
	// BaseURL is the platform's main address ({base_url} of the spec:
	// the center), http or https, without user info, query or fragment.
	// Required.
	BaseURL string
	// User is the platform login sent as header "user". Required.
	User string
	// Password is sent as header "password" in the token form. Required
	// unless AccessKey is set.
	Password string
	// OrgID is sent as header "orgid" in the token form. Required unless
	// AccessKey is set.
	OrgID string
	// AccessKey, when set, selects the AK/SK login (POST
	// {AuthURL}/api/user/v3/tokens) instead of the token form. Defaults
	// to "".
	AccessKey string
	// SecretKey signs the AK/SK login; it is never sent, logged or put in
	// an error. Required with AccessKey. Defaults to "".
	SecretKey string
	// AuthURL is the base of the AK/SK token service. Defaults to
	// BaseURL.
	AuthURL string
	// Region is the clusterId or clusterName that Cluster(ctx, "") opens.
	// Defaults to "", the first usable region of the token answer.
	Region string
	// ChunkSize is the size above which Upload switches to the chunked
	// upload (burst + merge), and the size of its chunks. Defaults to 0,
	// never (a single request whatever the size).
	ChunkSize int64
	// OnToken, when set, is told of every token the client obtains: "login"
	// for a token call (AK/SK or token form), "renewal" for a token renewed
	// through tokens/next. It must not block. Defaults to nil.
	OnToken func(how string)
	// Logger receives the client's warnings (a suspended region). Defaults
	// to a disabled logger.
	Logger *zerolog.Logger
	// Simulated: the platform is sluice's simulator (the embedded
	// default), whose suspended region is one of its features, said once
	// at info rather than warned.
	Simulated bool
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
	// after its last byte was sent; it is also how long one read of a
	// download's body or one write of an upload's may wait for a byte
	// before the transfer fails as stalled. Defaults to 60s.
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
	c.AuthURL = cmp.Or(c.AuthURL, c.BaseURL)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// validate checks c and returns the parsed base and auth URLs. Errors name
// the field and never echo a credential.
func (c ComputeConfig) validate() (base, auth *url.URL, err error) {
	base, err = ParseBaseURL(c.BaseURL)
	if err != nil {
		return nil, nil, invalidArg("ComputeConfig.BaseURL", err.Error())
	}
	auth = base
	if c.AuthURL != "" {
		if auth, err = ParseBaseURL(c.AuthURL); err != nil {
			return nil, nil, invalidArg("ComputeConfig.AuthURL", err.Error())
		}
	}
	switch {
	case c.User == "":
		return nil, nil, invalidArg("ComputeConfig.User", "is required")
	case c.AccessKey != "" && c.SecretKey == "":
		return nil, nil, invalidArg("ComputeConfig.SecretKey", "is required with AccessKey")
	case c.AccessKey == "" && c.SecretKey != "":
		return nil, nil, invalidArg("ComputeConfig.AccessKey", "is required with SecretKey")
	case c.AccessKey == "" && c.Password == "":
		return nil, nil, invalidArg("ComputeConfig.Password", "is required (or AccessKey and SecretKey)")
	case c.AccessKey == "" && c.OrgID == "":
		return nil, nil, invalidArg("ComputeConfig.OrgID", "is required (or AccessKey and SecretKey)")
	case c.ChunkSize < 0:
		return nil, nil, invalidArg("ComputeConfig.ChunkSize", "must not be negative")
	case c.MaxAttempts < 0:
		return nil, nil, invalidArg("ComputeConfig.MaxAttempts", "must not be negative")
	case c.AttemptTimeout < 0:
		return nil, nil, invalidArg("ComputeConfig.AttemptTimeout", "must not be negative")
	case c.Backoff.Min < 0 || c.Backoff.Max < 0:
		return nil, nil, invalidArg("ComputeConfig.Backoff", "must not be negative")
	}
	return base, auth, nil
}

// Compute is a client of the compute platform (spec/compute-api.md). It
// caches the per-cluster tokens and one ClusterSession per cluster. Safe for
// concurrent use.
type Compute struct {
	cfg  ComputeConfig
	base *url.URL
	auth *url.URL

	// tokSem serializes token fetches; tokMu guards tokens, sigs and
	// warned.
	tokSem chan struct{}
	tokMu  sync.Mutex
	tokens []*tokenState
	sigs   []string        // the last AK/SK signatures sent, for scrubbing
	spent  []string        // the last tokens replaced, for scrubbing
	warned map[string]bool // regions already logged as suspended

	// sessSem serializes session resolution; sessMu guards sessions.
	sessSem  chan struct{}
	sessMu   sync.Mutex
	sessions map[string]*ClusterSession
}

// tokenState is one cached token. worked records that some call succeeded
// with it, which makes a later error envelope look like expiry. expires is
// when it stops working: the expireTime its JWT payload carries, else
// assumedTokenLife after it was obtained. refreshAt, when not zero, is
// when the token is renewed before a call (renewAfter of its life).
// confirmedAt is when a refresh last handed this same token back.
type tokenState struct {
	entry       TokenEntry
	expires     time.Time
	refreshAt   atomic.Int64 // unix nanoseconds; 0 = none
	worked      atomic.Bool
	confirmedAt atomic.Int64 // unix nanoseconds; 0 = never
}

// assumedTokenLife is the life of a token whose expiry its payload does
// not say: the platform's tokens last 24 hours (platform-evidence.md
// section 7).
const assumedTokenLife = 24 * time.Hour

// renewAfter is the part of a token's life after which it is renewed: a
// fifth of it left is room for a renewal that fails to fall back to a
// login well before the token expires.
const renewAfter = 0.8

// newTokenState is the state of entry obtained at now, its renewal
// scheduled.
func newTokenState(entry TokenEntry, now time.Time) *tokenState {
	st := &tokenState{entry: entry, expires: now.Add(assumedTokenLife)}
	if exp, ok := jwtExpiry(entry.Token); ok {
		st.expires = exp
	}
	if life := st.expires.Sub(now); life > 0 {
		st.refreshAt.Store(now.Add(time.Duration(float64(life) * renewAfter)).UnixNano())
	}
	return st
}

// tokenConfirmedFor is how long after a refresh handed the same token
// back an error envelope is taken for the call's own error, not the
// token's expiry: a token lives for hours, and a call that expects error
// envelopes (the exit status file polled before it exists) would
// otherwise log in again at every poll.
const tokenConfirmedFor = time.Minute

// expiryPossible reports whether an error envelope answered with this
// token may mean it expired: it worked before, and no refresh confirmed it
// within tokenConfirmedFor of now.
func (t *tokenState) expiryPossible(now time.Time) bool {
	at := t.confirmedAt.Load()
	return t.worked.Load() && (at == 0 || now.Sub(time.Unix(0, at)) >= tokenConfirmedFor)
}

// NewCompute validates cfg and returns a client. Nothing is sent until the
// first call. Errors match ErrInvalidArgument and name the field.
func NewCompute(cfg ComputeConfig) (*Compute, error) {
	base, auth, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Compute{
		cfg:      cfg.withDefaults(),
		base:     base,
		auth:     auth,
		warned:   make(map[string]bool),
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

// Tokens returns the token of every usable region (suspended regions and
// the platform's own entry left out), fetching them on first use and
// after a refresh (see ClusterSession). The token call is retried like an
// idempotent read: it creates nothing billable. Bad credentials give an
// *EnvelopeError matching ErrUnauthorized when the platform answers 401 or
// 403.
func (c *Compute) Tokens(ctx context.Context) ([]TokenEntry, error) {
	states, err := c.tokenStates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TokenEntry, 0, len(states))
	for _, s := range states {
		if s.entry.usable() {
			out = append(out, s.entry)
		}
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

// token returns the cached token of clusterID, replaced first when its
// JWT is about to expire.
func (c *Compute) token(ctx context.Context, clusterID string) (*tokenState, error) {
	states, err := c.tokenStates(ctx)
	if err != nil {
		return nil, err
	}
	s, err := stateOf(states, clusterID)
	if err != nil {
		return nil, err
	}
	if s.due(c.cfg.Now()) {
		// The token still works until its expiry: a failed early
		// renewal is no reason to fail the call.
		if fresh, err := c.refresh(ctx, clusterID, s, true); err == nil {
			return fresh, nil
		}
	}
	return s, nil
}

// due reports whether s is to be renewed before a call at now.
func (s *tokenState) due(now time.Time) bool {
	at := s.refreshAt.Load()
	return at != 0 && !now.Before(time.Unix(0, at))
}

// renewRetry is how long after a failed early renewal (and its login) the
// token is renewed again: it still works, and the calls sharing it use it
// meanwhile instead of each asking the token service in turn.
const renewRetry = time.Minute

// renewToken calls POST {base}/ac/openapi/v2/tokens/next with stale's
// token and puts the token it answers in stale's place. The answer's data
// is read liberally: the token as a string, or an object with a token
// field. The caller holds tokSem.
func (c *Compute) renewToken(ctx context.Context, stale *tokenState) (*tokenState, error) {
	h := make(http.Header)
	h.Set("token", stale.entry.Token)
	res, err := c.exchange(ctx, nil, &request{
		op: "renew token", method: http.MethodPost, svc: svcBase,
		path: "/ac/openapi/v2/tokens/next", header: h, jsonBody: []byte("{}"), class: classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	var tok string
	if json.Unmarshal(res.data, &tok) != nil {
		var obj struct {
			Token string `json:"token"`
		}
		_ = json.Unmarshal(res.data, &obj)
		tok = obj.Token
	}
	switch tok = strings.TrimSpace(tok); tok {
	case "":
		return nil, fmt.Errorf("apiclient: compute renew token: %w: data holds no token", ErrMalformedResponse)
	case stale.entry.Token:
		// Nothing was renewed: a login replaces it instead of a renewal
		// asked again at every call until it expires.
		return nil, fmt.Errorf("apiclient: compute renew token: %w: the answer is the same token", ErrMalformedResponse)
	}
	entry := stale.entry
	entry.Token = tok
	fresh := newTokenState(entry, c.cfg.Now())
	c.tokMu.Lock()
	states := slices.Clone(c.tokens)
	for i, st := range states {
		if st == stale {
			states[i] = fresh
		}
	}
	c.replaceTokens(states)
	c.tokMu.Unlock()
	c.obtained("renewal")
	return fresh, nil
}

// maxSpent bounds the replaced tokens kept for scrubbing (and the AK/SK
// signatures): an answer may quote a token a little after it was
// replaced, not days later.
const maxSpent = 16

// replaceTokens makes states the cached tokens, keeping every token it
// drops among the spent ones, so that an error quoting it is still
// scrubbed. The caller holds tokMu.
func (c *Compute) replaceTokens(states []*tokenState) {
	for _, old := range c.tokens {
		if !slices.ContainsFunc(states, func(st *tokenState) bool { return st.entry.Token == old.entry.Token }) {
			c.spent = lastOf(append(c.spent, old.entry.Token), maxSpent)
		}
	}
	c.tokens = states
}

// lastOf keeps the last n entries of list.
func lastOf(list []string, n int) []string {
	if len(list) > n {
		return list[len(list)-n:]
	}
	return list
}

// obtained tells OnToken how a token was obtained.
func (c *Compute) obtained(how string) {
	if c.cfg.OnToken != nil {
		c.cfg.OnToken(how)
	}
}

// stateOf returns the token state of the usable region clusterID among
// states.
func stateOf(states []*tokenState, clusterID string) (*tokenState, error) {
	for _, s := range states {
		if s.entry.ClusterID == clusterID && s.entry.usable() {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w: cluster id %q is no longer a usable region of the token answer", ErrClusterNotFound, clusterID)
}

// refresh replaces stale, the token of clusterID, unless another caller
// already did, and returns the current token of clusterID. A token due
// for renewal (renew) that has not expired is renewed through tokens/next
// (that region's token alone, no login); otherwise, or when the renewal
// fails, a new login fetches every token.
func (c *Compute) refresh(ctx context.Context, clusterID string, stale *tokenState, renew bool) (*tokenState, error) {
	if err := acquire(ctx, c.tokSem); err != nil {
		return nil, err
	}
	defer func() { <-c.tokSem }()
	c.tokMu.Lock()
	cached := c.tokens
	c.tokMu.Unlock()
	if cur, err := stateOf(cached, clusterID); err == nil && cur != stale {
		return cur, nil
	}
	if renew && !stale.due(c.cfg.Now()) {
		// A caller before this one just tried and failed.
		return stale, nil
	}
	if renew && c.cfg.Now().Before(stale.expires) {
		fresh, err := c.renewToken(ctx, stale)
		if err == nil {
			return fresh, nil
		}
		c.cfg.Logger.Info().Err(err).Str("cluster_id", clusterID).Msg("compute token renewal failed; logging in instead")
	}
	states, err := c.fetchTokens(ctx)
	if err != nil {
		if renew {
			stale.refreshAt.Store(c.cfg.Now().Add(renewRetry).UnixNano())
		}
		return nil, err
	}
	return stateOf(states, clusterID)
}

// platform reports whether t is the platform's own entry (clusterId "0",
// clusterName "ac"), whose token serves no job, file or container call.
func (t TokenEntry) platform() bool { return t.ClusterID == "0" || t.ClusterName == "ac" }

// usable reports whether t is a region that jobs, files and containers
// can use: not the platform's entry, and not suspended (token null).
func (t TokenEntry) usable() bool { return t.Token != "" && !t.platform() }

// suspended says that region e is suspended: a warning, or on the
// simulator a note on one of its features.
func (c *Compute) suspended(e TokenEntry) {
	if c.cfg.Simulated {
		c.cfg.Logger.Info().Str("region", e.ClusterName).Str("cluster_id", e.ClusterID).
			Msg("the simulated compute platform lists a suspended region, as a real one may; jobs do not use it")
		return
	}
	c.cfg.Logger.Warn().Str("region", e.ClusterName).Str("cluster_id", e.ClusterID).
		Msg("compute region is suspended (the token answer gives it no token); jobs cannot use it")
}

// fetchTokens calls the token endpoint (the AK/SK login when an access
// key is configured, else the token form) and replaces the cache. A token
// that did not change keeps its state. The caller holds tokSem.
func (c *Compute) fetchTokens(ctx context.Context) ([]*tokenState, error) {
	rq := c.tokenRequest()
	res, err := c.exchange(ctx, nil, rq)
	if err != nil {
		return nil, c.loginError(err)
	}
	var entries []TokenEntry
	if err := json.Unmarshal(res.data, &entries); err != nil {
		return nil, fmt.Errorf("apiclient: compute tokens: %w: data is not a list of token entries", ErrMalformedResponse)
	}
	var usable, suspended []string
	for i, e := range entries {
		switch {
		case e.ClusterID == "":
			return nil, fmt.Errorf("apiclient: compute tokens: %w: entry %d lacks clusterId", ErrMalformedResponse, i)
		case e.usable():
			usable = append(usable, e.ClusterName)
		case e.Token == "":
			suspended = append(suspended, e.ClusterName)
		}
	}
	if len(usable) == 0 {
		return nil, fmt.Errorf("apiclient: compute tokens: %w: the token answer lists no usable region (suspended: %s)", ErrClusterNotFound, strings.Join(suspended, ", "))
	}
	now := c.cfg.Now()
	defer c.obtained("login")
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	states := make([]*tokenState, len(entries))
	for i, e := range entries {
		if e.Token == "" && !e.platform() && !c.warned[e.ClusterID] {
			c.warned[e.ClusterID] = true
			c.suspended(e)
		}
		for _, old := range c.tokens {
			if old.entry == e {
				// The platform handed the same token back: refreshing
				// ahead of its expiry again would only repeat this.
				old.refreshAt.Store(0)
				old.confirmedAt.Store(now.UnixNano())
				states[i] = old
			}
		}
		if states[i] == nil {
			states[i] = newTokenState(e, now)
		}
	}
	c.replaceTokens(states)
	return states, nil
}

// jwtExpiry reads expireTime (milliseconds since the epoch, a string or a
// number) from the payload of a JWT-shaped token. The signature is not
// checked: the expiry only schedules a refresh.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		ExpireTime json.Number `json:"expireTime"`
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		return time.Time{}, false
	}
	ms, err := claims.ExpireTime.Int64()
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// tokenRequest builds the login: the AK/SK form (platform-evidence.md
// section 4) when an access key is set, else the token form of
// compute-api.md.
func (c *Compute) tokenRequest() *request {
	h := make(http.Header)
	h.Set("user", c.cfg.User)
	if c.cfg.AccessKey == "" {
		h.Set("password", c.cfg.Password)
		h.Set("orgid", c.cfg.OrgID)
		return &request{
			op: "tokens", method: http.MethodPost, svc: svcBase,
			path: "/ac/openapi/v2/tokens", header: h, class: classIdempotent,
		}
	}
	ts := strconv.FormatInt(c.cfg.Now().Unix(), 10)
	sig := SignAKSK(c.cfg.AccessKey, c.cfg.SecretKey, c.cfg.User, ts)
	c.tokMu.Lock()
	c.sigs = lastOf(append(c.sigs, sig), maxSpent)
	c.tokMu.Unlock()
	h.Set("accessKey", c.cfg.AccessKey)
	h.Set("timestamp", ts)
	h.Set("signature", sig)
	return &request{
		op: "tokens", method: http.MethodPost, svc: svcAuth,
		path: "/api/user/v3/tokens", header: h, class: classIdempotent,
	}
}

// SignAKSK returns the signature of the AK/SK login: lower-case hex
// HMAC-SHA256, keyed with secretKey, over exactly
// {"accessKey":"<ak>","timestamp":"<ts>","user":"<user>"} (that key
// order, no spaces, no HTML escaping).
func SignAKSK(accessKey, secretKey, user, timestamp string) string {
	mac := hmac.New(sha256.New, []byte(secretKey))
	mac.Write([]byte(`{"accessKey":` + jsonString(accessKey) + `,"timestamp":` + jsonString(timestamp) + `,"user":` + jsonString(user) + `}`))
	return hex.EncodeToString(mac.Sum(nil))
}

// jsonString encodes s as a JSON string without HTML escaping, as the
// platform's signers (Python's json.dumps) do.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// loginError names the variables to check when the platform refuses the
// AK/SK login: an error envelope (10009 for a bad signature or unknown
// user) or HTTP 401/403. The error matches ErrUnauthorized.
func (c *Compute) loginError(err error) error {
	env, ok := errors.AsType[*EnvelopeError](err)
	if c.cfg.AccessKey == "" || !ok || env.Temporary() {
		return err
	}
	if env.Status >= 200 && env.Status < 300 || env.authRejected() {
		return fmt.Errorf("%w: the AK/SK login was refused (%w); check SLUICE_COMPUTE_SECRET_KEY, SLUICE_COMPUTE_ACCESS_KEY and SLUICE_COMPUTE_USER", ErrUnauthorized, err)
	}
	return err
}

// secrets lists what must never appear in an error: the password, the
// secret key, the AK/SK signatures sent, every token known and the last
// ones replaced. The user name is not one: it appears in the user's own
// paths (/home/<user>/run.sh), which a failed job's message must show.
func (c *Compute) secrets() []string {
	s := []string{c.cfg.Password, c.cfg.SecretKey}
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	s = append(s, c.sigs...)
	s = append(s, c.spent...)
	for _, t := range c.tokens {
		s = append(s, t.entry.Token)
	}
	return s
}

// Cluster returns the session of the region whose clusterName or clusterId
// is nameOrID ("" = ComputeConfig.Region, or else the first usable region
// of the token answer). The first call for a region fetches the tokens
// (if not cached) and the center (with the region's token); the session
// is cached and reused. Errors: ErrClusterNotFound for an unknown,
// suspended (token null) or platform ("0"/"ac") region, ErrNoServiceURL
// when the center lists no enabled efile or hpc address, or the failed
// call's error.
func (c *Compute) Cluster(ctx context.Context, nameOrID string) (*ClusterSession, error) {
	states, err := c.tokenStates(ctx)
	if err != nil {
		return nil, err
	}
	entry, err := c.pickRegion(states, nameOrID)
	if err != nil {
		return nil, err
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
	if s.efile, err = enabledURLs("efileUrls", "/efile", center.EfileURLs); err != nil {
		return nil, err
	}
	if s.hpc, err = enabledURLs("hpcUrls", "/hpc", center.HPCURLs); err != nil {
		return nil, err
	}
	// Containers are a later call's business: a region without them
	// still runs jobs.
	s.ai, _ = enabledURLs("aiUrls", "/ai", center.AIURLs)
	s.center = center
	c.sessMu.Lock()
	c.sessions[entry.ClusterID] = s
	c.sessMu.Unlock()
	return s, nil
}

// pickRegion finds the region nameOrID names (or the configured default,
// or the first usable one) and refuses the ones no job can use.
func (c *Compute) pickRegion(states []*tokenState, nameOrID string) (TokenEntry, error) {
	what := "cluster"
	if nameOrID == "" && c.cfg.Region != "" {
		nameOrID, what = c.cfg.Region, "ComputeConfig.Region (SLUICE_COMPUTE_REGION)"
	}
	for _, s := range states {
		e := s.entry
		switch {
		case nameOrID == "" && e.usable():
			return e, nil
		case nameOrID == "" || (e.ClusterName != nameOrID && e.ClusterID != nameOrID):
		case e.platform():
			return TokenEntry{}, fmt.Errorf("%w: %s %q is the platform's own entry (clusterId 0, clusterName ac), which cannot run jobs, files or containers", ErrClusterNotFound, what, nameOrID)
		case !e.usable():
			return TokenEntry{}, fmt.Errorf("%w: %s %q is a suspended region (the token answer gives it no token)", ErrClusterNotFound, what, nameOrID)
		default:
			return e, nil
		}
	}
	return TokenEntry{}, fmt.Errorf("%w: %s %q names no region of the token answer; usable regions: %s", ErrClusterNotFound, what, nameOrID, usableRegions(states))
}

// usableRegions lists the regions a job can use, "name (id)" each, for an
// error naming a region that is not one of them.
func usableRegions(states []*tokenState) string {
	var names []string
	for _, s := range states {
		if e := s.entry; e.usable() && !e.platform() {
			names = append(names, fmt.Sprintf("%s (%s)", e.ClusterName, e.ClusterID))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
