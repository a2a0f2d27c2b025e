package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestKeys: keys create prints a key once that authenticates for its
// tenant with its limits, list shows ids and never a secret, revoke ends
// the key and an unknown id exits 6; bad flags exit 2 naming each one and
// write nothing.
func TestKeys(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"keys", "create"}, []string{"--tenant"}},
		{[]string{"keys", "create", "--tenant", "a b", "--kinds", "audio", "--max-priority", "9", "--rate", "fast"},
			[]string{"--tenant", "--kinds", "--max-priority", "--rate"}},
	} {
		code, _, errs := enqueueOn(ctx, n.URL, tt.args...)
		for _, w := range tt.want {
			if code != 2 || !strings.Contains(errs, w) {
				t.Errorf("%v: exit %d, stderr %q, want 2 naming %s", tt.args, code, errs, w)
			}
		}
	}

	code, out, errs := enqueueOn(ctx, n.URL, "keys", "create", "--tenant", "acme", "--kinds", "video,speech", "--max-priority", "2", "--rate", "5/s", "--json")
	var created struct {
		apikeys.Key
		Token string `json:"key"`
	}
	if err := json.Unmarshal([]byte(out), &created); code != 0 || err != nil || created.Token == "" || created.Hash != "" {
		t.Fatalf("create: exit %d %q %q (%v)", code, out, errs, err)
	}
	_, secret, _ := apikeys.SplitToken(created.Token)
	store, err := apikeysStore(t, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	k, err := store.Authenticate(ctx, created.Token)
	if err != nil || k.Tenant != "acme" || k.MaxPriority != 2 || k.Rate != 5 || strings.Join(k.Kinds, ",") != "video,speech" {
		t.Fatalf("the created key authenticates as %+v (%v)", k, err)
	}
	for _, args := range [][]string{{"keys", "list"}, {"keys", "list", "--json"}} {
		code, out, _ := enqueueOn(ctx, n.URL, args...)
		if code != 0 || !strings.Contains(out, created.ID) || strings.Contains(out, secret) || strings.Contains(out, k.Hash) {
			t.Errorf("%v: exit %d %q", args, code, out)
		}
	}
	if code, _, errs := enqueueOn(ctx, n.URL, "keys", "revoke", created.ID, "000000000000"); code != 6 || !strings.Contains(errs, "000000000000: no such key") {
		t.Errorf("revoke: exit %d %q", code, errs)
	}
	if _, err := store.Authenticate(ctx, created.Token); err == nil {
		t.Error("a revoked key still authenticates")
	}
}

func apikeysStore(t *testing.T, url string) (*apikeys.Store, error) {
	t.Helper()
	client, err := jobclient.Dial(testenv.Context(t, 10*time.Second), jobclient.Config{URL: url})
	if err != nil {
		return nil, err
	}
	t.Cleanup(client.Close)
	return client.APIKeys(testenv.Context(t, 10*time.Second), false)
}
