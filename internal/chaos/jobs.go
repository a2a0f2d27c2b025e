package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/internal/runner"
)

// Variety is the shape of one planned job.
type Variety string

// The varieties a run mixes.
const (
	VideoText    Variety = "video-text"
	VideoFrame   Variety = "video-frame" // first frame from S3, presigned
	SpeechAsync  Variety = "speech-async"
	SpeechSync   Variety = "speech-sync"
	SpeechStream Variety = "speech-stream"
	Compute      Variety = "compute"
	Container    Variety = "container" // a script in a container instance
	Invalid      Variety = "invalid"   // a spec that must fail validation
)

// varietyMix is the share of each variety, in percent.
var varietyMix = []struct {
	v   Variety
	pct int
}{
	{VideoText, 25}, {VideoFrame, 10}, {SpeechAsync, 15}, {SpeechSync, 10},
	{SpeechStream, 10}, {Compute, 17}, {Container, 10}, {Invalid, 3},
}

// computeVariants are the compute scripts of a run: jobs pick one, so the
// harness uploads a handful of inputs instead of one per job.
var computeVariants = []struct {
	name            string
	queued, running time.Duration
}{
	{"quick", 200 * time.Millisecond, 1 * time.Second},
	{"short", 500 * time.Millisecond, 2 * time.Second},
	{"medium", 300 * time.Millisecond, 3500 * time.Millisecond},
	{"long", 1 * time.Second, 5 * time.Second},
}

// Names of the run's fixed S3 inputs (outside the worker's prefix).
const (
	inputPrefix   = "chaos-inputs/"
	frameKey      = inputPrefix + "frame.png"
	computeOutput = "result.dat"
	computeSize   = 32 << 10
	computeUser   = "chaos"
)

// computeScript is the scheduler script of a compute variant.
func computeScript(i int) string {
	v := computeVariants[i]
	return fmt.Sprintf("#!/bin/sh\n#SIM queuedfor %s\n#SIM runfor %s\necho chaos %s\n#SIM output %s %dK\n",
		v.queued, v.running, v.name, computeOutput, computeSize>>10)
}

// containerScript is the script of a container job of a compute variant:
// it runs as long and writes the same output into its work directory.
func containerScript(i int) string {
	v := computeVariants[i]
	return fmt.Sprintf("#SIM runfor %s\necho chaos container %s\n#SIM output %s %dK\nexit 0\n",
		v.running, v.name, computeOutput, computeSize>>10)
}

func computeScriptKey(i int) string {
	return inputPrefix + "scripts/" + computeVariants[i].name + ".sh"
}

// plannedJob is one job of the run and what the harness expects of it.
type plannedJob struct {
	ID      string
	Kind    string
	Variety Variety
	Spec    []byte
	// SubmitKey is what the simulator counts submissions by: the prompt,
	// the speech text, the compute job name or the container instance
	// name.
	SubmitKey string
	// Results is the number of media results (video), ResultSize the
	// bytes of each (video, speech async and sync).
	Results    int
	ResultSize int64
	// WorkDir is the compute or container job's directory on the cluster.
	WorkDir string
}

// plan builds n jobs from seed, deterministically.
func plan(n int, seed uint64, bucket string) []plannedJob {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	jobs := make([]plannedJob, n)
	for i := range jobs {
		jobs[i] = planOne(rng, i, bucket)
	}
	return jobs
}

func pickVariety(rng *rand.Rand) Variety {
	r := rng.IntN(100)
	for _, m := range varietyMix {
		if r < m.pct {
			return m.v
		}
		r -= m.pct
	}
	return VideoText
}

func planOne(rng *rand.Rand, i int, bucket string) plannedJob {
	v := pickVariety(rng)
	j := plannedJob{ID: fmt.Sprintf("chaos-%05d", i), Variety: v}
	dur := time.Duration(500+rng.IntN(5500)) * time.Millisecond
	size := int64(16<<10 + rng.IntN(112<<10))
	spec := map[string]any{"id": j.ID, "labels": map[string]string{"suite": "chaos", "variety": string(v)}}
	switch v {
	case VideoText, VideoFrame, Invalid:
		j.Kind = "video"
		j.Results = 1 + rng.IntN(2)
		j.ResultSize = size
		j.SubmitKey = fmt.Sprintf("chaos %s [sim:duration=%s][sim:size=%d][sim:count=%d]", j.ID, dur, size, j.Results)
		input := map[string]any{"prompt": j.SubmitKey}
		params := map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"}
		switch v {
		case VideoFrame:
			input["media"] = []map[string]string{{"type": "first_frame", "url": "s3://" + bucket + "/" + frameKey}}
			delete(params, "ratio")
		case Invalid:
			params["duration"] = 99 // outside [4, 15]
		}
		spec["video"] = map[string]any{"model": "video-model", "input": input, "parameters": params}
	case SpeechAsync, SpeechSync, SpeechStream:
		j.Kind = "speech"
		mode := map[Variety]string{SpeechAsync: "async", SpeechSync: "sync", SpeechStream: "stream"}[v]
		switch v {
		case SpeechAsync:
			j.ResultSize = size
			j.SubmitKey = fmt.Sprintf("chaos %s [sim:duration=%s][sim:size=%d]", j.ID, dur, size)
		case SpeechSync:
			j.ResultSize = size
			j.SubmitKey = fmt.Sprintf("chaos %s [sim:size=%d]", j.ID, size)
		default:
			j.SubmitKey = fmt.Sprintf("chaos %s [sim:frames=%d]", j.ID, 2+rng.IntN(8))
		}
		spec["speech"] = map[string]any{"model": "speech-model", "mode": mode, "input": map[string]any{"text": j.SubmitKey, "voice": "alloy"}}
	case Compute:
		j.Kind = "compute"
		variant := rng.IntN(len(computeVariants))
		name := computeVariants[variant].name
		j.WorkDir = "/public/home/" + computeUser + "/" + j.ID
		j.SubmitKey = j.ID
		spec["compute"] = map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job": map[string]any{
				"name": j.ID, "queue": "normal", "nodes": 1, "ppn": 4, "wall_time": "00:10:00",
				"work_dir": j.WorkDir, "script": j.WorkDir + "/" + name + ".sh",
			},
			"inputs":  []map[string]any{{"from": "s3://" + bucket + "/" + computeScriptKey(variant), "to": j.WorkDir, "cover": true}},
			"outputs": []string{j.WorkDir + "/" + computeOutput},
		}
	case Container:
		j.Kind = "container"
		variant := rng.IntN(len(computeVariants))
		j.WorkDir = "/public/home/" + computeUser + "/" + j.ID
		j.SubmitKey = runner.InstanceName(j.ID)
		spec["container"] = map[string]any{
			"instance": map[string]any{
				"image": "registry:5000/gpu/admin/base/torch:2.1", "version": "torch:2.1", "accelerator": "gpu",
				"resource_group": "TeslaM40", "cpus": 4, "gpus": 1, "ram_mb": 8192, "timeout": "00:10:00",
			},
			"script":   containerScript(variant),
			"work_dir": j.WorkDir,
			"inputs":   []map[string]any{{"from": "s3://" + bucket + "/" + computeScriptKey(variant), "to": j.WorkDir, "cover": true}},
			"outputs":  []string{j.WorkDir + "/" + computeOutput},
		}
	}
	spec["kind"] = j.Kind
	j.Spec, _ = json.Marshal(spec) // maps of strings and numbers always encode
	return j
}
