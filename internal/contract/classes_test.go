package contract_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
)

func TestClassSubjects(t *testing.T) {
	t.Parallel()
	subject := contract.ClassSubject("video", 2, "acme")
	if subject != "sluice.jobs.video.q.2.acme" || contract.ClassesFilter("video") != "sluice.jobs.video.q.>" ||
		contract.ClassConsumerName("video", 2, "acme") != "sluice-video-q2-acme" {
		t.Errorf("names: %s, %s, %s", subject, contract.ClassesFilter("video"), contract.ClassConsumerName("video", 2, "acme"))
	}
	tests := []struct {
		subject string
		class   bool
		served  bool
	}{
		{"sluice.jobs.video.q.2.acme", true, true},
		{"sluice.jobs.video", false, true},
		{"sluice.jobs.video.q.0.acme", false, false},
		{"sluice.jobs.video.q.6.acme", false, false},
		{"sluice.jobs.video.q.02.acme", false, false},
		{"sluice.jobs.video.q.2", false, false},
		{"sluice.jobs.vidoe.q.2.acme", false, false},
		{"sluice.jobs.video.x.2.acme", false, false},
		{"sluice.jobs.video.q.2.acme.more", false, false},
	}
	for _, tt := range tests {
		_, class := contract.ParseClassSubject(tt.subject)
		if class != tt.class || contract.Served(tt.subject) != tt.served {
			t.Errorf("%s: class %v, served %v; want %v, %v", tt.subject, class, contract.Served(tt.subject), tt.class, tt.served)
		}
	}
	h := nats.Header{}
	h.Set(contract.HeaderMsgID, "job-1:q")
	h.Set(contract.HeaderJobID, "job-1")
	if got := contract.MessageID(subject, h); got != "job-1" {
		t.Errorf("MessageID on a class subject = %q, want job-1", got)
	}
	if got := contract.MessageID("sluice.jobs.video", h); got != "job-1:q" {
		t.Errorf("MessageID on the intake = %q, want its Nats-Msg-Id", got)
	}
}
