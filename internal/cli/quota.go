package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/sluice-dev/sluice/internal/quota"
)

// quotaReport is the JSON output of quota.
type quotaReport struct {
	Quotas []quota.Status `json:"quotas"`
}

func runQuota(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("quota")
	var cf connFlags
	cf.register(fs)
	h := help{
		usage: "enqueue quota [--json] [flags]",
		about: `Show the fleet's upstream quotas (SLUICE_FLEET_MEDIA_TASKS, _MEDIA_RATE,
SLUICE_FLEET_COMPUTE_JOBS, _COMPUTE_RATE), one line per limited resource:
the tasks in flight upstream across every worker (leases in SLUICE_QUOTA)
against the fleet's effective limit (the configured one, or less while
upstream refuses submits for too many tasks at once) and its configured
limit, the jobs held by workers and waiting for a lease,
the jobs of its kinds still queued in SLUICE_JOBS (workers pull only what
the quota lets them start), and the requests of the current second against
the fleet's rate. A worker
that dies gives its leases back within SLUICE_ACK_WAIT.

Nothing is printed but a note when no worker has a fleet limit.

With --json, one object: {"quotas":[{"resource","limit","effective_limit",
"in_use","waiting","queued","rate","rate_used"}]}.

Exit codes: 0 shown, 2 usage error, 5 NATS unreachable or another runtime
error.`,
		examples: `  enqueue quota
  enqueue quota --json | jq '.quotas[] | select(.resource == "media") | .in_use'`,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("quota", rest); err != nil {
		return err
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	sts, err := client.Quotas(ctx)
	if err != nil {
		return err
	}
	if cf.json {
		return writeJSON(a.env.Stdout, quotaReport{Quotas: append([]quota.Status{}, sts...)})
	}
	printQuotas(a.env.Stdout, sts)
	return nil
}

func printQuotas(w io.Writer, sts []quota.Status) {
	if len(sts) == 0 {
		fmt.Fprintln(w, "no fleet quota in use (no worker has SLUICE_FLEET_* set)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tIN USE\tEFFECTIVE\tLIMIT\tHELD WAITING\tQUEUED\tREQ/S\tRATE")
	orNone := func(s string, set bool) string {
		if !set {
			return "-"
		}
		return s
	}
	for _, st := range sts {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", st.Resource, st.InUse,
			orNone(strconv.Itoa(st.Effective), st.Limit > 0), orNone(strconv.Itoa(st.Limit), st.Limit > 0), st.Waiting, st.Queued,
			orNone(strconv.Itoa(st.RateUsed), st.Rate > 0), orNone(strconv.FormatFloat(st.Rate, 'g', -1, 64), st.Rate > 0))
	}
	_ = tw.Flush()
}
