package cli

import (
	"fmt"
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
	if jsonOut || total < 1 || !a.env.IsTerminal(a.env.Stderr) {
		return nil
	}
	return &bar{pb: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(a.env.Stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
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
