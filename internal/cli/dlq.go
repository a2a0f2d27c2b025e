package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

const dlqUsage = `Usage:
  enqueue dlq list    [--kind K] [--since D] [--reason R] [--json]
  enqueue dlq show    ID... | --seq N
  enqueue dlq replay  ID... | --seq N | --kind K | --since D | --reason R | --all  [--force] [--wait]
  enqueue dlq purge   ID... | --seq N | --kind K | --since D | --reason R | --all  [--yes]

SLUICE_DLQ holds the messages sluice could not process (invalid spec,
refused or ambiguous submission, too many deliveries, artifacts that could
not be copied), each unchanged, with its reason (Sluice-Error) and job id.
Run "enqueue dlq <subcommand> --help" for its flags and examples; each
subcommand takes the flags below that its usage line names.

Flags:
  --nats-url URL
      NATS server URL(s), comma-separated (default $SLUICE_NATS_URL)
  --creds FILE
      NATS credentials file (default $SLUICE_NATS_CREDS)
  --json
      print JSON for scripts instead of text
  --seq N
      the letter with this sequence in SLUICE_DLQ (repeatable; for letters without a job id)
  --kind KIND
      only letters of this kind: video, speech, compute, container or pipeline
  --since DURATION
      only letters of this past period, e.g. 1h
  --reason R
      only letters whose error code is R, or whose reason contains it
  --all
      replay, purge: every letter (when no id or filter is given)
  --force
      replay: also a letter dead-lettered for submit_ambiguous, which MAY PAY TWICE
  --wait
      replay: follow the new jobs to the end, like video --wait
  --timeout DURATION
      replay with --wait: give up waiting after this long, exit 4
  --yes
      purge: do not ask for confirmation (for scripts)
`

func runDLQ(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(a.env.Stderr, dlqUsage)
		return exitCode(ExitUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.env.Stdout, dlqUsage)
		return nil
	case "list":
		return runDLQList(ctx, a, args[1:])
	case "show":
		return runDLQShow(ctx, a, args[1:])
	case "replay":
		return runDLQReplay(ctx, a, args[1:])
	case "purge":
		return runDLQPurge(ctx, a, args[1:])
	}
	return usageErrorf("dlq: unknown subcommand %q (want list, show, replay or purge)", args[0])
}

// seqFlag is a repeatable --seq N.
type seqFlag []uint64

func (s *seqFlag) String() string { return "" }
func (s *seqFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return fmt.Errorf("want a positive sequence number, got %q", v)
	}
	*s = append(*s, n)
	return nil
}

// dlqSelect are the flags that select dead letters.
type dlqSelect struct {
	seqs   seqFlag
	kind   string
	since  time.Duration
	reason string
	all    bool
}

func (d *dlqSelect) register(fs *flag.FlagSet, withAll bool) {
	fs.Var(&d.seqs, "seq", "the letter with this sequence in SLUICE_DLQ, `N` (repeatable; for letters without a job id)")
	fs.StringVar(&d.kind, "kind", "", "only letters of this kind: video, speech, compute, container or pipeline")
	fs.DurationVar(&d.since, "since", 0, "only letters of this past period, e.g. 1h")
	fs.StringVar(&d.reason, "reason", "", "only letters whose error code is this (e.g. invalid_spec), or whose reason contains it")
	if withAll {
		fs.BoolVar(&d.all, "all", false, "every letter (when no id or filter is given)")
	}
}

// filter checks the selection and returns it; ids are the positional job
// ids. needSome requires an id, a filter or --all.
func (d *dlqSelect) filter(cmd string, ids []string, needSome bool) (jobclient.DLQFilter, error) {
	for _, id := range ids {
		if !jobspec.ValidID(id) {
			return jobclient.DLQFilter{}, usageErrorf("dlq %s: %q is not a job id (^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$)", cmd, id)
		}
	}
	if err := checkKind(d.kind); err != nil {
		return jobclient.DLQFilter{}, err
	}
	if err := positiveDuration("since", d.since); err != nil {
		return jobclient.DLQFilter{}, err
	}
	some := len(ids) > 0 || len(d.seqs) > 0 || d.kind != "" || d.since > 0 || d.reason != ""
	if needSome && !some && !d.all {
		return jobclient.DLQFilter{}, usageErrorf("dlq %s: name job ids, --seq, a filter (--kind, --since, --reason) or --all (see enqueue dlq %s --help)", cmd, cmd)
	}
	if d.all && some {
		return jobclient.DLQFilter{}, usageErrorf("dlq %s: --all cannot be combined with ids or filters", cmd)
	}
	return jobclient.DLQFilter{IDs: ids, Seqs: d.seqs, Kind: jobspec.Kind(d.kind), Since: d.since, Reason: d.reason}, nil
}

