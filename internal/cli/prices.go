package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/tenants"
)

func runPrices(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("prices")
	var cf connFlags
	cf.register(fs)
	h := help{
		usage: "enqueue prices set RULE=PRICE... [--json]\n  enqueue prices show [--json]",
		about: `Set and show the price table in SLUICE_TENANTS (docs/tenants.md#prices):
credits per unit, by rule. The rules are video.<resolution>.second for
every resolution of the model catalog in force (enqueue models; shipped:
` + strings.Join(tenants.Rules(models.Shipped()), ", ") + `).
"set" merges the rules it names into the table and writes nothing when one
names no known unit or its price is not a number of 0 or more. Once a table
exists, every job it covers reserves its estimated cost before its paid
submit and records its actual cost when it ends.

Exit codes: 0 done, 2 usage error or invalid rule (nothing written), 5 NATS
unreachable or another runtime error.`,
		examples: `  enqueue prices set video.720p.second=0.5 video.1080p.second=1 speech.char=0.0002
  enqueue prices show --json`,
	}
	sub, rest, err := a.subcommandArgs(fs, h, args)
	if sub == "" {
		return err
	}
	switch sub {
	case "set":
		return a.setPrices(ctx, &cf, rest)
	case "show":
		if err := noArgs("prices show", rest); err != nil {
			return err
		}
		client, err := a.dial(ctx, &cf)
		if err != nil {
			return err
		}
		defer client.Close()
		v, err := client.Tenants(ctx)
		if err != nil {
			return err
		}
		return a.printPrices(&cf, v.Prices())
	}
	return usageErrorf("prices: unknown subcommand %q (want set or show)", sub)
}

func (a *app) setPrices(ctx context.Context, cf *connFlags, rest []string) error {
	if len(rest) == 0 {
		return usageErrorf("prices set: want at least one RULE=PRICE")
	}
	rules := map[string]float64{}
	for _, arg := range rest {
		rule, price, err := tenants.ParseRule(arg)
		if err != nil {
			return usageErrorf("prices set: %v", err)
		}
		rules[rule] = price
	}
	client, err := a.dial(ctx, cf)
	if err != nil {
		return err
	}
	defer client.Close()
	// The video rules are the resolutions of the catalog the workers use.
	pub, _, err := client.Catalog(ctx)
	if err != nil {
		return err
	}
	if err := (&tenants.Prices{Rules: rules}).Validate(pub.Catalog); err != nil {
		return usageErrorf("prices set: %v", err)
	}
	p, err := client.SetPrices(ctx, rules, pub.Catalog)
	if err != nil {
		return err
	}
	return a.printPrices(cf, &p)
}

func (a *app) printPrices(cf *connFlags, p *tenants.Prices) error {
	rules := map[string]float64{}
	if p != nil {
		rules = p.Rules
	}
	if cf.json {
		return writeJSON(a.env.Stdout, map[string]any{"rules": rules})
	}
	if len(rules) == 0 {
		fmt.Fprintln(a.env.Stdout, "no price table (jobs are not priced: no budget reservations, no costs)")
		return nil
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tCREDITS")
	for _, r := range slices.Sorted(maps.Keys(rules)) {
		fmt.Fprintf(tw, "%s\t%s\n", r, strconv.FormatFloat(rules[r], 'g', -1, 64))
	}
	return tw.Flush()
}

// spendRow is one line of enqueue spend.
type spendRow struct {
	Key     string  `json:"key"`
	Credits float64 `json:"credits"`
	Jobs    int     `json:"jobs"`
}

func runSpend(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("spend")
	var (
		cf    connFlags
		by    string
		since time.Duration
	)
	cf.register(fs)
	fs.StringVar(&by, "by", "tenant", "group by tenant, kind or label:KEY")
	fs.DurationVar(&since, "since", 720*time.Hour, "only spend of this past period, e.g. 24h (by day for tenant and kind)")
	h := help{
		usage: "enqueue spend [--by tenant|kind|label:KEY] [--since DURATION] [--json]",
		about: `Show the credits spent, summed by tenant, by kind or by the value of a label.
--by tenant and --by kind read the budget ledger's day keys in SLUICE_TENANTS
(whole UTC days from the day --since reaches back to); --by label:KEY reads
the cost of the terminal events in SLUICE_EVENTS stored within --since
(events are kept 7 days by default). Only jobs a price table covered have
a cost.

With --json, one object: {"by":"...","since":"...","spend":[{"key","credits","jobs"}]}.

Exit codes: 0 shown, 2 usage error, 5 NATS unreachable or another runtime
error.`,
		examples: `  enqueue spend
  enqueue spend --by kind --since 24h
  enqueue spend --by label:campaign --json`,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("spend", rest); err != nil {
		return err
	}
	label, byLabel := strings.CutPrefix(by, "label:")
	switch {
	case since <= 0:
		return usageErrorf("--since must be positive, got %s", since)
	case byLabel && label == "":
		return usageErrorf("--by label:KEY needs a label key")
	case !byLabel && by != "tenant" && by != "kind":
		return usageErrorf("--by: want tenant, kind or label:KEY, got %q", by)
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	start := a.env.Now().Add(-since)
	var rows []spendRow
	if byLabel {
		sums, err := client.SpendByLabel(ctx, label, start)
		if err != nil {
			return err
		}
		for _, s := range sums {
			rows = append(rows, spendRow{Key: s.Value, Credits: s.Credits, Jobs: s.Jobs})
		}
	} else {
		v, err := client.Tenants(ctx)
		if err != nil {
			return err
		}
		rows = ledgerSpend(v.Days(start), by)
	}
	if cf.json {
		return writeJSON(a.env.Stdout, map[string]any{"by": by, "since": start.UTC().Format(time.RFC3339), "spend": rows})
	}
	printSpend(a.env.Stdout, by, rows)
	return nil
}

// ledgerSpend sums ledger days by tenant or by kind.
func ledgerSpend(days []tenants.DaySpend, by string) []spendRow {
	sums := map[string]*spendRow{}
	add := func(key string, credits float64, jobs int) {
		r := sums[key]
		if r == nil {
			r = &spendRow{Key: key}
			sums[key] = r
		}
		r.Credits += credits
		r.Jobs += jobs
	}
	for _, d := range days {
		if by == "tenant" {
			add(d.Tenant, d.Value.Spent, d.Value.Jobs)
			continue
		}
		for kind, credits := range d.Value.ByKind {
			add(kind, credits, d.Value.JobsByKind[kind])
		}
	}
	rows := []spendRow{}
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		rows = append(rows, *sums[k])
	}
	return rows
}

func printSpend(w io.Writer, by string, rows []spendRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no spend recorded in this period")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tCREDITS\tJOBS\n", strings.ToUpper(by))
	// The total is the sum of the rows as printed, so that it adds up.
	var total float64
	for _, r := range rows {
		c := spendCredits(r.Credits)
		total += c
		fmt.Fprintf(tw, "%s\t%s\t%d\n", r.Key, strconv.FormatFloat(c, 'f', -1, 64), r.Jobs)
	}
	fmt.Fprintf(tw, "total\t%s\t\n", strconv.FormatFloat(spendCredits(total), 'f', -1, 64))
	_ = tw.Flush()
}

// spendCredits is c to 4 decimals, the precision spend prints: a plain
// number however large.
func spendCredits(c float64) float64 { return math.Round(c*1e4) / 1e4 }
