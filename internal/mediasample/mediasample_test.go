package mediasample

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/mediaprobe"
)

func TestSamplesPassTheLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		b    []byte
		kind mediaprobe.Kind
	}{
		{"png", PNG(384, 256), mediaprobe.KindImage},
		{"wav", WAV(3 * time.Second), mediaprobe.KindAudio},
	} {
		info, err := mediaprobe.Inspect(bytes.NewReader(c.b), int64(len(c.b)), c.kind)
		if err != nil {
			t.Errorf("%s: %v (%+v)", c.name, err, info)
		}
	}
	if info, _ := mediaprobe.Probe(bytes.NewReader(WAV(3*time.Second)), int64(len(WAV(3*time.Second)))); info.Duration != 3*time.Second {
		t.Errorf("WAV(3s) lasts %v", info.Duration)
	}
}
