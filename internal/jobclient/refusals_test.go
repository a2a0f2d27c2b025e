package jobclient

import "testing"

func TestRefusedSubject(t *testing.T) {
	for _, tt := range []struct {
		msg, want string
		ok        bool
	}{
		{`nats: permissions violation: Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.SLUICE_DLQ.x1"`, "$JS.API.CONSUMER.CREATE.SLUICE_DLQ.x1", true},
		{`nats: permissions violation: Permissions Violation for Publish to "a.\"b"`, `a."b`, true},
		{`nats: permissions violation: Permissions Violation for Subscription to "x"`, "", false},
		{`Permissions Violation for Publish to "unterminated`, "", false},
	} {
		got, ok := refusedSubject(tt.msg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("refusedSubject(%q) = %q, %v; want %q, %v", tt.msg, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tt := range []struct {
		pattern, subject string
		want             bool
	}{
		{"$JS.API.CONSUMER.CREATE.SLUICE_DLQ", "$JS.API.CONSUMER.CREATE.SLUICE_DLQ", true},
		{"$JS.API.CONSUMER.CREATE.SLUICE_DLQ.>", "$JS.API.CONSUMER.CREATE.SLUICE_DLQ.x1.sluice.dlq.>", true},
		{"$JS.API.CONSUMER.CREATE.SLUICE_DLQ.>", "$JS.API.CONSUMER.CREATE.SLUICE_DLQ", false},
		{"$JS.API.CONSUMER.CREATE.SLUICE_DLQ.>", "$JS.API.CONSUMER.CREATE.SLUICE_DLQX.a", false},
		{"$KV.SLUICE_STATE.a", "$KV.SLUICE_STATE.ab", false},
	} {
		if got := subjectMatches(tt.pattern, tt.subject); got != tt.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tt.pattern, tt.subject, got, tt.want)
		}
	}
}
