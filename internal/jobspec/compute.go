package jobspec

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// MaxTemplateBytes bounds template.type and template.name.
const MaxTemplateBytes = 128

var (
	templatePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	wallTimePattern = regexp.MustCompile(`^[0-9]{2,}:[0-5][0-9]:[0-5][0-9]$`)
	extraKeyPattern = regexp.MustCompile(`^GAP_[A-Z0-9_]+$`)
)

// Compute is the compute section (docs/job-spec.md): which template to
// submit, the job's parameters by friendly name, the files to upload before
// and download after.
type Compute struct {
	// Cluster is the optional cluster name or id from the token response;
	// empty means the first cluster.
	Cluster string `json:"cluster,omitempty"`
	// Template names the submit path's <template_type>/<template_name>.
	Template Template `json:"template"`
	// Job holds the mapAppJobInfo values by friendly name.
	Job ComputeJob `json:"job"`
	// Inputs are uploaded, in order, before submitting.
	Inputs []ComputeInput `json:"inputs,omitempty"`
	// Outputs are absolute file paths on the cluster downloaded after the
	// job ends (its stdout and stderr files are always collected).
	Outputs []string `json:"outputs,omitempty"`
}

// Template is an application template. Both parts are required single URL
// path segments: ^[A-Za-z0-9][A-Za-z0-9._-]*$, no "..", at most 128 bytes.
type Template struct {
	// Type is the <template_type> of the submit path.
	Type string `json:"type"`
	// Name is the <template_name> of the submit path.
	Name string `json:"name"`
}

// ComputeJob is the job's parameters by friendly name; Request maps them onto
// mapAppJobInfo's GAP_* keys. Queue, Nodes, PPN, WallTime and Script are
// required unless Extra carries their key (GAP_QUEUE, GAP_NNODE, GAP_PPN,
// GAP_WALL_TIME, GAP_SCHED_FILE).
type ComputeJob struct {
	// Name is GAP_JOB_NAME; the job id when empty.
	Name string `json:"name,omitempty"`
	// SubmitType is GAP_SUBMIT_TYPE; left out of the request when empty.
	SubmitType string `json:"submit_type,omitempty"`
	// Queue is GAP_QUEUE.
	Queue string `json:"queue,omitempty"`
	// Nodes is GAP_NNODE, a positive integer.
	Nodes int `json:"nodes,omitempty"`
	// PPN is GAP_PPN (processes per node), a positive integer.
	PPN int `json:"ppn,omitempty"`
	// WallTime is GAP_WALL_TIME, HH:MM:SS: hours two or more digits (they
	// may exceed 24), minutes and seconds below 60, longer than zero.
	WallTime string `json:"wall_time,omitempty"`
	// WorkDir is GAP_WORK_DIR; left out of the request when empty.
	WorkDir string `json:"work_dir,omitempty"`
	// Script is GAP_SCHED_FILE, the scheduler script path.
	Script string `json:"script,omitempty"`
	// Stdout is GAP_STD_OUT_FILE; left out of the request when empty.
	Stdout string `json:"stdout,omitempty"`
	// Stderr is GAP_STD_ERR_FILE; left out of the request when empty.
	Stderr string `json:"stderr,omitempty"`
	// GPUs is GAP_NGPU, a non-negative integer; nil sends "".
	GPUs *int `json:"gpus,omitempty"`
	// DCUs is GAP_NDCU, a non-negative integer; nil sends "".
	DCUs *int `json:"dcus,omitempty"`
	// Mem is GAP_JOB_MEM; may be empty.
	Mem string `json:"mem,omitempty"`
	// NodeType is GAP_NODE_TYPE; may be empty.
	NodeType string `json:"node_type,omitempty"`
	// MultiSub is GAP_MULTI_SUB; may be empty.
	MultiSub string `json:"multi_sub,omitempty"`
	// GUI is GAP_GUI, sent as an integer; a non-negative integer, 0 when
	// absent.
	GUI int `json:"gui,omitempty"`
	// Advance is the boolean "advance" key, false when absent.
	Advance bool `json:"advance,omitempty"`
	// Extra adds or overrides mapAppJobInfo keys verbatim. Keys match
	// ^GAP_[A-Z0-9_]+$ and are not GAP_CLUSTER_ID (the worker sets that from
	// the cluster it submits to); values are strings.
	Extra map[string]string `json:"extra,omitempty"`
}

