package jobspec

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// MaxContainerScriptBytes bounds container.script: the script travels in
// the create call's JSON body as the instance's start script, whose limit
// the platform does not document.
const MaxContainerScriptBytes = 64 << 10

// Accelerators are the container.instance.accelerator values: the
// platform's acceleratorType.
var Accelerators = []string{"gpu", "dcu", "mlu", "cpu"}

// Mount types of container.instance.mounts[].type: the platform's
// mountInfoList type.
const (
	MountData = "data"
	MountPath = "path"
)

// Container is the container section (docs/job-spec.md): a script run
// in a fresh container instance of the compute platform, with the files to
// upload before and download after.
type Container struct {
	// Cluster is the optional region id or name; empty means
	// SLUICE_COMPUTE_REGION or the first usable region.
	Cluster string `json:"cluster,omitempty"`
	// Instance describes the container instance to create.
	Instance ContainerInstance `json:"instance"`
	// Script is the shell script run in the instance (bash), at most
	// MaxContainerScriptBytes, not blank, without NUL.
	Script string `json:"script"`
	// WorkDir is the absolute directory on the cluster's shared storage
	// that holds the script's output, exit status and logs; empty means
	// <homePath>/sluice/<job id>.
	WorkDir string `json:"work_dir,omitempty"`
	// Inputs are uploaded, in order, before the instance is created.
	Inputs []ComputeInput `json:"inputs,omitempty"`
	// Outputs are absolute file paths on the cluster downloaded after the
	// script ends (its stdout and stderr are always collected).
	Outputs []string `json:"outputs,omitempty"`
}

// ContainerInstance is the instance's image and resources.
type ContainerInstance struct {
	// Image is the imagePath, e.g. registry:5000/gpu/admin/base/x:1.0.
	Image string `json:"image"`
	// Version is the image name (the platform's version), e.g. x:1.0.
	Version string `json:"version"`
	// Accelerator is the acceleratorType: gpu, dcu, mlu or cpu.
	Accelerator string `json:"accelerator"`
	// ResourceGroup is the resourceGroup, e.g. TeslaM40.
	ResourceGroup string `json:"resource_group"`
	// CPUs is the cpuNumber, a positive integer.
	CPUs int `json:"cpus"`
	// GPUs is the gpuNumber (accelerator cards), a non-negative integer;
	// it must be 0 with accelerator cpu.
	GPUs int `json:"gpus,omitempty"`
	// RAMMB is the ramSize in MB, a positive integer.
	RAMMB int `json:"ram_mb"`
	// Timeout is the timeoutLimit, HH:MM:SS longer than zero: the
	// platform stops the instance then, and sluice gives up on the script.
	Timeout string `json:"timeout"`
	// Mounts are mounted into the instance besides the work directory.
	Mounts []ContainerMount `json:"mounts,omitempty"`
}

// ContainerMount is one mountInfoList entry.
type ContainerMount struct {
	// Source is the absolute path on the cluster.
	Source string `json:"source"`
	// Target is the absolute path in the instance.
	Target string `json:"target"`
	// Type is data or path; data when absent.
	Type string `json:"type,omitempty"`
}

// ContainerTarget is what Request needs besides the spec.
type ContainerTarget struct {
	// Name is the instanceServiceName (derived from the job id).
	Name string
	// WorkDir is the effective work directory, mounted at the same path.
	WorkDir string
	// StartScript is the wrapped script sent as startScriptContent.
	StartScript string
}

// Request returns the create-instance body: an ssh-type instance of one
// task whose start script (for all its containers) is t.StartScript, with
// the work directory mounted at its own path before the spec's mounts.
func (c *Container) Request(t ContainerTarget) apiclient.InstanceRequest {
	in := &c.Instance
	mounts := []apiclient.MountInfo{{SourcePath: t.WorkDir, TargetPath: t.WorkDir, Type: MountPath}}
	for _, m := range in.Mounts {
		typ := m.Type
		if typ == "" {
			typ = MountData
		}
		mounts = append(mounts, apiclient.MountInfo{SourcePath: m.Source, TargetPath: m.Target, Type: typ})
	}
	return apiclient.InstanceRequest{
		InstanceServiceName:    t.Name,
		TaskType:               "ssh",
		AcceleratorType:        in.Accelerator,
		Version:                in.Version,
		ImagePath:              in.Image,
		ResourceGroup:          in.ResourceGroup,
		CPUNumber:              in.CPUs,
		GPUNumber:              in.GPUs,
		RAMSize:                in.RAMMB,
		TaskNumber:             1,
		TimeoutLimit:           in.Timeout,
		UseStartScript:         true,
		StartScriptActionScope: "all",
		StartScriptContent:     t.StartScript,
		MountInfoList:          mounts,
		Description:            "sluice job",
	}
}

func (c *Container) decode(d *decoder, path string, raw json.RawMessage) bool {
	return d.object(path, raw, map[string]fieldFunc{
		"cluster":  func(p string, r json.RawMessage) { d.optStr(p, r, &c.Cluster) },
		"instance": func(p string, r json.RawMessage) { c.Instance.decode(d, p, r) },
		"script":   func(p string, r json.RawMessage) { d.str(p, r, &c.Script) },
		"work_dir": func(p string, r json.RawMessage) { d.optStr(p, r, &c.WorkDir) },
		"inputs":   func(p string, r json.RawMessage) { c.Inputs = decodeInputs(d, p, r) },
		"outputs":  func(p string, r json.RawMessage) { c.Outputs = decodeOutputs(d, p, r) },
	})
}

