package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/watchdog"
)

// keyPrefix is the workers' SLUICE_S3_PREFIX (the default).
const keyPrefix = "sluice/"

// verify checks every promise against what the run left behind.
func (r *run) verify(ctx context.Context, logDir string) (*Report, error) {
	rep := &Report{Jobs: len(r.jobs), FailedBy: map[string]int{}, Seed: r.cfg.Seed, ClockOffsets: r.cfg.ClockOffsets}
	rep.Kills, rep.Restarts = r.fleet.counts()
	r.mu.Lock()
	rep.Elapsed = r.elapsed
	for _, err := range r.faultErrs {
		rep.problem("harness: %v", err)
	}
	rep.Faults = maps.Clone(r.faults)
	rep.Recoveries = slices.Clone(r.recoveries)
	r.mu.Unlock()
	planned := map[string]int{}
	for _, f := range r.plan() {
		planned[f.kind]++
	}
	for kind, want := range planned {
		if n := rep.Faults[kind]; n != want {
			rep.problem("harness: fault %s injected %d times, want %d", kind, n, want)
		}
	}
	for _, rec := range rep.Recoveries {
		if !rec.Recovered {
			rep.problem("no recovery after %s", rec)
		}
	}

	logs, err := readLogs(logDir)
	if err != nil {
		return nil, err
	}
	r.resubmits = countLogged(logs, runner.LogSubmittingAgain)
	rep.Orphaned = len(countLogged(logs, consumer.LogOrphan))
	rep.HeldPastBound = len(countLogged(logs, watchdog.LogStuck))
	var stateRaw bytes.Buffer
	for _, j := range r.jobs {
		rec := r.checkJob(ctx, rep, j)
		if rec != nil {
			b, _ := json.Marshal(rec)
			stateRaw.Write(b)
		}
	}
	if limit := r.cfg.FleetMediaTasks; limit > 0 {
		rep.MediaTaskLimit, rep.PeakMediaTasks = limit, r.in.media.Counters().PeakRunning()
		if rep.PeakMediaTasks > limit+rep.Duplicates {
			rep.problem("the simulator saw %d media tasks upstream at once: over the fleet's quota of %d by more than the %d counted second submissions",
				rep.PeakMediaTasks, limit, rep.Duplicates)
		}
	}
	r.checkInstances(rep)
	for _, subj := range r.events.bad {
		rep.problem("event on %s is not a CloudEvent whose id is its Nats-Msg-Id", subj)
	}
	published := make(map[string]bool, len(r.jobs))
	for _, j := range r.jobs {
		published[j.ID] = true
	}
	for id := range r.events.terminal {
		if !published[id] {
			rep.problem("terminal event for a job never published: %q", id)
		}
	}
	r.checkSecrets(ctx, rep, logs, stateRaw.Bytes())
	r.checkGrowth(rep)
	return rep, nil
}

// checkGrowth judges a soak's resource series (Config.SampleEvery).
func (r *run) checkGrowth(rep *Report) {
	if r.cfg.SampleEvery <= 0 {
		return
	}
	rep.Series = r.sampling.all()
	rep.Growth = JudgeGrowth(rep.Series, r.cfg.Growth)
	rep.GrowthBound = r.cfg.Growth.withDefaults()
	for _, g := range rep.Growth {
		if g.Exceeded() {
			rep.problem("resource growth: %s", g)
		}
	}
}

// checkJob checks one job's events, outcome, artifacts and submissions,
// and returns its state record (nil when there is none).
func (r *run) checkJob(ctx context.Context, rep *Report, j plannedJob) *state.Record {
	rec, err := r.record(ctx, j.ID)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		rep.problem("%s: read state: %v", j.ID, err)
	}
	evs := r.events.terminal[j.ID]
	switch {
	case len(evs) == 0 && rec == nil:
		rep.Lost++
		rep.problem("%s: lost (no terminal event, no state record)", j.ID)
		return nil
	case len(evs) == 0:
		rep.Stuck++
		rep.StuckIDs = append(rep.StuckIDs, j.ID)
		rep.problem("%s: stuck at %q after %d attempts (submits %d)", j.ID, rec.Status, rec.Attempts, rec.Submits)
		return rec
	case len(evs) > 1:
		rep.MultiTerminal++
		statuses := make([]string, len(evs))
		for i, ev := range evs {
			statuses[i] = ev.Data.Status
		}
		rep.problem("%s: %d terminal events (%s)", j.ID, len(evs), strings.Join(statuses, ", "))
	}
	ev := evs[0]
	switch ev.Data.Status {
	case string(state.StatusSucceeded):
		rep.Succeeded++
		if j.Variety == Invalid {
			rep.problem("%s: an invalid spec succeeded", j.ID)
		}
		r.checkArtifacts(ctx, rep, j, ev)
	case string(state.StatusFailed):
		rep.Failed++
		code := "?"
		if ev.Data.Error != nil {
			code = ev.Data.Error.Code
		}
		rep.FailedBy[code]++
		if !expectedFailure(j, ev.Data.Error) {
			rep.problem("%s (%s): failed unexpectedly: %+v", j.ID, j.Variety, ev.Data.Error)
		}
	default:
		rep.Cancelled++
		rep.problem("%s: ended %s, nothing was cancelled", j.ID, ev.Data.Status)
	}
	if rec != nil && string(rec.Status) != ev.Data.Status {
		rep.problem("%s: event says %s, state record says %s", j.ID, ev.Data.Status, rec.Status)
	}
	r.checkSubmits(rep, j, rec, ev)
	return rec
}

