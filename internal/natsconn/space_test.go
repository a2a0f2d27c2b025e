package natsconn

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestStreamLimits(t *testing.T) {
	t.Parallel()
	info := func(discard jetstream.DiscardPolicy, maxBytes, bytes, maxMsgs, msgs int64) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{
			Config: jetstream.StreamConfig{Name: "S", Discard: discard, MaxBytes: maxBytes, MaxMsgs: maxMsgs},
			State:  jetstream.StreamState{Bytes: uint64(bytes), Msgs: uint64(msgs)},
		}
	}
	tests := []struct {
		name string
		info *jetstream.StreamInfo
		want []string
	}{
		{"no limits", info(jetstream.DiscardNew, -1, 1<<30, -1, 1000), nil},
		{"room left", info(jetstream.DiscardNew, 1<<20, 1<<19, 100, 10), nil},
		{"bytes within headroom", info(jetstream.DiscardNew, 1<<20, 1<<20-100, -1, 10), []string{"max_bytes"}},
		{"bytes at the limit", info(jetstream.DiscardNew, 1<<20, 1<<20, -1, 10), []string{"max_bytes"}},
		{"messages at the limit", info(jetstream.DiscardNew, -1, 10, 10, 10), []string{"max_msgs"}},
		{"both", info(jetstream.DiscardNew, 1<<20, 1<<20, 10, 10), []string{"max_bytes", "max_msgs"}},
		{"discard old drops, never refuses", info(jetstream.DiscardOld, 1<<20, 1<<20, 10, 10), nil},
	}
	for _, tt := range tests {
		got := streamLimits(tt.info)
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			continue
		}
		for i, l := range got {
			if l.Name != tt.want[i] || l.Stream != "S" {
				t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			}
		}
	}
	l := Limit{Stream: "SLUICE_JOBS", Name: "max_bytes", Max: 1024, Used: 1000}
	if got, want := l.String(), "stream SLUICE_JOBS is at its max_bytes (1000 of 1024)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	l = Limit{Name: "max_storage", Max: 1024, Used: 1024}
	if got, want := l.String(), "the account's JetStream is at its max_storage (1024 of 1024)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
