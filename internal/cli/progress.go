package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sluice-dev/sluice/internal/jobclient"
)

// bar is a progress bar on stderr, or nil when stderr is not a terminal
// or the output is JSON. Its methods do nothing on nil.
type bar struct {
	pb *progressbar.ProgressBar
}

func (a *app) newBar(jsonOut bool, total int, desc string) *bar {
	return a.openBar(jsonOut, int64(total), desc, progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(false))
}

// newByteBar is a progress bar counting bytes, drawn at once, or nil like
// newBar.
func (a *app) newByteBar(jsonOut bool, total int64, desc string) *bar {
	return a.openBar(jsonOut, total, desc, progressbar.OptionShowBytes(true), progressbar.OptionSetRenderBlankState(true))
}

func (a *app) openBar(jsonOut bool, total int64, desc string, opts ...progressbar.Option) *bar {
	if jsonOut || total < 1 || !a.env.IsTerminal(a.env.Stderr) {
		return nil
	}
	return &bar{pb: progressbar.NewOptions64(total, append([]progressbar.Option{
		progressbar.OptionSetWriter(a.env.Stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
	}, opts...)...)}
}

func (b *bar) add(n int) {
	if b != nil {
		_ = b.pb.Add(n)
	}
}

func (b *bar) set(n int, desc string) {
	if b != nil {
		b.pb.Describe(desc)
		_ = b.pb.Set(n)
	}
}

func (b *bar) done() {
	if b != nil {
		_ = b.pb.Finish()
		_ = b.pb.Clear()
	}
}

// waitProgress returns the OnProgress of a Wait: the bar on a terminal,
// else one line per move on stderr, nothing with --json.
func (a *app) waitProgress(jsonOut bool, total int) (func(jobclient.Job, jobclient.Counts), *bar) {
	b := a.newBar(jsonOut, total, "waiting")
	switch {
	case b != nil:
		return func(_ jobclient.Job, c jobclient.Counts) {
			b.set(c.Done(), fmt.Sprintf("queued %d · submitted %d · running %d · done", c.Queued, c.Submitted, c.Running))
		}, b
	case jsonOut:
		return nil, nil
	default:
		return func(j jobclient.Job, c jobclient.Counts) {
			fmt.Fprintf(a.env.Stderr, "%s: %s (%d/%d done)\n", j.ID, j.Status, c.Done(), c.Total)
		}, nil
	}
}

// waitRetrying returns the OnRetrying of a Wait: a line on stderr when a
// job that has not ended records a new last error, nothing with --json
// (the report carries it).
func (a *app) waitRetrying(jsonOut bool) func(jobclient.Job) {
	if jsonOut {
		return nil
	}
	return func(j jobclient.Job) {
		fmt.Fprintf(a.env.Stderr, "%s: %s, retrying %s\n", j.ID, j.Status, lastErrorText(j.LastError))
	}
}

// reader returns r counting into the bar as it is read.
func (b *bar) reader(r io.Reader) io.Reader {
	if b == nil {
		return r
	}
	return io.TeeReader(r, b.pb)
}
