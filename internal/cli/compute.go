package cli

import (
	"context"
	"flag"
	"fmt"
	"path"
	"strings"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runCompute(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("compute")
	var (
		sf                                     specFlags
		pf                                     publishFlags
		template, queue, wallTime, script      string
		scriptFile                             string
		name, cluster, workDir, stdout, stderr string
		submitType, mem                        string
		nodes, ppn                             int
		inputs, outputs                        listFlag
		cover                                  bool
		extra                                  = labelFlag{}
	)
	fs.StringVar(&template, "template", "", "application template `TYPE/NAME` of the submit path (required)")
	fs.StringVar(&queue, "queue", "", "scheduler queue (required)")
	fs.IntVar(&nodes, "nodes", 0, "node count (required)")
	fs.IntVar(&ppn, "ppn", 0, "processes per node (required)")
	fs.StringVar(&wallTime, "wall-time", "", "wall time `HH:MM:SS` (required)")
	fs.StringVar(&script, "script", "", "scheduler script `PATH` on the cluster (this or --script-file is required)")
	fs.StringVar(&scriptFile, "script-file", "", "local scheduler script `FILE`: uploaded to S3, then into --work-dir on the cluster, and run from there")
	fs.Var(&inputs, "input", "upload `FROM=DIR` before submitting: s3://bucket/key or https:// URL, then the target directory on the cluster (repeatable)")
	fs.BoolVar(&cover, "cover-inputs", false, "overwrite files that already exist on the cluster when uploading --input files")
	fs.Var(&outputs, "output", "absolute file `PATH` on the cluster to collect after the job (repeatable; stdout and stderr are always collected)")
	fs.StringVar(&name, "name", "", "job name (default: the job id)")
	fs.StringVar(&cluster, "cluster", "", "cluster name or id (default: the first cluster)")
	fs.StringVar(&workDir, "work-dir", "", "working directory on the cluster")
	fs.StringVar(&stdout, "stdout", "", "standard output file on the cluster")
	fs.StringVar(&stderr, "stderr", "", "standard error file on the cluster")
	fs.StringVar(&submitType, "submit-type", "", "submission type (GAP_SUBMIT_TYPE)")
	fs.StringVar(&mem, "mem", "", "memory request (GAP_JOB_MEM), e.g. 64GB")
	fs.Var(extra, "extra", "extra mapAppJobInfo entry `GAP_KEY=VALUE`, sent verbatim (repeatable)")
	sf.register(fs)
	pf.register(fs, false)
	h := help{
		usage: "enqueue compute --template TYPE/NAME --queue Q --nodes N --ppn P --wall-time HH:MM:SS (--script PATH | --script-file FILE --work-dir DIR) [flags]",
		about: `Publish one compute job: upload the --input files, submit the template's
job, poll it to its end and collect its stdout, stderr and --output files.

The scheduler script is either a file already on the cluster (--script) or
a local file (--script-file): enqueue uploads it by content to the
worker's bucket under <SLUICE_S3_PREFIX>/inputs/sha256/<sha256><ext>
(SLUICE_S3_BUCKET, SLUICE_S3_ENDPOINT, SLUICE_S3_REGION,
SLUICE_S3_PATH_STYLE and the AWS credentials, as the worker reads them),
adds it to the job's inputs with --work-dir as its directory, and runs it
as <work dir>/<sha256><ext>.` + "\n" + publishAbout,
		examples: `  enqueue compute --template BASIC/BASE --queue normal --nodes 1 --ppn 1 --wall-time 00:10:00 \
      --script-file ./hello.sh --work-dir /public/home/dev/hello --wait
  enqueue compute --template BASIC/BASE --queue normal --nodes 2 --ppn 32 \
      --wall-time 36:00:00 --script /home/alice/hydro/run.sh \
      --input s3://hydro-in/meshes/basin.msh=/home/alice/hydro/run-1 \
      --output /home/alice/hydro/run-1/result.nc --work-dir /home/alice/hydro/run-1 --wait
  enqueue compute --template BASIC/BASE --queue gpu --nodes 1 --ppn 8 --wall-time 01:00:00 \
      --script /home/alice/train.sh --extra GAP_NGPU=1 --cluster cluster-east --id train-7`,
		exits: true,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("compute", rest); err != nil {
		return err
	}
	c := &jobspec.Compute{
		Cluster: cluster,
		Job: jobspec.ComputeJob{
			Name: name, SubmitType: submitType, Queue: queue, Nodes: nodes, PPN: ppn,
			WallTime: wallTime, WorkDir: workDir, Script: script, Stdout: stdout, Stderr: stderr, Mem: mem,
		},
		Outputs: outputs,
	}
	if len(extra) > 0 {
		c.Job.Extra = extra
	}
	// Flag values refused here are reported together with the spec's
	// problems (runBuilt), so one run names every mistake.
	var bad []flagProblem
	if template != "" {
		typ, nm, ok := strings.Cut(template, "/")
		if !ok || typ == "" || nm == "" || strings.Contains(nm, "/") {
			bad = append(bad, flagProblem{"--template", "compute.template", fmt.Sprintf("want TYPE/NAME, got %q", template)})
		} else {
			c.Template = jobspec.Template{Type: typ, Name: nm}
		}
	}
	// 0 would read as "not given" in the spec ("required"): say what is
	// wrong with the value that was given.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, n := range []struct {
		name, path string
		v          int
	}{{"nodes", "compute.job.nodes", nodes}, {"ppn", "compute.job.ppn", ppn}} {
		if given[n.name] && n.v <= 0 {
			bad = append(bad, flagProblem{"--" + n.name, n.path, fmt.Sprintf("must be positive, got %d", n.v)})
		}
	}
	names := flagNames{
		"compute":                 "--template",
		"compute.cluster":         "--cluster",
		"compute.template":        "--template",
		"compute.job":             "--queue",
		"compute.job.name":        "--name",
		"compute.job.queue":       "--queue",
		"compute.job.nodes":       "--nodes",
		"compute.job.ppn":         "--ppn",
		"compute.job.wall_time":   "--wall-time",
		"compute.job.script":      "--script/--script-file",
		"compute.job.work_dir":    "--work-dir",
		"compute.job.stdout":      "--stdout",
		"compute.job.stderr":      "--stderr",
		"compute.job.submit_type": "--submit-type",
		"compute.job.mem":         "--mem",
		"compute.job.extra":       "--extra",
		"compute.inputs":          "--input",
		"compute.outputs":         "--output",
	}
	for _, in := range inputs {
		// The directory is after the last "=": a URL may carry "=" in
		// its query, a directory rarely does.
		i := strings.LastIndex(in, "=")
		if i <= 0 || i == len(in)-1 {
			bad = append(bad, flagProblem{"--input", "", fmt.Sprintf("want FROM=DIR, for example s3://bucket/key=/home/me/run, got %q", in)})
			continue
		}
		c.Inputs = append(c.Inputs, jobspec.ComputeInput{From: in[:i], To: in[i+1:], Cover: cover})
	}
	var scriptObj *inputObject
	if scriptFile != "" {
		switch {
		case script != "":
			bad = append(bad, flagProblem{"--script-file", "compute.job.script", "give --script (a path on the cluster) or --script-file (a local file), not both"})
		case !path.IsAbs(workDir):
			bad = append(bad, flagProblem{"--work-dir", "compute.job.work_dir", "--script-file needs --work-dir, the absolute directory on the cluster the script is uploaded to and run in"})
		default:
			o, err := readScript(scriptFile)
			if err != nil {
				return usageErrorf("--script-file %s: %v", scriptFile, err)
			}
			scriptObj = &o
			// The script goes first: it is the job's, the other inputs
			// are its data. Its name on the cluster is its key's, so the
			// same bytes always land on the same file (cover is safe).
			c.Job.Script = path.Join(workDir, o.sum+o.ext)
			c.Inputs = append([]jobspec.ComputeInput{{From: "s3://bucket/local-file", To: workDir, Cover: true}}, c.Inputs...)
			names["compute.inputs[0]"] = "--script-file"
		}
	}
	spec := &jobspec.Spec{Kind: jobspec.KindCompute, Compute: c}
	sf.apply(spec)
	if scriptObj != nil {
		// Nothing is uploaded for a job that cannot be published.
		if err := pf.check(); err != nil {
			return err
		}
		if _, err := a.submission(ctx, spec, names, &pf, bad); err != nil {
			return err
		}
		store, err := a.inputStore(ctx)
		if err != nil {
			return err
		}
		url, err := a.upload(ctx, store, *scriptObj, &pf)
		if err != nil {
			return fmt.Errorf("--script-file %s: %w", scriptFile, err)
		}
		c.Inputs[0].From = url
	}
	return a.runBuilt(ctx, spec, names, &pf, bad...)
}
