package jobclient

import (
	"strings"
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 42 * time.Second: "42s", 5*time.Minute + 59*time.Second: "5m",
		3 * time.Hour: "3h", 47 * time.Hour: "47h", 72 * time.Hour: "3d",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestEventSubjects(t *testing.T) {
	t.Parallel()
	got := eventSubjects("video", "failed")
	if len(got) != 1 || got[0] != "sluice.events.video.failed" {
		t.Errorf("failed video: %v", got)
	}
	// A job is running unless a later event says otherwise.
	got = eventSubjects("speech", "running")
	want := []string{"sluice.events.speech.running", "sluice.events.speech.succeeded", "sluice.events.speech.failed", "sluice.events.speech.cancelled"}
	if len(got) != len(want) {
		t.Fatalf("running speech: %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("running speech: %v, want %v", got, want)
		}
	}
	if got := eventSubjects("", ""); len(got) != 25 { // 5 kinds, 5 statuses
		t.Errorf("every kind and status: %d subjects", len(got))
	}
}

func TestRetrySpec(t *testing.T) {
	t.Parallel()
	out, err := retrySpec([]byte(`{"kind":"video","labels":{"a":"1"},"video":{}}`), "x-r1", "x", "default")
	if err != nil || string(out) != `{"id":"x-r1","kind":"video","labels":{"a":"1","retry_of":"x"},"video":{}}` {
		t.Errorf("retrySpec = %s, %v", out, err)
	}
	if _, err := retrySpec([]byte(`[1]`), "x-r1", "x", ""); err == nil {
		t.Error("a spec that is not an object was accepted")
	}
	if _, err := retrySpec([]byte(`{"labels":{"a":1}}`), "x-r1", "x", ""); err == nil {
		t.Error("labels that are not strings were accepted")
	}
	// A job that took its tenant from its tenant subject keeps it; a
	// spec's own tenant stays.
	out, err = retrySpec([]byte(`{"kind":"video","video":{}}`), "x-r1", "x", "acme")
	if err != nil || string(out) != `{"id":"x-r1","kind":"video","labels":{"retry_of":"x"},"tenant":"acme","video":{}}` {
		t.Errorf("retrySpec with the record's tenant = %s, %v", out, err)
	}
	out, err = retrySpec([]byte(`{"kind":"video","tenant":"beta","video":{}}`), "x-r1", "x", "acme")
	if err != nil || !strings.Contains(string(out), `"tenant":"beta"`) {
		t.Errorf("retrySpec of a spec naming its tenant = %s, %v", out, err)
	}
}
