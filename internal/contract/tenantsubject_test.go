package contract_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestTenantSubjects(t *testing.T) {
	t.Parallel()
	if got := contract.TenantSubject("video", "acme"); got != "sluice.jobs.video.t.acme" {
		t.Errorf("TenantSubject = %q", got)
	}
	if got := contract.TenantsFilter("video"); got != "sluice.jobs.video.t.*" {
		t.Errorf("TenantsFilter = %q", got)
	}
	tests := []struct {
		subject      string
		kind, tenant string
		served       bool
	}{
		{"sluice.jobs.video.t.acme", "video", "acme", true},
		{"sluice.jobs.pipeline.t.team_1-a", "pipeline", "team_1-a", true},
		{"sluice.jobs.video", "", "", true},
		{"sluice.jobs.video.t", "", "", false},
		{"sluice.jobs.video.t.", "", "", false},
		{"sluice.jobs.video.t.a.b", "", "", false},
		// The kind consumer's filter (sluice.jobs.video.t.*) delivers any
		// token: served, for no tenant.
		{"sluice.jobs.video.t.-a", "", "", true},
		{"sluice.jobs.vidoe.t.acme", "", "", false},
		{"sluice.jobs.unknown.t.acme", "", "", false},
		{"sluice.jobs.video.x.acme", "", "", false},
		{"other.video.t.acme", "", "", false},
	}
	for _, tt := range tests {
		kind, tenant, ok := contract.ParseTenantSubject(tt.subject)
		if kind != tt.kind || tenant != tt.tenant || ok != (tt.tenant != "") {
			t.Errorf("ParseTenantSubject(%q) = %q, %q, %v", tt.subject, kind, tenant, ok)
		}
		if got := contract.Served(tt.subject); got != tt.served {
			t.Errorf("Served(%q) = %v, want %v", tt.subject, got, tt.served)
		}
	}
	for subject, want := range map[string]string{
		"sluice.jobs.video": "video", "sluice.jobs.video.t.acme": "video", "sluice.jobs.video.t.a.b": "", "sluice.jobs.video.q.1.acme": "",
		"sluice.jobs.video.t.-a": "video",
	} {
		if got, _ := contract.IntakeKind(subject); got != want {
			t.Errorf("IntakeKind(%q) = %q, want %q", subject, got, want)
		}
	}
}

// TestArrivedFor: the tenant whose subject a job arrived on is the tenant
// subject's, or on a class queue the one the admission recorded; a header
// a producer set on the plain subject is dropped by the admission and
// ignored on any subject but a class queue's.
func TestArrivedFor(t *testing.T) {
	t.Parallel()
	forged := nats.Header{}
	forged.Set(contract.HeaderTenantSubject, "acme")
	class := contract.ClassSubject("video", 1, "acme")
	// A class copy made by an admission before tenant subjects existed
	// (a worker of an older version, or a copy still queued from then)
	// kept every header the producer set, this one among them.
	old := nats.Header{}
	old.Set(contract.HeaderTenantSubject, "acme")
	old.Set(contract.HeaderJobID, "x")
	old.Set(contract.HeaderMsgID, "x:q")
	for _, c := range []struct {
		subject string
		h       nats.Header
		want    string
	}{
		{class, old, ""},
		{"sluice.jobs.video.t.acme", nil, "acme"},
		{"sluice.jobs.video.t.other", forged, "other"},
		{"sluice.jobs.video", forged, ""},
		{class, nil, ""},
		{class, forged, ""},
		{class, func() nats.Header {
			h := nats.Header{}
			contract.MarkArrival(h, "sluice.jobs.video.t.acme", "x")
			return h
		}(), "acme"},
	} {
		if got := contract.ArrivedFor(c.subject, c.h); got != c.want {
			t.Errorf("ArrivedFor(%q, %v) = %q, want %q", c.subject, c.h, got, c.want)
		}
	}
	for _, c := range []struct {
		intake string
		want   string
	}{
		{"sluice.jobs.video", ""},
		{"sluice.jobs.video.t.other", "other"},
	} {
		h := nats.Header{}
		h.Set(contract.HeaderTenantSubject, "acme")
		contract.MarkArrival(h, c.intake, "x")
		if got := contract.ArrivedFor(class, h); got != c.want {
			t.Errorf("after MarkArrival(%q): ArrivedFor = %q, want %q", c.intake, got, c.want)
		}
	}
}

// TestEnsureServesTenantSubjects: a kind's durable delivers its tenant
// subjects too; a durable made before them (filter sluice.jobs.<kind>
// alone) is updated in place, and a second Ensure changes nothing.
func TestEnsureServesTenantSubjects(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := n.JS.CreateStream(ctx, contract.JobsStreamConfig(contract.Options{})); err != nil {
		t.Fatal(err)
	}
	old := contract.ConsumerConfig("video", contract.Options{})
	old.FilterSubject, old.FilterSubjects = contract.JobSubject("video"), nil
	if _, err := n.JS.CreateConsumer(ctx, contract.JobsStream, old); err != nil {
		t.Fatal(err)
	}
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := n.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName("video"))
	if err != nil {
		t.Fatal(err)
	}
	first := c.CachedInfo()
	if got := filters(first.Config); got != "sluice.jobs.video sluice.jobs.video.t.*" {
		t.Errorf("filters after the update = %q", got)
	}
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err = n.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName("video"))
	if err != nil {
		t.Fatal(err)
	}
	if second := c.CachedInfo(); second.Created != first.Created || filters(second.Config) != filters(first.Config) {
		t.Errorf("second Ensure changed the consumer: %+v", second.Config)
	}
	for _, subject := range []string{"sluice.jobs.video.t.acme", "sluice.jobs.video"} {
		if _, err := n.JS.Publish(ctx, subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := c.Fetch(2, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, m.Subject())
	}
	if len(got) != 2 || got[0] != "sluice.jobs.video.t.acme" {
		t.Errorf("delivered %v, want the tenant subject's message and the plain one", got)
	}
}

func filters(c jetstream.ConsumerConfig) string {
	out := c.FilterSubject
	for _, f := range c.FilterSubjects {
		out += " " + f
	}
	if c.FilterSubject == "" && len(c.FilterSubjects) > 0 {
		out = out[1:]
	}
	return out
}
