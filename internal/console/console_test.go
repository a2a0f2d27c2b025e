package console_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/console"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

const token = "console-token-SECRET-81c3"

// serve starts a console with token over a real NATS server set up as a
// worker would, and returns its base URL, its log and the server.
func serve(t *testing.T, token string) (string, *bytes.Buffer, *testenv.NATS) {
	t.Helper()
	n := testenv.StartNATS(t)
	if err := contract.Ensure(testenv.Context(t, 10*time.Second), n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	c, err := console.New(console.Config{Client: jc, Token: token, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv.URL, &logs, n
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func post(t *testing.T, u, auth string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Every action answers 401 without a token, 403 with a wrong one, and 403
// always when no token is set; the right token acts; the token is never
// logged.
func TestActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	t.Run("no token set: read-only", func(t *testing.T) {
		base, _, _ := serve(t, "")
		for _, auth := range []string{"", "Bearer anything"} {
			if resp := post(t, base+"/console/jobs/j1/cancel", auth, nil); resp.StatusCode != http.StatusForbidden {
				t.Errorf("cancel with %q: %d, want 403", auth, resp.StatusCode)
			}
		}
		resp, err := http.Get(base + "/console/")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("reading: %v %v", resp, err)
		}
		resp.Body.Close()
	})
	t.Run("token set", func(t *testing.T) {
		base, logs, _ := serve(t, token)
		for _, path := range []string{"/console/jobs/j1/cancel", "/console/jobs/j1/retry", "/console/dlq/1/replay", "/console/dlq/1/purge"} {
			if resp := post(t, base+path, "", nil); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s without a token: %d, want 401", path, resp.StatusCode)
			}
			if resp := post(t, base+path, "Bearer nope", nil); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s with a wrong token: %d, want 403", path, resp.StatusCode)
			}
		}
		// The token lets the action through; the job does not exist,
		// which the page is told.
		resp := post(t, base+"/console/jobs/j1/cancel", "Bearer "+token, url.Values{"back": {"/console/jobs/j1"}})
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "error=no+such+job+j1") {
			t.Errorf("cancel with the token: %d to %q", resp.StatusCode, loc)
		}
		// A login keeps a cookie that is not the token.
		resp = post(t, base+"/console/login", "", url.Values{"token": {token}, "back": {"/console/"}})
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			cookie = c
		}
		if cookie == nil || strings.Contains(cookie.Value, token) || !cookie.HttpOnly {
			t.Fatalf("login cookie = %+v", cookie)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/console/jobs/j2/cancel", nil)
		req.AddCookie(cookie)
		r2, err := noRedirect.Do(req)
		if err != nil || r2.StatusCode != http.StatusSeeOther {
			t.Fatalf("cancel after login: %v %v", r2, err)
		}
		r2.Body.Close()
		if resp := post(t, base+"/console/login", "", url.Values{"token": {"wrong"}}); !strings.Contains(resp.Header.Get("Location"), "error=") {
			t.Errorf("wrong login: %q", resp.Header.Get("Location"))
		}
		if strings.Contains(logs.String(), token) {
			t.Errorf("the token was logged:\n%s", logs)
		}
		if !strings.Contains(logs.String(), "console action") {
			t.Errorf("actions are not logged:\n%s", logs)
		}
	})
}

// A redirect after an action never leaves the console.
func TestBackStaysInTheConsole(t *testing.T) {
	t.Parallel()
	base, _, _ := serve(t, token)
	for _, back := range []string{"https://evil.example/", "//evil.example/console/", "/elsewhere"} {
		resp := post(t, base+"/console/logout", "", url.Values{"back": {back}})
		if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/console/") || strings.HasPrefix(loc, "//") {
			t.Errorf("back %q redirected to %q", back, loc)
		}
	}
}