// ComputeInput is one file uploaded before submitting.
type ComputeInput struct {
	// From is s3://bucket/key or an https:// URL; empty when Ref is set.
	From string `json:"from"`
	// Ref names an earlier step's artifact instead of From, only in a
	// pipeline's step; the pipeline replaces it with the artifact's
	// s3:// URL when it publishes the step (docs/pipelines.md).
	Ref *ArtifactRef `json:"-"`
	// To is the absolute target directory on the cluster, without "..".
	To string `json:"to"`
	// Cover overwrites an existing file when true; false when absent.
	Cover bool `json:"cover,omitempty"`
}

// ComputeTarget is what Request needs besides the spec: the values the
// worker learns from the job itself and from the platform.
type ComputeTarget struct {
	// JobID is the sluice job id, the job name when the spec has none.
	JobID string
	// SchedulerID is the cluster entry's id, sent as strJobManagerID.
	SchedulerID string
	// ClusterID is the token entry's clusterId, sent as GAP_CLUSTER_ID.
	ClusterID string
}

// Request returns the submit job body for the target. Friendly names map
// onto their GAP_* keys as strings (GAP_GUI an integer, advance a boolean);
// the keys compute-api.md 2.5 lists as "may be empty" (GAP_NODE_TYPE,
// GAP_MULTI_SUB, GAP_JOB_MEM, GAP_NGPU, GAP_NDCU) are sent as "" when not
// given, GAP_SUBMIT_TYPE, GAP_WORK_DIR, GAP_STD_OUT_FILE and
// GAP_STD_ERR_FILE are left out when not given; Extra is applied last.
func (c *Compute) Request(t ComputeTarget) apiclient.JobRequest {
	j := &c.Job
	info := map[string]any{
		apiclient.KeyJobName:   cmp.Or(j.Name, t.JobID),
		apiclient.KeyNodeType:  j.NodeType,
		apiclient.KeyMultiSub:  j.MultiSub,
		apiclient.KeyJobMem:    j.Mem,
		apiclient.KeyNGPU:      optInt(j.GPUs),
		apiclient.KeyNDCU:      optInt(j.DCUs),
		apiclient.KeyClusterID: t.ClusterID,
		apiclient.KeyGUI:       j.GUI,
		apiclient.KeyAdvance:   j.Advance,
	}
	for key, v := range map[string]string{
		apiclient.KeySubmitType: j.SubmitType,
		apiclient.KeyQueue:      j.Queue,
		apiclient.KeyWallTime:   j.WallTime,
		apiclient.KeyWorkDir:    j.WorkDir,
		apiclient.KeySchedFile:  j.Script,
		apiclient.KeyStdOutFile: j.Stdout,
		apiclient.KeyStdErrFile: j.Stderr,
	} {
		if v != "" {
			info[key] = v
		}
	}
	if j.Nodes != 0 {
		info[apiclient.KeyNNode] = strconv.Itoa(j.Nodes)
	}
	if j.PPN != 0 {
		info[apiclient.KeyPPN] = strconv.Itoa(j.PPN)
	}
	for k, v := range j.Extra {
		info[k] = v
	}
	return apiclient.JobRequest{StrJobManagerID: t.SchedulerID, MapAppJobInfo: info}
}

func optInt(n *int) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(*n)
}

const (
	positiveRule    = "must be a positive integer"
	nonNegativeRule = "must be a non-negative integer"
)

func (c *Compute) decode(d *decoder, path string, raw json.RawMessage) bool {
	return d.object(path, raw, map[string]fieldFunc{
		"cluster": func(p string, r json.RawMessage) { d.optStr(p, r, &c.Cluster) },
		"template": func(p string, r json.RawMessage) {
			d.object(p, r, map[string]fieldFunc{
				"type": func(p string, r json.RawMessage) { d.str(p, r, &c.Template.Type) },
				"name": func(p string, r json.RawMessage) { d.str(p, r, &c.Template.Name) },
			})
		},
		"job":     func(p string, r json.RawMessage) { c.Job.decode(d, p, r) },
		"inputs":  func(p string, r json.RawMessage) { c.Inputs = decodeInputs(d, p, r) },
		"outputs": func(p string, r json.RawMessage) { c.Outputs = decodeOutputs(d, p, r) },
	})
}