// deadLetters dials and reads the letters f selects; with some, none is an
// error (exit 6). The caller closes the client.
func (a *app) deadLetters(ctx context.Context, cf *connFlags, f jobclient.DLQFilter, some bool) (*jobclient.Client, []jobclient.DeadLetter, error) {
	client, err := a.dial(ctx, cf)
	if err != nil {
		return nil, nil, err
	}
	dls, err := client.DeadLetters(ctx, f)
	switch {
	case err != nil:
		err = dlqRefused(notSetUp(err))
	case some && len(dls) == 0:
		err = &exitError{code: ExitNoSuchJob, err: errors.New("no dead letter matches")}
	}
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, dls, nil
}

func runDLQList(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("dlq list")
	var (
		cf  connFlags
		sel dlqSelect
	)
	cf.register(fs)
	sel.register(fs, false)
	h := help{
		usage: "enqueue dlq list [--kind K] [--since D] [--reason R] [--json] [flags]",
		about: `List the dead letters in SLUICE_DLQ, oldest first: sequence, time, kind, job
id, size and reason. With --json: {"dead_letters":[{"seq","job_id","kind",
"reason","code","time","size"}]}.

Exit codes: 0 listed (even none), 2 usage error, 5 NATS unreachable or
another runtime error.`,
		examples: `  enqueue dlq list
  enqueue dlq list --reason submit_ambiguous --since 24h
  enqueue dlq list --kind video --json | jq '.dead_letters[].job_id'`,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("dlq list", rest); err != nil {
		return err
	}
	f, err := sel.filter("list", nil, false)
	if err != nil {
		return err
	}
	client, dls, err := a.deadLetters(ctx, &cf, f, false)
	if err != nil {
		return err
	}
	defer client.Close()
	if cf.json {
		return writeJSON(a.env.Stdout, struct {
			DeadLetters []jobclient.DeadLetter `json:"dead_letters"`
		}{dls})
	}
	if len(dls) == 0 {
		fmt.Fprintln(a.env.Stdout, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tJOB\tSIZE\tREASON")
	for _, d := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", d.Seq, d.Time.Format(time.RFC3339), d.Kind, orDash(d.JobID), d.Size, d.Reason)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runDLQShow(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("dlq show")
	var (
		cf   connFlags
		seqs seqFlag
	)
	cf.register(fs)
	fs.Var(&seqs, "seq", "the letter with this sequence in SLUICE_DLQ, `N` (repeatable; for letters without a job id)")
	h := help{
		usage: "enqueue dlq show [--json] [flags] ID... | --seq N",
		about: `Show dead letters: their reason, job id, kind and time, then the message
exactly as it arrived (the job spec), on stdout. With --json, one object
per letter with the fields of "dlq list --json" plus "message": the spec
as a JSON value when it is JSON, else as a string.

Exit codes: 0 shown, 6 no letter has one of the ids, 2 usage error, 5 NATS
unreachable or another runtime error.`,
		examples: `  enqueue dlq show clip-0001
  enqueue dlq show --seq 42
  enqueue dlq show clip-0001 --json | jq .message > clip-0001.json`,
	}
	ids, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if len(ids) == 0 && len(seqs) == 0 {
		return usageErrorf("dlq show: name job ids or --seq N (see enqueue dlq show --help)")
	}
	sel := dlqSelect{seqs: seqs}
	f, err := sel.filter("show", ids, true)
	if err != nil {
		return err
	}
	f.WithData = true
	client, dls, err := a.deadLetters(ctx, &cf, f, true)
	if err != nil {
		return err
	}
	defer client.Close()
	for i, d := range dls {
		if cf.json {
			var msg any = string(d.Data)
			if json.Valid(d.Data) {
				msg = json.RawMessage(d.Data)
			}
			if err := writeJSON(a.env.Stdout, struct {
				jobclient.DeadLetter
				Message any `json:"message"`
			}{d, msg}); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(a.env.Stdout)
		}
		fmt.Fprintf(a.env.Stdout, "seq %d  %s  %s  job %s\nreason: %s\n%s\n", d.Seq, d.Time.Format(time.RFC3339), d.Kind, orDash(d.JobID), d.Reason, d.Data)
	}
	return nil
}

func runDLQReplay(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("dlq replay")
	var (
		rf  rerunFlags
		sel dlqSelect
	)
	rf.pf.conn.register(fs)
	sel.register(fs, true)
	rf.register(fs)
	h := help{
		usage: "enqueue dlq replay [selection] [--force] [--wait [--timeout D]] [--json] [flags]",
		about: `Run dead-lettered jobs again, as retries (see enqueue retry --help): the
letter's message, as it arrived, is the spec of a new job X-r<N> with the
label retry_of=X. Once the retry is queued the letter is removed from
SLUICE_DLQ. Select letters by job id, --seq, --kind, --since, --reason, or
--all.

A letter whose spec is invalid is not replayed (fix the spec and submit it
instead), nor one whose job has not ended (a stray copy of a job a worker
runs); one whose job succeeded is replayed only with --force. A letter dead-lettered for submit_ambiguous is replayed only with
--force: its first submission may have reached upstream, so running it
again MAY PAY TWICE.

With --json: {"retries":[...],"refused":[{"job_id","seq","error"}],"wait"}.`,
		examples: `  enqueue dlq replay clip-0001
  enqueue dlq replay --reason too_many_deliveries --since 1h --wait
  enqueue dlq replay clip-0002 --force     # submit_ambiguous: may pay twice`,
		exits: true,
	}
	ids, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	f, err := sel.filter("replay", ids, true)
	if err != nil {
		return err
	}
	if err := rf.pf.check(); err != nil {
		return err
	}
	f.WithData = true
	tctx, tr, opts, err := a.startRerunTracing(ctx, rf.force, rf.pf.asTenant)
	if err != nil {
		return err
	}
	defer a.stopTracing(ctx, tr) // on a failure to ask; a second Shutdown does nothing
	since := a.env.Now()
	client, dls, err := a.deadLetters(ctx, &rf.pf.conn, f, true)
	if err != nil {
		return err
	}
	defer client.Close()
	rep := &retryReport{Retries: []jobclient.RetryResult{}, Refused: []refusal{}}
	for _, d := range dls {
		res, err := client.Replay(tctx, d, opts)
		switch {
		case isRefusal(err):
			a.refuse(rep, &rf.pf, refusal{JobID: d.JobID, Seq: d.Seq, Error: refusalText(err)})
			continue
		case err != nil && res == nil:
			return err
		case err != nil:
			fmt.Fprintf(a.env.Stderr, "enqueue: %v\n", err)
		}
		a.retried(rep, &rf.pf, res)
	}
	a.stopTracing(ctx, tr) // before --wait, which may be long
	code := ExitOK
	if len(rep.Refused) > 0 {
		code = ExitFailed
	}
	return a.afterRerun(ctx, client, rep, &rf.pf, since, code)
}

func runDLQPurge(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("dlq purge")
	var (
		cf  connFlags
		sel dlqSelect
		yes bool
	)
	cf.register(fs)
	sel.register(fs, true)
	fs.BoolVar(&yes, "yes", false, "do not ask for confirmation (for scripts)")
	h := help{
		usage: "enqueue dlq purge [selection] [--yes] [--json] [flags]",
		about: `Remove dead letters from SLUICE_DLQ for good. Select them by job id, --seq,
--kind, --since, --reason, or --all. enqueue lists what it is about to
remove and asks for confirmation on stdin; --yes skips the question. The
jobs' records and events are not touched.

With --json: {"purged":[{"seq","job_id",...}]}.

Exit codes: 0 removed, 2 usage error or not confirmed, 6 no letter matches,
5 NATS unreachable or another runtime error.`,
		examples: `  enqueue dlq purge clip-0001
  enqueue dlq purge --reason invalid_spec --yes
  enqueue dlq purge --all`,
	}
	ids, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	f, err := sel.filter("purge", ids, true)
	if err != nil {
		return err
	}
	client, dls, err := a.deadLetters(ctx, &cf, f, true)
	if err != nil {
		return err
	}
	defer client.Close()
	if !yes {
		fmt.Fprintf(a.env.Stderr, "About to remove %d dead letter(s) from SLUICE_DLQ:\n", len(dls))
		for i, d := range dls {
			if i == maxListed {
				fmt.Fprintf(a.env.Stderr, "  ... and %d more\n", len(dls)-i)
				break
			}
			fmt.Fprintf(a.env.Stderr, "  %d  %s  %s  %s\n", d.Seq, d.Kind, orDash(d.JobID), d.Reason)
		}
		fmt.Fprint(a.env.Stderr, "Remove them? [y/N] ")
		line, _ := bufio.NewReader(a.env.Stdin).ReadString('\n')
		if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
			return usageErrorf("dlq purge: not confirmed; nothing removed (--yes skips the question)")
		}
	}
	for _, d := range dls {
		if err := client.PurgeDeadLetter(ctx, d.Seq); err != nil {
			return dlqRefused(err)
		}
	}
	if cf.json {
		return writeJSON(a.env.Stdout, struct {
			Purged []jobclient.DeadLetter `json:"purged"`
		}{dls})
	}
	fmt.Fprintf(a.env.Stdout, "removed %d dead letter(s)\n", len(dls))
	return nil
}

// dlqRefused says, for a user whose permissions leave SLUICE_DLQ out (the
// producer of config/nats/users.conf), which user may read it.
func dlqRefused(err error) error {
	var refused *jobclient.ReadRefusedError
	if !errors.As(err, &refused) {
		return err
	}
	return &exitError{code: ExitRuntime, err: fmt.Errorf("%w; the dead letters are for a user allowed "+
		"SLUICE_DLQ (admin in config/nats/users.conf; producer is not): give its URL or credentials, "+
		"e.g. --nats-url nats://admin:PASSWORD@HOST:4222 (docs/operating.md, least-privilege users)", err)}
}