// checkInstances reads the simulator's container instance counters: an
// instance left alive is still billed, and a job with two instances alive
// at once ran (and paid for) its script twice.
func (r *run) checkInstances(rep *Report) {
	created, deleted, alive := r.in.compute.ContainerCounts()
	rep.InstancesCreated, rep.InstancesDeleted, rep.InstancesAlive = int(created), int(deleted), int(alive)
	if alive > 0 {
		rep.problem("%d container instance(s) left alive (still billed): %v", alive, r.in.compute.ContainerAlive())
	}
	twice := r.in.compute.ContainersTwiceAlive()
	slices.Sort(twice)
	rep.TwiceAlive = len(twice)
	for _, name := range twice {
		rep.problem("%s: two container instances alive at once", name)
	}
}

// expectedFailure reports whether a job may fail with e under the run's
// faults: an invalid spec fails validation; an injected 500 answer to a
// paid submit is ambiguous, and sluice fails the job rather than pay
// twice; a speech stream whose worker was killed while reading it cannot
// be resumed without paying again. An S3 outage fails nothing: an s3://
// input is waited for (docs/media-inputs.md).
func expectedFailure(j plannedJob, e *state.Error) bool {
	if e == nil {
		return false
	}
	switch {
	case j.Variety == Invalid:
		return e.Code == runner.CodeInvalidSpec && e.Stage == state.StageValidate
	case e.Code == runner.CodeSubmitAmbiguous:
		return e.Stage == state.StageSubmit
	case j.Variety == SpeechStream:
		return e.Code == runner.CodeUpstreamFailed && e.Stage == state.StageCollect
	}
	return false
}

// checkSubmits compares the simulator's submission count with the job's
// record and the workers' logs: more than one submission is a counted
// duplicate when the record counted as many submits and a worker logged
// each second one as a submit-window resubmission, a problem otherwise.
func (r *run) checkSubmits(rep *Report, j plannedJob, rec *state.Record, ev events.Event) {
	var n int64
	switch j.Kind {
	case "compute":
		n = r.in.compute.SubmitCount(j.SubmitKey)
	case "container":
		n = r.in.compute.ContainerCreates(j.SubmitKey)
	default:
		n = r.in.media.SubmitCount(j.SubmitKey)
	}
	switch {
	case j.Variety == Invalid && n != 0:
		rep.problem("%s: invalid spec reached upstream %d times", j.ID, n)
	case ev.Data.Status == string(state.StatusSucceeded) && n == 0:
		rep.problem("%s: succeeded without a submission upstream", j.ID)
	case n <= 1:
	case rec != nil && int64(rec.Submits) >= n && int64(r.resubmits[j.ID]) >= n-1:
		rep.Duplicates += int(n - 1)
	default:
		rep.Unexplained += int(n - 1)
		submits := 0
		if rec != nil {
			submits = rec.Submits
		}
		rep.problem("%s: submitted upstream %d times; the state record counts %d submits, the logs %d submit-window resubmissions",
			j.ID, n, submits, r.resubmits[j.ID])
	}
}

// checkArtifacts reads every artifact of a succeeded job back from the
// store and compares it with the event and with what the simulator made.
func (r *run) checkArtifacts(ctx context.Context, rep *Report, j plannedJob, ev events.Event) {
	want := 1 // speech
	switch j.Kind {
	case "video":
		want = j.Results
	case "compute", "container":
		want = 3 // stdout, stderr, result.dat
	}
	if len(ev.Data.Artifacts) != want {
		rep.BadArtifacts++
		rep.problem("%s: %d artifacts, want %d", j.ID, len(ev.Data.Artifacts), want)
	}
	taskID := ""
	if ev.Data.Upstream != nil {
		taskID = ev.Data.Upstream.TaskID
	}
	for _, a := range ev.Data.Artifacts {
		dir := keyPrefix + j.Kind + "/" + j.ID + "/"
		name, ok := strings.CutPrefix(a.Key, dir)
		if !ok || a.Bucket != bucket {
			rep.BadArtifacts++
			rep.problem("%s: artifact %s/%s is outside %s", j.ID, a.Bucket, a.Key, dir)
			continue
		}
		sum, size, meta, err := r.readObject(ctx, a.Key)
		if err != nil || sum != a.SHA256 || size != a.Size || meta != a.SHA256 {
			rep.BadArtifacts++
			rep.problem("%s: object %s: sha %s size %d metadata %q (%v); event says sha %s size %d",
				j.ID, a.Key, sum, size, meta, err, a.SHA256, a.Size)
			continue
		}
		if exp, ok := expectedSHA(j, taskID, name); ok && exp != sum {
			rep.BadArtifacts++
			rep.problem("%s: %s holds other bytes than the simulator made (task %s)", j.ID, a.Key, taskID)
		}
	}
}

