package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

const webhooksAbout = `Manage webhook subscriptions (docs/webhooks.md): each receives the events
it asks for as HTTP POSTs signed as Standard Webhooks 1.0 says, retried
with backoff for about three days.

"add" prints the subscription's id and its whsec_ signing secret, the only
time the secret is shown. The URL must be https with a public address
(plain http with SLUICE_DEV set, or to a private address with
SLUICE_ALLOW_PRIVATE_URLS; a private or loopback address only with
SLUICE_ALLOW_PRIVATE_URLS). --events takes
KIND.STATUS patterns, either part may be *; none: every event.

"rotate" gives a subscription (or a tenant's notify secret, notify-TENANT)
a new secret and prints it; the old one signs too for --overlap, so each
delivery carries two signatures meanwhile. "notify-secret --tenant T"
prints the secret that signs the deliveries of T's jobs' own
notify.webhook. "deliveries" lists the deliveries with their attempts
(--failed: those that failed or are failing); "replay" sends deliveries
again with the same webhook-id.

Exit codes: 0 done, 2 usage error or refused URL (nothing written),
6 no such subscription or delivery, 5 NATS unreachable or another runtime
error.`

type webhookFlags struct {
	cf      connFlags
	tenant  string
	events  string
	labels  labelFlag
	failed  bool
	overlap time.Duration
}

func (f *webhookFlags) register(fs *flag.FlagSet) {
	f.cf.register(fs)
	f.labels = labelFlag{}
	fs.StringVar(&f.tenant, "tenant", "", "add: only this tenant's jobs; notify-secret: the tenant")
	fs.StringVar(&f.events, "events", "", "add: `KIND.STATUS,...` patterns, * for any part (default every event)")
	fs.Var(f.labels, "label", "add: only jobs carrying this label, `key=value` (repeatable; all must match)")
	fs.BoolVar(&f.failed, "failed", false, "deliveries: only those that failed or are failing")
	fs.DurationVar(&f.overlap, "overlap", 24*time.Hour, "rotate: how long the old secret signs too")
}