func (in *ContainerInstance) decode(d *decoder, path string, raw json.RawMessage) {
	str := func(dst *string) fieldFunc {
		return func(p string, r json.RawMessage) { d.str(p, r, dst) }
	}
	num := func(dst *int, lo int64, rule string) fieldFunc {
		return func(p string, r json.RawMessage) { d.integer(p, r, dst, lo, math.MaxInt32, rule) }
	}
	d.object(path, raw, map[string]fieldFunc{
		"image":          str(&in.Image),
		"version":        str(&in.Version),
		"accelerator":    str(&in.Accelerator),
		"resource_group": str(&in.ResourceGroup),
		"cpus":           num(&in.CPUs, 1, positiveRule),
		"gpus":           num(&in.GPUs, 0, nonNegativeRule),
		"ram_mb":         num(&in.RAMMB, 1, positiveRule),
		"timeout":        str(&in.Timeout),
		"mounts": func(p string, r json.RawMessage) {
			elems, _ := d.array(p, r)
			for i, e := range elems {
				var m ContainerMount
				d.object(index(p, i), e, map[string]fieldFunc{
					"source": func(p string, r json.RawMessage) { d.str(p, r, &m.Source) },
					"target": func(p string, r json.RawMessage) { d.str(p, r, &m.Target) },
					"type":   func(p string, r json.RawMessage) { d.optStr(p, r, &m.Type) },
				})
				in.Mounts = append(in.Mounts, m)
			}
		},
	})
}

func (c *Container) validate(ps *problems, path string) {
	c.Instance.validate(ps, field(path, "instance"))
	script := field(path, "script")
	switch {
	case strings.TrimSpace(c.Script) == "":
		ps.add(script, "required (must not be blank)")
	case len(c.Script) > MaxContainerScriptBytes:
		ps.add(script, fmt.Sprintf("is %d bytes, more than the limit of %d", len(c.Script), MaxContainerScriptBytes))
	case strings.ContainsRune(c.Script, 0):
		ps.add(script, "must not contain NUL")
	}
	if c.WorkDir != "" {
		if rule := absPathRule(c.WorkDir, true); rule != "" {
			ps.add(field(path, "work_dir"), rule)
		} else if strings.ContainsAny(c.WorkDir, "'\\") {
			// The wrapper quotes the directory in single quotes.
			ps.add(field(path, "work_dir"), `must not contain "'" or "\"`)
		}
	}
	validateInputs(ps, field(path, "inputs"), c.Inputs)
	outputs := field(path, "outputs")
	for i, out := range c.Outputs {
		if rule := absPathRule(out, false); rule != "" {
			ps.add(index(outputs, i), rule)
		}
	}
}

func (in *ContainerInstance) validate(ps *problems, path string) {
	for _, r := range []struct{ name, value string }{
		{"image", in.Image}, {"version", in.Version}, {"resource_group", in.ResourceGroup},
	} {
		switch {
		case strings.TrimSpace(r.value) == "":
			ps.add(field(path, r.name), "required (must not be empty)")
		case hasControl(r.value):
			ps.add(field(path, r.name), "must not contain control characters")
		}
	}
	known := false
	for _, a := range Accelerators {
		known = known || in.Accelerator == a
	}
	switch {
	case in.Accelerator == "":
		ps.add(field(path, "accelerator"), "required (one of "+strings.Join(Accelerators, ", ")+")")
	case !known:
		ps.add(field(path, "accelerator"), "must be one of "+strings.Join(Accelerators, ", ")+", got "+quote(in.Accelerator))
	}
	if in.CPUs <= 0 {
		ps.add(field(path, "cpus"), "required: "+positiveRule)
	}
	if in.RAMMB <= 0 {
		ps.add(field(path, "ram_mb"), "required: "+positiveRule)
	}
	switch {
	case in.GPUs < 0:
		ps.add(field(path, "gpus"), nonNegativeRule)
	case in.GPUs > 0 && in.Accelerator == "cpu":
		ps.add(field(path, "gpus"), "must be 0 (or absent) when accelerator is cpu")
	}
	switch t := in.Timeout; {
	case t == "":
		ps.add(field(path, "timeout"), "required: HH:MM:SS (the instance is billed until it ends)")
	case !wallTimePattern.MatchString(t) || strings.Trim(t, "0:") == "":
		ps.add(field(path, "timeout"), "must be HH:MM:SS (hours may exceed 24, minutes and seconds below 60), longer than zero")
	}
	mounts := field(path, "mounts")
	for i, m := range in.Mounts {
		item := index(mounts, i)
		if rule := absPathRule(m.Source, true); rule != "" {
			ps.add(field(item, "source"), rule)
		}
		if rule := absPathRule(m.Target, true); rule != "" {
			ps.add(field(item, "target"), rule)
		}
		if m.Type != "" && m.Type != MountData && m.Type != MountPath {
			ps.add(field(item, "type"), "must be data or path, got "+quote(m.Type))
		}
	}
}

// TimeoutSeconds returns Timeout in seconds (0 when it is not
// HH:MM:SS).
func (in *ContainerInstance) TimeoutSeconds() int64 {
	var h, m, s int64
	if _, err := fmt.Sscanf(in.Timeout, "%d:%d:%d", &h, &m, &s); err != nil {
		return 0
	}
	return ((h*60+m)*60 + s)
}