// decodeInputs reads the inputs list of a compute or container spec.
func decodeInputs(d *decoder, path string, raw json.RawMessage) []ComputeInput {
	elems, _ := d.array(path, raw)
	var ins []ComputeInput
	for i, e := range elems {
		var in ComputeInput
		d.object(index(path, i), e, map[string]fieldFunc{
			"from":  func(p string, r json.RawMessage) { in.decodeFrom(d, p, r) },
			"to":    func(p string, r json.RawMessage) { d.str(p, r, &in.To) },
			"cover": func(p string, r json.RawMessage) { d.boolean(p, r, &in.Cover) },
		})
		ins = append(ins, in)
	}
	return ins
}

// decodeFrom reads an input's from: a URL, or in a pipeline's step an
// object naming an earlier step's artifact.
func (in *ComputeInput) decodeFrom(d *decoder, path string, raw json.RawMessage) {
	if typeOf(raw) != jsonObject {
		d.str(path, raw, &in.From)
		return
	}
	ref := &ArtifactRef{}
	if d.object(path, raw, map[string]fieldFunc{
		"step":     func(p string, r json.RawMessage) { d.str(p, r, &ref.Step) },
		"artifact": func(p string, r json.RawMessage) { d.str(p, r, &ref.Artifact) },
	}) {
		in.Ref = ref
	}
}

// MarshalJSON writes from as the reference object when Ref is set, so a
// marshalled step decodes to the same input.
func (in ComputeInput) MarshalJSON() ([]byte, error) {
	type plain ComputeInput
	if in.Ref == nil {
		return json.Marshal(plain(in))
	}
	return json.Marshal(struct {
		From *ArtifactRef `json:"from"`
		To   string       `json:"to"`
		// Cover as in ComputeInput.
		Cover bool `json:"cover,omitempty"`
	}{in.Ref, in.To, in.Cover})
}

