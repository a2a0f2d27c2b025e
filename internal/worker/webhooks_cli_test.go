package worker_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
)

// TestEnqueueWebhooks drives enqueue webhooks against a worker: add
// refuses bad URLs naming why, a subscription receives verified events,
// rotate prints a new secret both libraries accept, deliveries lists the
// attempts, remove stops them, and the secret is never listed.
func TestEnqueueWebhooks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.Webhooks = true })

	for _, bad := range []string{"not a url", "ftp://h.example.com/x", "https://10.0.0.1/x", "https://localhost/x"} {
		if out, code := b.enqueue(t, "", "webhooks", "add", bad); code != 2 || !strings.Contains(out, "refused") {
			t.Errorf("add %q: exit %d, want 2 and a refusal\n%s", bad, code, out)
		}
	}
	if out, code := b.enqueue(t, "", "webhooks", "add", "https://h.example.com/x", "--events", "video.done"); code != 2 {
		t.Errorf("add --events video.done: exit %d, want 2\n%s", code, out)
	}

	h := &hookReceiver{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.enqueueEnv = append(b.enqueueEnv, "SLUICE_ALLOW_PRIVATE_URLS=true")
	out, code := b.enqueue(t, "", "webhooks", "add", srv.URL+"/in", "--events", "video.succeeded", "--label", "team=a", "--json")
	if code != 0 {
		t.Fatalf("add: exit %d\n%s", code, out)
	}
	var added struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(out), &added); err != nil || added.ID == "" || !strings.HasPrefix(added.Secret, "whsec_") {
		t.Fatalf("add printed %q (%v), want an id and a whsec_ secret", out, err)
	}
	h.mu.Lock()
	h.secret = added.Secret
	h.mu.Unlock()

	spec := videoSpec("cli-hook-1", "a kite")
	spec["labels"] = map[string]string{"team": "a"}
	b.publish(t, "video", "cli-hook-1", spec)
	waitWebhooks(t, h, 1)

	out, code = b.enqueue(t, "", "webhooks", "rotate", added.ID, "--json")
	var rotated struct{ Secret string }
	if code != 0 || json.Unmarshal([]byte(out), &rotated) != nil || rotated.Secret == added.Secret {
		t.Fatalf("rotate: exit %d\n%s", code, out)
	}
	h.mu.Lock()
	h.secret = rotated.Secret // the old one signs too; the new one must verify
	h.mu.Unlock()
	spec = videoSpec("cli-hook-2", "a second kite")
	spec["labels"] = map[string]string{"team": "a"}
	b.publish(t, "video", "cli-hook-2", spec)
	waitWebhooks(t, h, 2)

	out, code = b.enqueue(t, "", "webhooks", "list")
	if code != 0 || !strings.Contains(out, added.ID) || strings.Contains(out, "whsec_") {
		t.Errorf("list: exit %d, want the id and no secret\n%s", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code = b.enqueue(t, "", "webhooks", "deliveries")
		if code == 0 && strings.Contains(out, "cli-hook-2.succeeded") && strings.Contains(out, "delivered") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries: exit %d\n%s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, code = b.enqueue(t, "", "webhooks", "deliveries", "--failed"); code != 0 || strings.Contains(out, "cli-hook") {
		t.Errorf("deliveries --failed: exit %d, want none\n%s", code, out)
	}
	if out, code = b.enqueue(t, "", "webhooks", "replay", added.ID+".cli-hook-1.succeeded"); code != 0 {
		t.Errorf("replay: exit %d\n%s", code, out)
	}
	waitWebhooks(t, h, 3)
	if out, code = b.enqueue(t, "", "webhooks", "remove", added.ID); code != 0 {
		t.Errorf("remove: exit %d\n%s", code, out)
	}
	if out, code = b.enqueue(t, "", "webhooks", "remove", added.ID); code == 0 {
		t.Errorf("remove again: exit 0, want an error\n%s", out)
	}
}
