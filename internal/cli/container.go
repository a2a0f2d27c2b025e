package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runContainer(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("container")
	var (
		sf                                 specFlags
		pf                                 publishFlags
		image, version, accelerator, group string
		timeout, script, scriptFile        string
		cluster, workDir                   string
		cpus, gpus, ramMB                  int
		inputs, outputs, mounts            listFlag
		cover                              bool
	)
	fs.StringVar(&image, "image", "", "image path `REGISTRY/PATH:TAG` (required)")
	fs.StringVar(&version, "version", "", "image name `NAME:TAG`, the platform's version (required)")
	fs.StringVar(&accelerator, "accelerator", "", "accelerator type: "+strings.Join(jobspec.Accelerators, ", ")+" (required)")
	fs.StringVar(&group, "resource-group", "", "resource `GROUP`, e.g. TeslaM40 (required)")
	fs.IntVar(&cpus, "cpus", 0, "CPU cores (required)")
	fs.IntVar(&gpus, "gpus", 0, "accelerator cards (0 with --accelerator cpu)")
	fs.IntVar(&ramMB, "ram-mb", 0, "memory in `MB` (required)")
	fs.StringVar(&timeout, "instance-timeout", "", "the instance's time limit `HH:MM:SS` (required): the platform stops it then")
	fs.StringVar(&script, "script", "", "the bash script to run, as `TEXT` (this or --script-file is required)")
	fs.StringVar(&scriptFile, "script-file", "", "local bash script `FILE` whose content is the script to run")
	fs.Var(&inputs, "input", "upload `FROM=DIR` before creating the instance: s3://bucket/key or https:// URL, then the target directory on the cluster (repeatable)")
	fs.BoolVar(&cover, "cover-inputs", false, "overwrite files that already exist on the cluster when uploading --input files")
	fs.Var(&outputs, "output", "absolute file `PATH` on the cluster to collect after the script (repeatable; stdout and stderr are always collected)")
	fs.Var(&mounts, "mount", "also mount `SOURCE=TARGET` (absolute paths on the cluster and in the instance) as a data mount (repeatable)")
	fs.StringVar(&cluster, "cluster", "", "region name or id (default: SLUICE_COMPUTE_REGION, else the first usable)")
	fs.StringVar(&workDir, "work-dir", "", "the job's directory on the cluster (default: <home>/sluice/<job id>)")
	sf.register(fs)
	pf.register(fs, false)
	h := help{
		usage: "enqueue container --image I --version V --accelerator A --resource-group G --cpus N --ram-mb MB --instance-timeout HH:MM:SS (--script TEXT | --script-file FILE) [flags]",
		about: `Publish one container job: upload the --input files, create a container
instance of the image that runs the script (bash), wait for the script's
exit status, collect its stdout, stderr and --output files, and delete the
instance, whatever the outcome.

The script is the job's own text (at most 64 KiB): --script gives it
inline, --script-file reads it from a local file.` + "\n" + publishAbout,
		examples: `  enqueue container --image registry:5000/gpu/admin/base/torch:2.1 --version torch:2.1 \
      --accelerator gpu --resource-group TeslaM40 --cpus 4 --gpus 1 --ram-mb 16384 \
      --instance-timeout 02:00:00 --script-file ./train.sh \
      --input s3://data/train.tar=/public/home/alice/run-1 --output /public/home/alice/run-1/model.bin --wait
  enqueue container --image registry:5000/cpu/base/python:3.12 --version python:3.12 \
      --accelerator cpu --resource-group cpu-small --cpus 2 --ram-mb 4096 \
      --instance-timeout 00:10:00 --script 'python3 -c "print(42)"' --id answer-1`,
		exits: true,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("container", rest); err != nil {
		return err
	}
	c := &jobspec.Container{
		Cluster: cluster,
		Instance: jobspec.ContainerInstance{
			Image: image, Version: version, Accelerator: accelerator, ResourceGroup: group,
			CPUs: cpus, GPUs: gpus, RAMMB: ramMB, Timeout: timeout,
		},
		Script:  script,
		WorkDir: workDir,
		Outputs: outputs,
	}
	// Flag values refused here are reported together with the spec's
	// problems (runBuilt), so one run names every mistake.
	var bad []flagProblem
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// 0 would read as "not given" in the spec ("required"): say what is
	// wrong with the value that was given.
	for _, n := range []struct {
		name, path string
		v          int
	}{{"cpus", "container.instance.cpus", cpus}, {"ram-mb", "container.instance.ram_mb", ramMB}} {
		if given[n.name] && n.v <= 0 {
			bad = append(bad, flagProblem{"--" + n.name, n.path, fmt.Sprintf("must be positive, got %d", n.v)})
		}
	}
	if given["script-file"] {
		switch text, err := readContainerScript(scriptFile); {
		case given["script"]:
			bad = append(bad, flagProblem{"--script-file", "container.script", "give --script (the text) or --script-file (a local file), not both"})
		case err != nil:
			return usageErrorf("--script-file %s: %v", scriptFile, err)
		default:
			c.Script = text
		}
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
	for _, m := range mounts {
		src, dst, ok := strings.Cut(m, "=")
		if !ok || src == "" || dst == "" {
			bad = append(bad, flagProblem{"--mount", "", fmt.Sprintf("want SOURCE=TARGET, for example /public/data=/data, got %q", m)})
			continue
		}
		c.Instance.Mounts = append(c.Instance.Mounts, jobspec.ContainerMount{Source: src, Target: dst, Type: jobspec.MountData})
	}
	names := flagNames{
		"container":                         "--image",
		"container.cluster":                 "--cluster",
		"container.instance":                "--image",
		"container.instance.image":          "--image",
		"container.instance.version":        "--version",
		"container.instance.accelerator":    "--accelerator",
		"container.instance.resource_group": "--resource-group",
		"container.instance.cpus":           "--cpus",
		"container.instance.gpus":           "--gpus",
		"container.instance.ram_mb":         "--ram-mb",
		"container.instance.timeout":        "--instance-timeout",
		"container.instance.mounts":         "--mount",
		"container.script":                  "--script/--script-file",
		"container.work_dir":                "--work-dir",
		"container.inputs":                  "--input",
		"container.outputs":                 "--output",
	}
	spec := &jobspec.Spec{Kind: jobspec.KindContainer, Container: c}
	sf.apply(spec)
	return a.runBuilt(ctx, spec, names, &pf, bad...)
}

// readContainerScript returns the content of the local script at p. Its
// size is checked before it is read (the spec's own limit, with a hint);
// the spec's validation checks the rest (blank, NUL).
func readContainerScript(p string) (string, error) {
	fh, _, err := openScriptFile(p, "container", jobspec.MaxContainerScriptBytes)
	if err != nil {
		return "", err
	}
	defer func() { _ = fh.Close() }()
	b, err := io.ReadAll(io.LimitReader(fh, jobspec.MaxContainerScriptBytes+1))
	if err == nil && strings.TrimSpace(string(b)) == "" {
		err = errors.New("the file is empty")
	}
	return string(b), err
}
