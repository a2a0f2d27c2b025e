package worker_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestTeamUserActsForItsTenant runs sluice on a server configured with
// config/nats/users.conf (team-acme's password set by the test) and acme
// bound: team-acme's jobs for acme succeed; the server refuses it
// publishing on another tenant's subject, the plain subject or a class
// queue; the producer, whose spec names acme on the plain subject, is
// refused by sluice (tenant_refused, dead-lettered); nothing refused is
// stored or submitted upstream.
func TestTeamUserActsForItsTenant(t *testing.T) {
	const producerPW, workerPW, adminPW, teamPW = "producer-pw-8c4", "worker-pw-1f6", "admin-pw-3d5", "team-pw-6b2"
	t.Setenv("PRODUCER_PASSWORD", producerPW)
	t.Setenv("WORKER_PASSWORD", workerPW)
	t.Setenv("ADMIN_PASSWORD", adminPW)
	conf := usersConf(t)
	for _, u := range conf.Users {
		if u.Username == "team-acme" {
			u.Password = teamPW
		}
	}
	b := setup(t, setupOpts{nats: testenv.NATSOptions{Users: conf.Users, User: "admin", Password: adminPW}})
	hostPort := strings.TrimPrefix(b.nats.URL, "nats://")
	url := func(user, pw string) string { return fmt.Sprintf("nats://%s:%s@%s", user, pw, hostPort) }
	b.enqueueURL = url("admin", adminPW)
	if out, code := b.enqueue(t, "", "tenants", "set", "acme", "--bound"); code != 0 {
		t.Fatalf("tenants set as admin: exit %d: %s", code, out)
	}
	b.start(t, func(c *config.Config) { c.NATSURL, c.Kinds = url("worker", workerPW), []string{"video"} })

	b.enqueueURL = url("team-acme", teamPW)
	video := []string{"video", "--model", "m", "--resolution", "768P", "--duration", "5", "--ratio", "16:9"}
	if out, code := b.enqueue(t, "", append(video, "--id", "team-1", "--prompt", "team acme", "--tenant", "acme", "--wait", "--timeout", "60s")...); code != 0 {
		t.Fatalf("video --tenant acme as team-acme: exit %d\n%s", code, out)
	}
	// enqueue says so as soon as the server refuses it.
	if out, code := b.enqueue(t, "", append(video, "--id", "team-other", "--prompt", "team as other", "--tenant", "other", "--as-tenant")...); code == 0 ||
		!strings.Contains(out, `permission to publish to "sluice.jobs.video.t.other" denied`) {
		t.Errorf("video --tenant other --as-tenant as team-acme: exit %d, want the server's refusal\n%s", code, out)
	}
	refusedByServer(t, url("team-acme", teamPW), contract.TenantSubject("video", "other"), contract.JobSubject("video"),
		contract.ClassSubject("video", 1, "acme"))
	refusedByServer(t, url("producer", producerPW), contract.TenantSubject("video", "acme"), contract.ClassSubject("video", 1, "acme"))

	spec := videoSpec("prod-acme", "producer as acme")
	spec["tenant"] = "acme"
	data, _ := json.Marshal(spec)
	if err := publishAs(t, url("producer", producerPW), contract.JobSubject("video"), string(data)); err != nil {
		t.Fatalf("producer on the plain subject: %v", err)
	}
	if ev := b.await(t, "prod-acme", time.Minute); ev.Data.Error == nil || ev.Data.Error.Code != "tenant_refused" {
		t.Errorf("prod-acme = %s %+v, want failed tenant_refused", ev.Data.Status, ev.Data.Error)
	}
	for _, prompt := range []string{"team as other", "producer as acme", "forged"} {
		if n := b.media.SubmitCount(prompt); n != 0 {
			t.Errorf("%q: %d tasks submitted, want none", prompt, n)
		}
	}
}

// refusedByServer: the user at url may not publish a job on any of
// subjects.
func refusedByServer(t *testing.T, url string, subjects ...string) {
	t.Helper()
	for _, subject := range subjects {
		if err := publishAs(t, url, subject, forgedSpec); err == nil {
			t.Errorf("%s published on %s", strings.SplitN(strings.TrimPrefix(url, "nats://"), ":", 2)[0], subject)
		}
	}
}

// forgedSpec is a job for acme its publisher may not send.
const forgedSpec = `{"kind":"video","tenant":"acme","video":{"model":"m","input":{"prompt":"forged"}}}`

// publishAs publishes data on subject as the user at url.
func publishAs(t *testing.T, url, subject, data string) error {
	t.Helper()
	nc, err := nats.Connect(url, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = []byte(data)
	m.Header.Set(contract.HeaderMsgID, jobIDOf(data))
	_, err = js.PublishMsg(shortContext(t), m)
	return err
}

func jobIDOf(data string) string {
	var spec struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(data), &spec)
	return spec.ID
}
