package apiclient_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

func TestMediaStreamSpeech(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()

	t.Run("byte exact", func(t *testing.T) {
		t.Parallel()
		// 2.5 MB: more than one MiB per frame, so the simulator splits it
		// into several increments.
		const size = 2_500_001
		text := "a long read [sim:size=2500001]"
		s, err := b.client.StreamSpeech(ctx, speechReq(text))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.ContentType() != "audio/mpeg" || s.RequestID() == "" {
			t.Errorf("content type %q, request id %q", s.ContentType(), s.RequestID())
		}
		if s.Usage() != nil {
			t.Error("usage before EOF")
		}
		got := sha256.New()
		n, err := io.Copy(got, s)
		if err != nil || n != size {
			t.Fatalf("copied %d bytes: %v", n, err)
		}
		want := sha256.New()
		_, _ = io.Copy(want, apisim.ResultBytes(s.RequestID(), 0, size))
		if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatal("stream audio differs from the simulator's bytes")
		}
		var usage map[string]any
		if err := json.Unmarshal(s.Usage(), &usage); err != nil || usage["audio_count"] != 1.0 || usage["token_usage"] == nil {
			t.Fatalf("usage %s: %v", s.Usage(), err)
		}
		if c := b.sim.SubmitCount(text); c != 1 {
			t.Errorf("SubmitCount %d", c)
		}
	})
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		for _, directive := range []string{"[sim:sse-cut]", "[sim:sse-abort]"} {
			s, err := b.client.StreamSpeech(ctx, speechReq("cut short "+directive))
			if err != nil {
				t.Fatal(err)
			}
			audio, err := io.ReadAll(s)
			s.Close()
			noSecret(t, err)
			if !errors.Is(err, apiclient.ErrStreamIncomplete) || !errors.Is(err, apiclient.ErrAmbiguous) || apiclient.IsTransient(err) {
				t.Fatalf("%s: err %v", directive, err)
			}
			if len(audio) == 0 || s.Usage() != nil {
				t.Errorf("%s: %d bytes before the cut, usage %s", directive, len(audio), s.Usage())
			}
		}
	})
	t.Run("failed frame", func(t *testing.T) {
		t.Parallel()
		s, err := b.client.StreamSpeech(ctx, speechReq("no voice today [sim:fail=VoiceUnavailable]"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = io.ReadAll(s)
		fe, ok := errors.AsType[*apiclient.FrameError](err)
		if !ok || fe.Code != "VoiceUnavailable" || fe.Message == "" || fe.RequestID != s.RequestID() || !apiclient.IsPermanent(err) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("rejected", func(t *testing.T) {
		t.Parallel()
		req := speechReq("")
		_, err := b.client.StreamSpeech(ctx, req)
		ae, ok := errors.AsType[*apiclient.APIError](err)
		if !ok || ae.Param != "input.text" || errors.Is(err, apiclient.ErrAmbiguous) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("truncated by a fault", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, nil)
		b.sim.Faults().Set(apisim.EndpointSpeechSubmit, apisim.Fault{TruncateRate: 1})
		s, err := b.client.StreamSpeech(ctx, speechReq("halved [sim:frames=6]"))
		if err == nil {
			_, err = io.ReadAll(s)
			s.Close()
		}
		if !errors.Is(err, apiclient.ErrAmbiguous) || b.sim.SubmitCount("halved [sim:frames=6]") != 1 || len(b.sleep.Waits()) != 0 {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("429 then open", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, nil)
		b.sim.Faults().Set(apisim.EndpointSpeechSubmit, apisim.Fault{Error429Rate: 1})
		b.clearFaultAfter(apisim.EndpointSpeechSubmit, 1)
		s, err := b.client.StreamSpeech(ctx, speechReq("patient"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := io.Copy(io.Discard, s); err != nil {
			t.Fatal(err)
		}
		if b.sim.SubmitCount("patient") != 1 || len(b.sleep.Waits()) != 1 {
			t.Fatalf("SubmitCount %d, waits %v", b.sim.SubmitCount("patient"), b.sleep.Waits())
		}
	})
}

// TestMediaStreamStall: a stream that goes silent, holding its
// connection, is given up after StreamStallTimeout without data: Read
// returns an error matching ErrStreamStalled, ErrStreamIncomplete and
// ErrAmbiguous (the synthesis was paid), and the audio read before it.
func TestMediaStreamStall(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, func(c *apiclient.MediaConfig) { c.StreamStallTimeout = 300 * time.Millisecond })
	s, err := b.client.StreamSpeech(t.Context(), speechReq("goes silent [sim:sse-stall] [sim:frames=4]"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := io.Copy(io.Discard, s)
	if !errors.Is(err, apiclient.ErrStreamStalled) || !errors.Is(err, apiclient.ErrStreamIncomplete) || !errors.Is(err, apiclient.ErrAmbiguous) {
		t.Fatalf("read %d bytes, then %v; want a stall", n, err)
	}
	if n == 0 {
		t.Error("no audio read before the stall")
	}
}

// TestMediaStreamSlowButMoving: the stall check gives up a stream that
// sends nothing, not a slow one: a stream whose frames each come inside
// StreamStallTimeout is read whole although it lasts longer than that.
func TestMediaStreamSlowButMoving(t *testing.T) {
	t.Parallel()
	const stall = 2 * time.Second
	b := setupMedia(t, func(c *apiclient.MediaConfig) { c.StreamStallTimeout = stall })
	s, err := b.client.StreamSpeech(t.Context(), speechReq("slow but moving [sim:frames=8] [sim:frame-gap=400ms]"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	n, err := io.Copy(io.Discard, s)
	if err != nil || n == 0 {
		t.Fatalf("read %d bytes, then %v; want the whole stream", n, err)
	}
	if took := time.Since(start); took <= stall {
		t.Fatalf("the stream took %s, not longer than the stall timeout %s: the test proves nothing", took, stall)
	}
}