// UnmarshalJSON reads what MarshalJSON writes, so that encoding/json
// copies a step's spec with its references (Decode is what validates).
func (in *ComputeInput) UnmarshalJSON(data []byte) error {
	var raw struct {
		From  json.RawMessage `json:"from"`
		To    string          `json:"to"`
		Cover bool            `json:"cover"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*in = ComputeInput{To: raw.To, Cover: raw.Cover}
	if typeOf(raw.From) == jsonObject {
		in.Ref = &ArtifactRef{}
		return json.Unmarshal(raw.From, in.Ref)
	}
	if len(raw.From) == 0 {
		return nil
	}
	return json.Unmarshal(raw.From, &in.From)
}

// validateInputs checks the inputs of a compute or container spec; a
// reference's own rules are the pipeline's (validateRefs).
func validateInputs(ps *problems, path string, inputs []ComputeInput) {
	for i, in := range inputs {
		item := index(path, i)
		if in.Ref == nil {
			if rule := sourceURLRule(in.From); rule != "" {
				ps.add(field(item, "from"), rule)
			}
		}
		if rule := absPathRule(in.To, true); rule != "" {
			ps.add(field(item, "to"), rule)
		}
	}
}

// decodeOutputs reads the outputs list of a compute or container spec.
func decodeOutputs(d *decoder, path string, raw json.RawMessage) []string {
	elems, _ := d.array(path, raw)
	var outs []string
	for i, e := range elems {
		var out string
		d.str(index(path, i), e, &out)
		outs = append(outs, out)
	}
	return outs
}

func (j *ComputeJob) decode(d *decoder, path string, raw json.RawMessage) {
	str := func(dst *string) fieldFunc {
		return func(p string, r json.RawMessage) { d.optStr(p, r, dst) }
	}
	mayBeEmpty := func(dst *string) fieldFunc {
		return func(p string, r json.RawMessage) { d.str(p, r, dst) }
	}
	num := func(dst *int, lo int64, rule string) fieldFunc {
		return func(p string, r json.RawMessage) { d.integer(p, r, dst, lo, math.MaxInt32, rule) }
	}
	d.object(path, raw, map[string]fieldFunc{
		"name":        str(&j.Name),
		"submit_type": str(&j.SubmitType),
		"queue":       str(&j.Queue),
		"nodes":       num(&j.Nodes, 1, positiveRule),
		"ppn":         num(&j.PPN, 1, positiveRule),
		"wall_time":   str(&j.WallTime),
		"work_dir":    str(&j.WorkDir),
		"script":      str(&j.Script),
		"stdout":      str(&j.Stdout),
		"stderr":      str(&j.Stderr),
		"gpus": func(p string, r json.RawMessage) {
			d.intPtr(p, r, &j.GPUs, 0, math.MaxInt32, nonNegativeRule)
		},
		"dcus": func(p string, r json.RawMessage) {
			d.intPtr(p, r, &j.DCUs, 0, math.MaxInt32, nonNegativeRule)
		},
		"mem":       mayBeEmpty(&j.Mem),
		"node_type": mayBeEmpty(&j.NodeType),
		"multi_sub": mayBeEmpty(&j.MultiSub),
		"gui":       num(&j.GUI, 0, nonNegativeRule),
		"advance":   func(p string, r json.RawMessage) { d.boolean(p, r, &j.Advance) },
		"extra":     func(p string, r json.RawMessage) { j.Extra, _ = d.stringMap(p, r) },
	})
}

func (c *Compute) validate(ps *problems, path string) {
	tpl := field(path, "template")
	for _, part := range []struct{ name, value string }{{"type", c.Template.Type}, {"name", c.Template.Name}} {
		p := field(tpl, part.name)
		switch v := part.value; {
		case v == "":
			ps.add(p, "required (must not be empty)")
		case len(v) > MaxTemplateBytes:
			ps.add(p, fmt.Sprintf("must be at most %d bytes", MaxTemplateBytes))
		case !templatePattern.MatchString(v) || strings.Contains(v, ".."):
			ps.add(p, `must be one URL path segment: match `+templatePattern.String()+` without ".."`)
		}
	}

	c.Job.validate(ps, field(path, "job"))

	validateInputs(ps, field(path, "inputs"), c.Inputs)
	outputs := field(path, "outputs")
	for i, out := range c.Outputs {
		if rule := absPathRule(out, false); rule != "" {
			ps.add(index(outputs, i), rule)
		}
	}
}

func (j *ComputeJob) validate(ps *problems, path string) {
	// Required unless extra carries the key.
	required := []struct {
		name, key string
		given     bool
	}{
		{"queue", apiclient.KeyQueue, j.Queue != ""},
		{"nodes", apiclient.KeyNNode, j.Nodes != 0},
		{"ppn", apiclient.KeyPPN, j.PPN != 0},
		{"wall_time", apiclient.KeyWallTime, j.WallTime != ""},
		{"script", apiclient.KeySchedFile, j.Script != ""},
	}
	for _, r := range required {
		if _, inExtra := j.Extra[r.key]; !r.given && !inExtra {
			ps.add(field(path, r.name), "required (or job.extra."+r.key+")")
		}
	}
	if j.Nodes < 0 {
		ps.add(field(path, "nodes"), positiveRule)
	}
	if j.PPN < 0 {
		ps.add(field(path, "ppn"), positiveRule)
	}
	if j.WallTime != "" && (!wallTimePattern.MatchString(j.WallTime) || strings.Trim(j.WallTime, "0:") == "") {
		ps.add(field(path, "wall_time"), "must be HH:MM:SS (hours may exceed 24, minutes and seconds below 60), longer than zero")
	}
	for _, n := range []struct {
		name string
		v    *int
	}{{"gpus", j.GPUs}, {"dcus", j.DCUs}, {"gui", &j.GUI}} {
		if n.v != nil && *n.v < 0 {
			ps.add(field(path, n.name), nonNegativeRule)
		}
	}
	extra := field(path, "extra")
	for _, k := range slices.Sorted(maps.Keys(j.Extra)) {
		switch {
		case !extraKeyPattern.MatchString(k):
			ps.add(field(extra, k), "key must match "+extraKeyPattern.String())
		case k == apiclient.KeyClusterID:
			ps.add(field(extra, k), "is set by the worker from compute.cluster and cannot be overridden")
		}
	}
}
