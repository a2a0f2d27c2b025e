package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runWatch(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("watch")
	var (
		cf    connFlags
		kind  string
		since time.Duration
	)
	cf.register(fs)
	fs.StringVar(&kind, "kind", "", "only events of this kind: video, speech, compute, container or pipeline (default: all)")
	fs.DurationVar(&since, "since", 0, "first replay the events of this past period, e.g. 10m or 2h (default: only new events)")
	h := help{
		usage: "enqueue watch [--kind K] [--since DURATION] [--json] [flags]",
		about: `Print job events from SLUICE_EVENTS as they are published, until Ctrl-C
(then exit 0). One line per event: time, job id, kind, status, attempt,
error; artifacts on the lines below. With --json, each event as published
(a CloudEvent), one per line.`,
		examples: `  enqueue watch
  enqueue watch --kind video --since 1h
  enqueue watch --json | jq 'select(.data.status == "failed")'`,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("watch", rest); err != nil {
		return err
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	if err := positiveDuration("since", since); err != nil {
		return err
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	w := a.env.Stdout
	return client.Watch(ctx, jobclient.WatchOptions{Kind: jobspec.Kind(kind), Since: since}, func(we jobclient.WatchedEvent) error {
		if we.Err != nil {
			fmt.Fprintf(a.env.Stderr, "enqueue: skipping %v\n", we.Err)
			return nil
		}
		if cf.json {
			// One event per line, whatever the publisher's layout.
			var b bytes.Buffer
			if err := json.Compact(&b, we.Raw); err != nil {
				return err
			}
			b.WriteByte('\n')
			_, err := w.Write(b.Bytes())
			return err
		}
		d := we.Event.Data
		line := fmt.Sprintf("%s  %s  %s  %s  attempt %d", we.Event.Time, d.JobID, d.Kind, d.Status, d.Attempt)
		if d.Error != nil {
			line += "  " + errorText(d.Error)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		j := jobclient.JobFromEvent(&we.Event)
		printArtifacts(w, "    ", j.Artifacts)
		return nil
	})
}