// expectedSHA is the sha256 of what the simulator made for artifact name
// of j; ok is false where it is not known in advance (a stream's audio,
// stdout and stderr).
func expectedSHA(j plannedJob, taskID, name string) (string, bool) {
	switch {
	case (j.Kind == "compute" || j.Kind == "container") && name == computeOutput:
		return hashOf(apisim.ComputeOutputBytes(j.WorkDir+"/"+computeOutput, computeSize)), true
	case j.Kind == "compute", j.Kind == "container", j.Variety == SpeechStream:
		return "", false
	}
	base := strings.TrimSuffix(name, path.Ext(name))
	n, err := strconv.Atoi(strings.TrimPrefix(base, "result-"))
	if err != nil || !strings.HasPrefix(base, "result-") {
		return "unknown artifact name " + name, true
	}
	return hashOf(apisim.ResultBytes(taskID, n, j.ResultSize)), true
}

func hashOf(r io.Reader) string {
	h := sha256.New()
	_, _ = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil))
}

// readObject returns the sha256 and size of an object's bytes and its
// sha256 metadata.
func (r *run) readObject(ctx context.Context, key string) (sum string, size int64, meta string, err error) {
	out, err := r.in.s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", 0, "", err
	}
	defer out.Body.Close()
	h := sha256.New()
	size, err = io.Copy(h, out.Body)
	return hex.EncodeToString(h.Sum(nil)), size, out.Metadata["sha256"], err
}

// checkSecrets looks for every credential of the run, the compute tokens
// the workers were given and presigned URL signatures in the worker logs,
// the events, the dead letters and the state records.
func (r *run) checkSecrets(ctx context.Context, rep *Report, logs map[string][]byte, stateRaw []byte) {
	secrets := []string{mediaAPIKey, computePassword, s3Secret, "X-Amz-Signature", "X-Amz-Credential"}
	secrets = append(secrets, r.in.secrets()...)
	secrets = append(secrets, r.in.compute.Tokens()...)
	hay := map[string][]byte{"state records": stateRaw, "events": bytes.Join(r.events.raw, []byte("\n"))}
	maps.Copy(hay, logs)
	hay["dead letters"] = r.deadLetterHeaders(ctx)
	for where, b := range hay {
		for _, s := range secrets {
			if i := bytes.Index(b, []byte(s)); i >= 0 {
				rep.Leaks++
				rep.problem("secret %.12s... leaked in %s: ...%s...", s, where, b[max(0, i-120):min(len(b), i+40)])
			}
		}
	}
}

// readLogs reads every worker log of the run.
func readLogs(dir string) (map[string][]byte, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	logs := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		logs[filepath.Base(p)] = b
	}
	return logs, nil
}

// countLogged counts, per job, the lines whose message is msg that the
// workers logged: the submit-window resubmissions (runner.LogSubmittingAgain),
// the orphans handed over (consumer.LogOrphan).
func countLogged(logs map[string][]byte, msg string) map[string]int {
	n := map[string]int{}
	for _, b := range logs {
		for line := range bytes.Lines(b) {
			var l struct {
				JobID   string `json:"job_id"`
				Message string `json:"message"`
			}
			if json.Unmarshal(line, &l) == nil && l.Message == msg {
				n[l.JobID]++
			}
		}
	}
	return n
}

// deadLetterHeaders returns the headers of every dead letter as text.
func (r *run) deadLetterHeaders(ctx context.Context) []byte {
	var out bytes.Buffer
	s, err := r.js.Stream(ctx, contract.DLQStream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			break
		}
		fmt.Fprintf(&out, "%v\n", m.Header)
	}
	return out.Bytes()
}

// record reads the state record of jobID from the leader of the bucket's
// stream. The bucket's own reads (direct gets) may be answered by a
// replica that is still catching up, which is fine for a worker (every
// decision it takes is a compare-and-set) but not for a verdict.
func (r *run) record(ctx context.Context, jobID string) (*state.Record, error) {
	var err error
	for range 5 {
		var value []byte
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		value, _, err = natsconn.KVGetFromLeader(rctx, r.js.Conn(), contract.StateBucket, jobID)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil, state.ErrNotFound
		case err != nil:
			_ = backoff.Sleep(ctx, 500*time.Millisecond)
			continue
		}
		var rec state.Record
		if err := json.Unmarshal(value, &rec); err != nil {
			return nil, fmt.Errorf("decode state of %s: %w", jobID, err)
		}
		return &rec, nil
	}
	return nil, fmt.Errorf("state of %s: %w", jobID, err)
}
