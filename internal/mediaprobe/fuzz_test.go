package mediaprobe

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// FuzzProbe feeds Probe arbitrary bytes: it must return, never panic, and
// what it accepts must be of an accepted format with a sane size.
func FuzzProbe(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(testmedia.Dir(), "*.*"))
	for _, name := range files {
		if filepath.Ext(name) == ".sh" {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 8<<10)])
	}
	f.Add(pngHeader(300, 300))
	f.Add([]byte("\x00\x00\x00\x01ftypisom\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x00\x00\x00\x00moov"))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVEfmt \xff\xff\xff\xff"))
	f.Add([]byte("ID3\x04\x00\x10\x7f\x7f\x7f\x7f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Probe(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if info.Kind() == "" {
			t.Fatalf("Probe accepted %s without error", info.Format)
		}
		if info.Kind() != KindAudio && (info.Width <= 0 || info.Height <= 0) {
			t.Fatalf("Probe accepted a %dx%d %s", info.Width, info.Height, info.Format)
		}
		if info.Duration < 0 || info.FrameRate < 0 {
			t.Fatalf("Probe gave a negative duration or rate: %+v", info)
		}
		_ = Check(info.Kind(), info)
	})
}