func runWebhooks(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("webhooks")
	var f webhookFlags
	f.register(fs)
	h := help{
		usage: "enqueue webhooks add URL [--tenant T] [--events KIND.STATUS,...] [--label K=V]...\n" +
			"  enqueue webhooks list [--json]\n  enqueue webhooks remove ID\n  enqueue webhooks rotate ID [--overlap 24h]\n" +
			"  enqueue webhooks notify-secret --tenant T\n  enqueue webhooks deliveries [--failed] [--json]\n  enqueue webhooks replay DELIVERY...",
		about: webhooksAbout,
		examples: `  enqueue webhooks add https://hooks.example.com/sluice --events video.succeeded,*.failed
  enqueue webhooks deliveries --failed
  enqueue webhooks replay wh-3f2a9c1d0b4e.clip-0001.succeeded`,
	}
	sub, rest, err := a.subcommandArgs(fs, h, args)
	if sub == "" {
		return err
	}
	switch sub {
	case "add":
		return a.addWebhook(ctx, &f, rest)
	case "list":
		return a.listWebhooks(ctx, &f, rest)
	case "remove", "rotate":
		if len(rest) != 1 {
			return usageErrorf("webhooks %s: want one subscription ID, got %q", sub, rest)
		}
		return a.changeWebhook(ctx, &f, sub, rest[0])
	case "notify-secret":
		if !jobspec.ValidID(f.tenant) {
			return usageErrorf("webhooks notify-secret: want --tenant T, an id matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
		}
		return a.changeWebhook(ctx, &f, sub, webhooks.NotifyID(f.tenant))
	case "deliveries":
		return a.listDeliveries(ctx, &f, rest)
	case "replay":
		return a.replayDeliveries(ctx, &f, rest)
	}
	return usageErrorf("webhooks: unknown subcommand %q (want add, list, remove, rotate, notify-secret, deliveries or replay)", sub)
}

// webhookSub checks the arguments of "webhooks add", naming every bad one.
func (a *app) webhookSub(f *webhookFlags, rest []string) (webhooks.Subscription, error) {
	if len(rest) != 1 {
		return webhooks.Subscription{}, usageErrorf("webhooks add: want one URL, got %q", rest)
	}
	on := func(name string) bool { v, _ := strconv.ParseBool(a.env.Getenv(name)); return v }
	policy := webhooks.PolicyOf(on("SLUICE_ALLOW_PRIVATE_URLS"), on("SLUICE_DEV"))
	var bad []string
	if err := policy.CheckURL(rest[0]); err != nil {
		bad = append(bad, "URL: "+err.Error())
	}
	sub := webhooks.Subscription{URL: rest[0], Tenant: f.tenant, Labels: f.labels}
	if f.tenant != "" && !jobspec.ValidID(f.tenant) {
		bad = append(bad, "--tenant: must be an id matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
	}
	if f.events != "" {
		for p := range strings.SplitSeq(f.events, ",") {
			if err := webhooks.CheckPattern(strings.TrimSpace(p), contract.Kinds); err != nil {
				bad = append(bad, "--"+err.Error())
			}
			sub.Events = append(sub.Events, strings.TrimSpace(p))
		}
	}
	if len(bad) > 0 {
		return sub, usageErrorf("webhooks add: %s", strings.Join(bad, "\n"))
	}
	return sub, nil
}

func (a *app) addWebhook(ctx context.Context, f *webhookFlags, rest []string) error {
	sub, err := a.webhookSub(f, rest)
	if err != nil {
		return err
	}
	st, done, err := a.webhookStore(ctx, f)
	if err != nil {
		return err
	}
	defer done()
	if sub, err = st.Add(ctx, sub, a.env.Now()); err != nil {
		return err
	}
	return a.printSecret(f, sub, "added")
}

// printSecret prints sub's id and secret, the only place a secret is
// shown.
func (a *app) printSecret(f *webhookFlags, sub webhooks.Subscription, what string) error {
	if f.cf.json {
		return writeJSON(a.env.Stdout, map[string]string{"id": sub.ID, "secret": sub.Secret})
	}
	fmt.Fprintf(a.env.Stdout, "webhook %s %s\nsigning secret (shown once, keep it with the receiver): %s\n", sub.ID, what, sub.Secret)
	return nil
}

func (a *app) changeWebhook(ctx context.Context, f *webhookFlags, sub, id string) error {
	st, done, err := a.webhookStore(ctx, f)
	if err != nil {
		return err
	}
	defer done()
	var s webhooks.Subscription
	switch sub {
	case "remove":
		err = st.Remove(ctx, id)
	case "rotate":
		s, err = st.Rotate(ctx, id, f.overlap, a.env.Now())
	case "notify-secret":
		s, err = st.NotifySecret(ctx, f.tenant, a.env.Now())
	}
	if errors.Is(err, webhooks.ErrNotFound) {
		return &exitError{code: ExitNoSuchJob, err: err}
	}
	if err != nil {
		return err
	}
	if sub == "remove" {
		fmt.Fprintf(a.env.Stdout, "webhook %s removed\n", id)
		return nil
	}
	return a.printSecret(f, s, sub+"d")
}

func (a *app) listWebhooks(ctx context.Context, f *webhookFlags, rest []string) error {
	if err := noArgs("webhooks list", rest); err != nil {
		return err
	}
	st, done, err := a.webhookStore(ctx, f)
	if err != nil {
		return err
	}
	defer done()
	subs, err := st.List(ctx)
	if err != nil {
		return err
	}
	public := make([]webhooks.Subscription, len(subs))
	for i, s := range subs {
		public[i] = s.Public()
		public[i].URL = webhooks.Where(s.URL)
	}
	if f.cf.json {
		return writeJSON(a.env.Stdout, public)
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tURL\tTENANT\tEVENTS\tLABELS\tSTATE")
	for i, s := range public {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, orDash(s.URL), orDash(s.Tenant), orDash(strings.Join(s.Events, ",")),
			orDash(labelsText(s.Labels)), subState(subs[i], a.env.Now()))
	}
	return tw.Flush()
}

func subState(s webhooks.Subscription, now time.Time) string {
	switch {
	case s.Disabled != "":
		return "disabled: " + s.Disabled
	case s.Notify:
		return "notify secret"
	case len(s.Secrets(now)) > 1:
		return "rotating until " + s.PrevUntil.Format(time.RFC3339)
	}
	return "active"
}

func labelsText(l map[string]string) string {
	var parts []string
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (a *app) listDeliveries(ctx context.Context, f *webhookFlags, rest []string) error {
	if err := noArgs("webhooks deliveries", rest); err != nil {
		return err
	}
	st, done, err := a.webhookStore(ctx, f)
	if err != nil {
		return err
	}
	defer done()
	ds, err := st.Deliveries(ctx, f.failed)
	if err != nil {
		return err
	}
	if f.cf.json {
		return writeJSON(a.env.Stdout, ds)
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tTO\tSTATUS\tATTEMPTS\tLAST\tUPDATED")
	for _, d := range ds {
		last := "-"
		if n := len(d.Attempts); n > 0 {
			at := d.Attempts[n-1]
			last = strconv.Itoa(at.Status)
			if at.Error != "" {
				last += " " + at.Error
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Where, d.Status, len(d.Attempts), last, d.Updated.Format(time.RFC3339))
	}
	return tw.Flush()
}

func (a *app) replayDeliveries(ctx context.Context, f *webhookFlags, ids []string) error {
	if len(ids) == 0 {
		return usageErrorf("webhooks replay: want one or more DELIVERY ids (see enqueue webhooks deliveries)")
	}
	client, err := a.dial(ctx, &f.cf)
	if err != nil {
		return err
	}
	defer client.Close()
	st, err := client.Webhooks(ctx)
	if err != nil {
		return err
	}
	var missing int
	for _, id := range ids {
		if _, err := client.ReplayWebhook(ctx, st, id); errors.Is(err, webhooks.ErrNotFound) {
			fmt.Fprintf(a.env.Stderr, "%s: no such delivery\n", id)
			missing++
			continue
		} else if err != nil {
			return err
		}
		fmt.Fprintf(a.env.Stdout, "%s replayed\n", id)
	}
	if missing > 0 {
		return exitCode(ExitNoSuchJob)
	}
	return nil
}

// webhookStore dials NATS and opens the webhooks' buckets.
func (a *app) webhookStore(ctx context.Context, f *webhookFlags) (*webhooks.Store, func(), error) {
	client, err := a.dial(ctx, &f.cf)
	if err != nil {
		return nil, nil, err
	}
	st, err := client.Webhooks(ctx)
	if err != nil {
		client.Close()
		return nil, nil, &exitError{code: ExitRuntime, err: err}
	}
	return st, client.Close, nil
}
