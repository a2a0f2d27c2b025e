// Package console is sluice's web console: server-rendered pages over
// jobclient (the jobs with filters and live updates, a job's timeline,
// spec and artifacts, the dead letters, the tenants with their spend) and the operator's actions
// (cancel, retry, replay, purge) behind a token. It is presentation only:
// every answer comes from jobclient, the same query API as the enqueue
// CLI. Its templates, style sheet and small hand-written script are
// embedded; nothing is fetched from elsewhere.
package console

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/jobclient"
)

// Prefix is where the console is served.
const Prefix = "/console/"

//go:embed assets
var assets embed.FS

// Presigner makes a short-lived download URL for an object.
type Presigner interface {
	Presign(ctx context.Context, bucket, key string, ttl time.Duration) (string, error)
}

// Config wires a Console.
type Config struct {
	// Client answers every question and performs every action. Required.
	Client *jobclient.Client
	// Token is what actions require (SLUICE_CONSOLE_TOKEN). Defaults to
	// none: the console is read-only.
	Token string
	// Presigner signs artifact downloads. Defaults to none: no download
	// links.
	Presigner Presigner
	// DownloadTTL is the lifetime of a download link. Defaults to 5m.
	DownloadTTL time.Duration
	// Logger defaults to a disabled logger. The token is never logged.
	Logger *zerolog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Console serves the web console.
type Console struct {
	cfg   Config
	log   zerolog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New returns a Console; mount it at Prefix.
func New(cfg Config) (*Console, error) {
	if cfg.Client == nil {
		return nil, errors.New("console: Client is required")
	}
	cfg.DownloadTTL = cmp.Or(cfg.DownloadTTL, 5*time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Console{cfg: cfg, log: zerolog.Nop(), pages: map[string]*template.Template{}}
	if cfg.Logger != nil {
		c.log = *cfg.Logger
	}
	for _, name := range []string{"jobs", "job", "dlq", "tenants", "webhooks", "error"} {
		t, err := template.New("layout.html").Funcs(c.funcs()).ParseFS(assets, "assets/layout.html", "assets/overview.html", "assets/"+name+".html")
		if err != nil {
			return nil, err
		}
		c.pages[name] = t
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", staticHandler(static)))
	m.HandleFunc("GET "+Prefix+"{$}", c.marked(c.jobsPage))
	m.HandleFunc("GET "+Prefix+"overview", c.overviewFragment)
	m.HandleFunc("GET "+Prefix+"stream", c.stream)
	m.HandleFunc("GET "+Prefix+"jobs/{id}", c.marked(c.jobPage))
	m.HandleFunc("GET "+Prefix+"jobs/{id}/artifacts/{n}", c.download)
	m.HandleFunc("GET "+Prefix+"dlq", c.marked(c.dlqPage))
	m.HandleFunc("GET "+Prefix+"tenants", c.tenantsPage)
	m.HandleFunc("GET "+Prefix+"webhooks", c.webhooksPage)
	m.HandleFunc("POST "+Prefix+"login", c.login)
	m.HandleFunc("POST "+Prefix+"logout", c.logout)
	m.Handle("POST "+Prefix+"jobs/{id}/cancel", c.action(c.cancel))
	m.Handle("POST "+Prefix+"jobs/{id}/retry", c.action(c.retry))
	m.Handle("POST "+Prefix+"dlq/{seq}/replay", c.action(c.replay))
	m.Handle("POST "+Prefix+"dlq/{seq}/purge", c.action(c.purge))
	c.mux = m
	return c, nil
}

// ServeHTTP serves the console's pages, its stream and its actions.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	c.mux.ServeHTTP(w, r)
}

func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// sessionCookie holds a login: a MAC of the token, never the token.
const sessionCookie = "sluice_console"

func (c *Console) session() string {
	m := hmac.New(sha256.New, []byte(c.cfg.Token))
	m.Write([]byte("sluice console session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// authorize decides an action: 403 when no token is set or the one given
// is wrong, 401 when none is given; 0 when allowed.
func (c *Console) authorize(r *http.Request) (int, string) {
	if c.cfg.Token == "" {
		return http.StatusForbidden, "actions are disabled: SLUICE_CONSOLE_TOKEN is not set, so the console is read-only"
	}
	if h := r.Header.Get("Authorization"); h != "" {
		given, ok := strings.CutPrefix(h, "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(given), []byte(c.cfg.Token)) == 1 {
			return 0, ""
		}
		return http.StatusForbidden, "wrong console token"
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if subtle.ConstantTimeCompare([]byte(ck.Value), []byte(c.session())) == 1 {
			return 0, ""
		}
		return http.StatusForbidden, "the console token changed: log in again"
	}
	return http.StatusUnauthorized, "log in with the console token (SLUICE_CONSOLE_TOKEN) to act"
}

// loggedIn reports whether r carries a valid login.
func (c *Console) loggedIn(r *http.Request) bool {
	code, _ := c.authorize(r)
	return code == 0
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	back := safeBack(r.FormValue("back"))
	if c.cfg.Token == "" {
		http.Error(w, "actions are disabled: SLUICE_CONSOLE_TOKEN is not set", http.StatusForbidden)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.FormValue("token")), []byte(c.cfg.Token)) != 1 {
		redirect(w, r, back, "", "wrong console token")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: c.session(), Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 12 * 3600})
	redirect(w, r, back, "logged in: actions are enabled", "")
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	redirect(w, r, safeBack(r.FormValue("back")), "logged out", "")
}

// action wraps an action handler with the token check. A refused action
// from a browser form goes back with the reason; from a script it is a
// plain 401 or 403.
func (c *Console) action(h func(w http.ResponseWriter, r *http.Request) (msg string, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		back := safeBack(r.FormValue("back"))
		if code, why := c.authorize(r); code != 0 {
			http.Error(w, why, code)
			return
		}
		msg, err := h(w, r)
		if err != nil {
			c.log.Warn().Str("path", r.URL.Path).Err(err).Msg("console action failed")
			redirect(w, r, back, "", err.Error())
			return
		}
		c.log.Info().Str("path", r.URL.Path).Str("result", msg).Msg("console action")
		redirect(w, r, back, msg, "")
	})
}

// safeBack keeps a redirect inside the console.
func safeBack(s string) string {
	if !strings.HasPrefix(s, Prefix) || strings.HasPrefix(s, "//") || strings.Contains(s, "\\") {
		return Prefix
	}
	return s
}

// redirect sends the browser back with a message or an error to show,
// in place of any the page showed before.
func redirect(w http.ResponseWriter, r *http.Request, back, msg, errMsg string) {
	u, err := url.Parse(back)
	if err != nil {
		u = &url.URL{Path: Prefix}
	}
	q := u.Query()
	q.Del("msg")
	q.Del("error")
	switch {
	case errMsg != "":
		q.Set("error", errMsg)
	case msg != "":
		q.Set("msg", msg)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}
