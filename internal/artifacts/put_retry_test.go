package artifacts

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A small object is held in memory, so Put sends its PUT again while S3 is
// away instead of failing: a source that cannot be read twice (a speech
// stream) is not lost to a short outage. Put reads its source only once.
func TestPutSmallSurvivesAnS3Outage(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	addr := strings.TrimPrefix(b.env.Endpoint, "http://")
	dir := b.env.Server.Dir()
	if err := b.env.Server.Close(); err != nil {
		t.Fatal(err)
	}
	// S3 comes back during the second wait between PUTs.
	b.sleeps.OnWait(func(n int) {
		if n != 2 {
			return
		}
		srv, err := s3dev.Start(context.Background(), s3dev.Config{Dir: dir, Addr: addr, Buckets: []string{b.env.Bucket}})
		if err != nil {
			t.Errorf("restart s3 on %s: %v", addr, err)
			return
		}
		t.Cleanup(func() { _ = srv.Close() })
	})
	body, sum := stream(7, 100<<10)
	src := &readCounter{r: body}
	ctx := testenv.Context(t, time.Minute)
	a, err := b.store.Put(ctx, "sluice/speech/job-1/result-0.mp3", "audio/mpeg", "sse", src, 1<<20)
	if err != nil {
		t.Fatalf("Put across an outage: %v (waits %v)", err, b.sleeps.Waits())
	}
	b.checkObject(t, a, 100<<10, sum, "audio/mpeg")
	if got := len(b.sleeps.Waits()); got != 2 {
		t.Errorf("%d waits, want 2", got)
	}
	if src.eofs != 1 {
		t.Errorf("source read to its end %d times, want once", src.eofs)
	}
}

// Without S3 coming back, Put gives up after MaxAttempts PUTs with a
// temporary error.
func TestPutSmallGivesUp(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	if err := b.env.Server.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := b.store.Put(testenv.Context(t, time.Minute), "sluice/speech/job-2/result-0.mp3", "", "", bytes.NewReader([]byte("audio")), 1<<20)
	if err == nil || !IsTemporary(err) {
		t.Fatalf("Put with S3 away: %v, want a temporary error", err)
	}
	if got := len(b.sleeps.Waits()); got != b.store.cfg.MaxAttempts-1 {
		t.Errorf("%d waits, want %d", got, b.store.cfg.MaxAttempts-1)
	}
}

// readCounter counts how often its reader reported the end.
type readCounter struct {
	r    interface{ Read([]byte) (int, error) }
	eofs int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil {
		c.eofs++
	}
	return n, err
}
