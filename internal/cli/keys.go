package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

const keysAbout = `Create, list and revoke the HTTP API's keys (docs/http-api.md). A key acts
for one tenant: it submits that tenant's jobs and sees, cancels and retries
them and no others. "create" prints the key once; SLUICE_KEYS keeps only
a hash of it, so a lost key cannot be shown again: revoke it and create
another. --kinds limits the kinds it may submit, --max-priority the most
urgent priority it may ask (1 the most urgent), --rate its requests per
second on each worker serving the API (N/s).

Exit codes: 0 done, 2 usage error (every bad flag is named; nothing
written), 6 "revoke" of a key id that does not exist, 5 NATS unreachable
or another runtime error.`

// keyFlags are the flags of "keys".
type keyFlags struct {
	cf          connFlags
	tenant      string
	kinds       string
	maxPriority int
	rate        string
}

func (f *keyFlags) register(fs *flag.FlagSet) {
	f.cf.register(fs)
	fs.StringVar(&f.tenant, "tenant", "", "create: the tenant the key acts for (required)")
	fs.StringVar(&f.kinds, "kinds", "", "create: the kinds it may submit, comma-separated (default every kind)")
	fs.IntVar(&f.maxPriority, "max-priority", 0, "create: the most urgent priority it may ask, 1-5 (default any)")
	fs.StringVar(&f.rate, "rate", "", "create: requests per second it may make, `N/s` (default no limit)")
}

func runKeys(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("keys")
	var f keyFlags
	f.register(fs)
	h := help{
		usage: "enqueue keys create --tenant T [--kinds video,speech] [--max-priority N] [--rate N/s] [--json]\n" +
			"  enqueue keys list [--json]\n  enqueue keys revoke KEY_ID...",
		about: keysAbout,
		examples: `  enqueue keys create --tenant team-a --kinds video,speech --max-priority 2 --rate 10/s
  enqueue keys list --json
  enqueue keys revoke 3f9a1c0b7d2e`,
	}
	sub, args, err := a.subcommand(fs, h, args)
	if sub == "" {
		return err
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if err := noArgs("keys create", rest); err != nil {
			return err
		}
		return a.createKey(ctx, &f)
	case "list":
		if err := noArgs("keys list", rest); err != nil {
			return err
		}
		return a.listKeys(ctx, &f.cf)
	case "revoke":
		if len(rest) == 0 {
			return usageErrorf("keys revoke: want one or more KEY_IDs (enqueue keys list shows them)")
		}
		return a.revokeKeys(ctx, &f.cf, rest)
	}
	return usageErrorf("keys: unknown subcommand %q (want create, list or revoke)", sub)
}

// keyOf checks the flags of "keys create", naming every bad one.
func keyOf(f *keyFlags) (apikeys.Key, error) {
	var bad []string
	k := apikeys.Key{Tenant: f.tenant, MaxPriority: f.maxPriority}
	if !jobspec.ValidID(f.tenant) {
		bad = append(bad, fmt.Sprintf("--tenant: required, an id matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$, got %q", f.tenant))
	}
	if f.kinds != "" {
		for _, kind := range strings.Split(f.kinds, ",") {
			if kind = strings.TrimSpace(kind); !slices.Contains(contract.Kinds, kind) && kind != string(jobspec.KindPipeline) {
				bad = append(bad, fmt.Sprintf("--kinds: want video, speech, compute, container or pipeline, got %q", kind))
				continue
			}
			k.Kinds = append(k.Kinds, kind)
		}
	}
	if f.maxPriority < 0 || f.maxPriority > 5 {
		bad = append(bad, fmt.Sprintf("--max-priority: want 1 to 5, got %d", f.maxPriority))
	}
	if f.rate != "" {
		n, err := strconv.ParseFloat(strings.TrimSuffix(f.rate, "/s"), 64)
		if err != nil || !(n > 0) || n > 1e6 {
			bad = append(bad, fmt.Sprintf("--rate: want requests per second above 0, like 10/s, got %q", f.rate))
		}
		k.Rate = n
	}
	if len(bad) > 0 {
		return apikeys.Key{}, usageErrorf("%s", strings.Join(bad, "\n"))
	}
	return k, nil
}

func (a *app) createKey(ctx context.Context, f *keyFlags) error {
	k, err := keyOf(f)
	if err != nil {
		return err
	}
	store, done, err := a.keyStore(ctx, &f.cf, true)
	if err != nil {
		return err
	}
	defer done()
	token, k, err := store.Create(ctx, k)
	if err != nil {
		return err
	}
	if f.cf.json {
		return writeJSON(a.env.Stdout, struct {
			apikeys.Key
			Hash  string `json:"hash,omitempty"`
			Token string `json:"key"`
		}{Key: k, Token: token})
	}
	fmt.Fprintf(a.env.Stdout, "key %s for tenant %s (shown once; keep it secret):\n%s\n", k.ID, k.Tenant, token)
	return nil
}

func (a *app) listKeys(ctx context.Context, cf *connFlags) error {
	store, done, err := a.keyStore(ctx, cf, true)
	if err != nil {
		return err
	}
	defer done()
	keys, err := store.List(ctx)
	if err != nil {
		return err
	}
	for i := range keys {
		keys[i].Hash = "" // not a secret, but of no use to anyone
	}
	if cf.json {
		return writeJSON(a.env.Stdout, map[string]any{"keys": keys})
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tKINDS\tMAX PRIORITY\tRATE\tCREATED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.Revoked != nil {
			revoked = k.Revoked.Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, orAll(strings.Join(k.Kinds, ",")),
			orAll(intOrEmpty(k.MaxPriority)), orAll(rateText(k.Rate)), k.Created.Format("2006-01-02 15:04:05Z"), revoked)
	}
	return tw.Flush()
}

func orAll(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func intOrEmpty(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func rateText(r float64) string {
	if r == 0 {
		return ""
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + "/s"
}

func (a *app) revokeKeys(ctx context.Context, cf *connFlags, ids []string) error {
	store, done, err := a.keyStore(ctx, cf, false)
	if err != nil {
		return err
	}
	defer done()
	missing := 0
	for _, id := range ids {
		k, err := store.Revoke(ctx, id)
		if errors.Is(err, apikeys.ErrNoSuchKey) {
			fmt.Fprintf(a.env.Stderr, "%s: no such key\n", id)
			missing++
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(a.env.Stdout, "key %s of tenant %s revoked\n", k.ID, k.Tenant)
	}
	if missing > 0 {
		return exitCode(ExitNoSuchJob)
	}
	return nil
}

// keyStore connects and opens SLUICE_KEYS (creating it with create);
// done closes the connection.
func (a *app) keyStore(ctx context.Context, cf *connFlags, create bool) (*apikeys.Store, func(), error) {
	client, err := a.dial(ctx, cf)
	if err != nil {
		return nil, nil, err
	}
	store, err := client.APIKeys(ctx, create)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return store, client.Close, nil
}
