package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/models"
)

func runModels(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("models")
	var cf connFlags
	cf.register(fs)
	h := help{
		usage: "enqueue models [--json]",
		about: `Show the model catalog in force (docs/job-spec.md#the-model-catalog): per
video model the resolutions, durations, ratios and input kinds it accepts
and the price rule of each resolution, and the default entry a model the
catalog does not name is checked against. Each worker writes the catalog
it loaded (the shipped one, or SLUICE_MEDIA_MODELS over it) into
SLUICE_TENANTS at start; before any worker has, this shows the shipped
catalog and says so.

With --json, one object: {"source","file","worker","written_at",
"catalog":{"default":{...},"models":{"<name>":{"resolutions","durations":
{"min","max"},"ratios","inputs","prices"}}}}; source is "file", "shipped"
(a worker without SLUICE_MEDIA_MODELS) or "none" (no worker has written
one: the shipped catalog).

Exit codes: 0 shown, 2 usage error, 5 NATS unreachable or another runtime
error.`,
		examples: `  enqueue models
  enqueue models --json`,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("models", rest); err != nil {
		return err
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	p, found, err := client.Catalog(ctx)
	if err != nil {
		return err
	}
	if !found {
		p.Source = "none"
	}
	if cf.json {
		out := map[string]any{"source": p.Source, "file": p.File, "worker": p.Worker, "catalog": p.Catalog.View()}
		if !p.WrittenAt.IsZero() {
			out["written_at"] = p.WrittenAt.UTC().Format(time.RFC3339)
		}
		return writeJSON(a.env.Stdout, out)
	}
	printCatalog(a, p, found)
	return nil
}

// printCatalog writes the catalog as a table, one row per model.
func printCatalog(a *app, p *models.Published, found bool) {
	w := a.env.Stdout
	switch {
	case !found:
		fmt.Fprintln(w, "catalog: shipped (no worker has published one yet)")
	case p.Source == models.SourceFile:
		fmt.Fprintf(w, "catalog: file %s, published by worker %s at %s\n", p.File, p.Worker, p.WrittenAt.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "catalog: shipped, published by worker %s at %s\n", p.Worker, p.WrittenAt.UTC().Format(time.RFC3339))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tRESOLUTIONS\tDURATIONS\tRATIOS\tINPUTS\tPRICE RULES")
	row := func(name string, e models.Entry) {
		rules := make([]string, 0, len(e.Resolutions))
		for _, r := range e.Resolutions {
			rules = append(rules, e.RuleFor(r))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d-%d s\t%s\t%s\t%s\n", name, strings.Join(e.Resolutions, ","),
			e.Durations.Min, e.Durations.Max, strings.Join(e.Ratios, ","), strings.Join(e.Inputs, ","), strings.Join(rules, ","))
	}
	for _, n := range slices.Sorted(maps.Keys(p.Catalog.Models)) {
		row(n, p.Catalog.Models[n])
	}
	row("(default)", p.Catalog.Default)
	_ = tw.Flush()
}

// catalog is the model catalog enqueue checks video specs against, as the
// workers will: when enqueue publishes (it connects to NATS anyway), the
// catalog the workers published into SLUICE_TENANTS; without one, with
// --dry-run (which does not connect) or when NATS cannot be reached (the
// publish then fails, naming it), the local one (localCatalog). A published
// catalog that cannot be read is warned of and the local one used. The
// answer is kept for the run: a video with local files is checked twice.
func (a *app) catalog(ctx context.Context, pf *publishFlags) (*models.Catalog, error) {
	if a.models != nil {
		return a.models, nil
	}
	cat := a.publishedCatalog(ctx, pf)
	if cat == nil {
		var err error
		if cat, err = a.localCatalog(); err != nil {
			return nil, err
		}
	}
	a.models = cat
	return cat, nil
}

// publishedCatalog is the catalog the workers published, or nil when
// there is none to use.
func (a *app) publishedCatalog(ctx context.Context, pf *publishFlags) *models.Catalog {
	if pf.dryRun {
		return nil
	}
	client, err := a.dial(ctx, &pf.conn)
	if err != nil {
		return nil
	}
	defer client.Close()
	p, found, err := client.Catalog(ctx)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "enqueue: warning: cannot read the model catalog the workers published (%v); checking against enqueue's own (SLUICE_MEDIA_MODELS, else the shipped one)\n", err)
		return nil
	}
	if !found {
		return nil
	}
	return p.Catalog
}

// localCatalog is the shipped catalog, or the file SLUICE_MEDIA_MODELS
// names in enqueue's environment loaded over it.
func (a *app) localCatalog() (*models.Catalog, error) {
	path := a.env.Getenv("SLUICE_MEDIA_MODELS")
	if path == "" {
		return models.Shipped(), nil
	}
	cat, err := models.Load(path)
	if err != nil {
		return nil, usageErrorf("SLUICE_MEDIA_MODELS: %v", err)
	}
	return cat, nil
}

// warnUnknownModels says on stderr which specs name a video model the
// catalog does not: they were checked against its default entry.
func (a *app) warnUnknownModels(subs []jobclient.Submission) {
	for _, s := range subs {
		if s.UnknownModel != "" {
			fmt.Fprintf(a.env.Stderr, "enqueue: warning: job %s: video model %q is not in the model catalog; checked against its default entry (enqueue models)\n", s.ID, s.UnknownModel)
		}
	}
}
