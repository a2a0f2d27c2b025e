package cli

import (
	"context"
	"io"
	"os"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runPipeline(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("pipeline")
	var (
		pf   publishFlags
		file string
	)
	fs.StringVar(&file, "f", "", "pipeline spec `FILE` (one JSON document, or NDJSON of several); - reads stdin (required)")
	fs.StringVar(&file, "file", "", "same as -f `FILE`")
	pf.register(fs, false)
	h := help{
		usage: "enqueue pipeline -f FILE|- [--wait] [--timeout D] [flags]",
		about: `Publish a pipeline: a job of kind pipeline whose steps are ordinary jobs run
as a graph (docs/pipelines.md in sluice's repository). The graph is checked
before anything is published: a cycle, an unknown need, a duplicate step
name, a reference to an artifact a step does not produce, more than 100
steps or an invalid step spec is reported with the step and the field, and
nothing is published. A spec of another kind is refused too (enqueue submit
takes any kind).

With --wait, enqueue follows the pipeline to its end, then prints its status
and every step's status, job id and artifacts, and exits with the codes
below (a failed step fails the pipeline).`,
		examples: `  enqueue pipeline -f promo.json --wait
  enqueue pipeline -f promo.json --dry-run     # validate only`,
		exits: true,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := specFileArgs("pipeline", file, rest, &pf); err != nil {
		return err
	}
	pf.maxInFlight = 1
	subs, invalid, err := a.readSpecFile(ctx, "pipeline", file, &pf)
	if err != nil {
		return err
	}
	for _, s := range subs {
		if s.Kind != jobspec.KindPipeline {
			return usageErrorf("pipeline: %s line %d: kind is %s, not pipeline (enqueue submit publishes any kind)", fileName(file), s.Line, s.Kind)
		}
	}
	return a.publish(ctx, subs, invalid, &pf)
}

// openSpecs opens the spec file of cmd's -f: a file, or stdin for "-".
func (a *app) openSpecs(cmd, file string) (io.Reader, func(), error) {
	if file == "-" {
		return a.env.Stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, usageErrorf("%s: %v", cmd, err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, nil, usageErrorf("%s: %s is a directory; -f takes a file of job specs (or - for stdin)", cmd, file)
	}
	return f, func() { f.Close() }, nil
}
