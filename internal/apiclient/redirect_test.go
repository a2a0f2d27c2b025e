package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// redirector answers every request with a 307 to a second server and
// counts what reaches that one.
func redirector(t *testing.T) (from string, reached *atomic.Int64) {
	t.Helper()
	reached = new(atomic.Int64)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(target.Close)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(src.Close)
	return src.URL, reached
}

// Neither client follows a redirect: it would re-send a paid submit, its
// presigned URLs and the compute password or token to wherever it points.
func TestClientsDoNotFollowRedirects(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	base, reached := redirector(t)
	media, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: base, APIKey: "k", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = media.SubmitVideo(ctx, apiclient.VideoRequest{Model: "m", Input: apiclient.VideoInput{Prompt: "p"}})
	var ae *apiclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTemporaryRedirect {
		t.Errorf("media submit answered by a redirect: err %v, want an *APIError with status 307", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the media client followed the redirect %d times", n)
	}

	base, reached = redirector(t)
	compute, err := apiclient.NewCompute(apiclient.ComputeConfig{BaseURL: base, User: "u", Password: "pw", OrgID: "o", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compute.Cluster(ctx, ""); err == nil {
		t.Error("compute token call answered by a redirect succeeded")
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the compute client followed the redirect (with the password header) %d times", n)
	}
}
