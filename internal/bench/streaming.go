package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// streamPartSize and streamConcurrency are the worker Store's defaults
// (SLUICE_S3_PART_SIZE, StoreConfig.Concurrency), given to the direct
// upload too.
const (
	streamPartSize    = 8 << 20
	streamConcurrency = 2
)

// transfer is one timed copy of the artifact.
type transfer struct {
	elapsed time.Duration
	// finalize is the direct upload's server-side copy, timed apart.
	finalize time.Duration
	peakRSS  uint64
}

// streaming measures P4: one large artifact copied from the simulator to
// S3 by a worker process, against a direct transfer-manager upload of the
// same bytes in a process of its own; the store runs in a third process, a
// fresh one per transfer.
func (r *run) streaming(ctx context.Context) (*Figure, error) {
	size := pick[int64](r, 1<<30, 256<<20)
	pairs := pick(r, 2, 1)
	fig := &Figure{ID: "P4", Title: fmt.Sprintf("streaming a %d MiB artifact", size>>20), Target: "peak RSS ≤ 100 MiB, throughput ≥ 0.8× a direct upload"}
	fig.Settings = []string{"SLUICE_POLL_FIRST=10ms (default 1s): the job's time is the copy's, not the first poll's"}
	kind, _, err := r.p4Store()
	if err != nil {
		return fig, err
	}
	st, err := newStack(ctx, r.scenarioDir("p4"), stackOptions{ExternalS3: true})
	if err != nil {
		return fig, err
	}
	defer st.close()
	var sl, direct []transfer
	for i := range pairs {
		s, url, err := r.streamSluice(ctx, st, fmt.Sprintf("p4-sluice-%d", i), size)
		if err != nil {
			return fig, err
		}
		r.logf("P4 sluice %d: %s, %.0f MiB/s, peak RSS %s", i, s.elapsed.Round(time.Millisecond), mibps(size, s.elapsed), mib(s.peakRSS))
		d, err := r.streamDirect(ctx, st, fmt.Sprintf("p4-direct-%d", i), url, size)
		if err != nil {
			return fig, err
		}
		r.logf("P4 direct %d: %s, %.0f MiB/s, peak RSS %s", i, d.elapsed.Round(time.Millisecond), mibps(size, d.elapsed), mib(d.peakRSS))
		sl, direct = append(sl, s), append(direct, d)
	}
	var sd, dd, fd time.Duration
	var sPeak, dPeak uint64
	for i := range sl {
		sd, dd, fd = sd+sl[i].elapsed, dd+direct[i].elapsed, fd+direct[i].finalize
		sPeak, dPeak = max(sPeak, sl[i].peakRSS), max(dPeak, direct[i].peakRSS)
		fig.row(fmt.Sprintf("pair %d: sluice worker", i+1), "%.0f MiB/s (%s), peak RSS %s", mibps(size, sl[i].elapsed), sl[i].elapsed.Round(time.Millisecond), mib(sl[i].peakRSS))
		fig.row(fmt.Sprintf("pair %d: direct upload", i+1), "%.0f MiB/s (%s), peak RSS %s; then a server-side copy: %s", mibps(size, direct[i].elapsed), direct[i].elapsed.Round(time.Millisecond), mib(direct[i].peakRSS), direct[i].finalize.Round(time.Millisecond))
	}
	ratio, withCopy := dd.Seconds()/sd.Seconds(), (dd+fd).Seconds()/sd.Seconds()
	fig.Measured = fmt.Sprintf("peak RSS %s, %.2f× the direct upload's throughput (%.2f× with its server-side copy)", mib(sPeak), ratio, withCopy)
	fig.Met = sPeak <= 100<<20 && ratio >= 0.8
	fig.row("sluice worker, all passes", "%.0f MiB/s, peak RSS %s", mibps(size*int64(len(sl)), sd), mib(sPeak))
	fig.row("direct upload, all passes", "%.0f MiB/s, peak RSS %s", mibps(size*int64(len(sl)), dd), mib(dPeak))
	fig.row("sluice against direct upload + server-side copy", "**%.2f×** (%.0f MiB/s)", withCopy, mibps(size*int64(len(sl)), dd+fd))
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"The simulator (in the harness) serves a %d MiB result generated on the fly; the S3 store is %s, in a "+
			"process of its own with a fresh data directory per transfer, so neither side is charged for its memory. "+
			"The worker's time runs from the job's publish to its terminal event (the task itself takes 0 s) and covers "+
			"its whole copy: download, sha256, a multipart upload to a staging key, the server-side copy onto the final "+
			"key that gives the object its sha256 metadata, and the staging delete. The direct upload is a process of the "+
			"bench binary that streams the same URL into the transfer manager's UploadObject with the same part size "+
			"(%d MiB) and concurrency (%d), and nothing else; afterwards, timed apart, it copies the object server-side onto "+
			"another key with new metadata, the least any client must add to give a streamed object metadata known only "+
			"at its end. Peak RSS is each process's VmHWM after its transfer. The store's own speed bounds both sides; %s",
		size>>20, p4StoreNotes[kind][0], streamPartSize>>20, streamConcurrency, p4StoreNotes[kind][1]))
	return fig, nil
}

// streamSluice copies the artifact with a worker process and returns its
// timing, its peak RSS and the result URL it copied.
func (r *run) streamSluice(ctx context.Context, st *stack, name string, size int64) (transfer, string, error) {
	stopStore, err := r.startStore(ctx, st, name)
	if err != nil {
		return transfer{}, "", err
	}
	defer stopStore()
	w, err := r.startWorker(ctx, st, name, map[string]string{"SLUICE_POLL_FIRST": "10ms"})
	if err != nil {
		return transfer{}, "", err
	}
	defer w.stop(30 * time.Second)
	tr, err := st.track(name)
	if err != nil {
		return transfer{}, "", err
	}
	defer tr.close()
	id := name + "-job"
	at, err := st.publishJobs(ctx, []string{id}, fmt.Sprintf("%s [sim:size=%d]", instant, size))
	if err != nil {
		return transfer{}, "", err
	}
	if err := tr.waitEnded(ctx, 1, 10*time.Minute); err != nil {
		return transfer{}, "", err
	}
	end, ok := tr.at("succeeded", id)
	if !ok {
		return transfer{}, "", fmt.Errorf("%s did not succeed; see %s", id, w.log.Name())
	}
	stats, err := w.stats()
	if err != nil {
		return transfer{}, "", err
	}
	events, err := st.js.Stream(ctx, contract.EventsStream)
	if err != nil {
		return transfer{}, "", err
	}
	ev, err := events.GetLastMsgForSubject(ctx, contract.EventSubject("video", "succeeded"))
	if err != nil {
		return transfer{}, "", err
	}
	var e struct {
		Subject string `json:"subject"`
		Data    struct {
			Artifacts []struct {
				Size   int64  `json:"size"`
				Source string `json:"source"`
			} `json:"artifacts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ev.Data, &e); err != nil || e.Subject != id || len(e.Data.Artifacts) != 1 || e.Data.Artifacts[0].Size != size {
		return transfer{}, "", fmt.Errorf("unexpected terminal event %s (%v)", ev.Data, err)
	}
	return transfer{elapsed: end.Sub(at[id]), peakRSS: stats.HWM}, e.Data.Artifacts[0].Source, nil
}

// streamDirect copies url with the direct upload process.
func (r *run) streamDirect(ctx context.Context, st *stack, name, url string, size int64) (transfer, error) {
	stopStore, err := r.startStore(ctx, st, name)
	if err != nil {
		return transfer{}, err
	}
	defer stopStore()
	args := []string{"upload", "-url", url, "-s3", st.s3Endpoint, "-bucket", bucket, "-key", "direct/" + name + ".mp4",
		"-part-size", strconv.Itoa(streamPartSize), "-concurrency", strconv.Itoa(streamConcurrency)}
	p, err := startProcess(name, r.o.Self, args, nil, st.dir)
	if err != nil {
		return transfer{}, err
	}
	line, err := p.line(ctx, "RESULT", 10*time.Minute)
	if err != nil {
		p.stop(5 * time.Second)
		return transfer{}, err
	}
	if err := p.wait(ctx); err != nil {
		return transfer{}, fmt.Errorf("direct upload: %w", err)
	}
	var res DirectResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return transfer{}, fmt.Errorf("direct upload result %q: %w", line, err)
	}
	if res.Bytes != size {
		return transfer{}, fmt.Errorf("direct upload copied %d bytes, want %d", res.Bytes, size)
	}
	return transfer{elapsed: res.Elapsed, finalize: res.Copy, peakRSS: res.PeakRSS}, nil
}

// p4Store returns the store P4 uses and, for versitygw, its binary.
func (r *run) p4Store() (kind, bin string, err error) {
	switch kind = cmp.Or(r.o.P4Store, "versitygw"); kind {
	case "embedded":
		return kind, "", nil
	case "versitygw":
		bin = cmp.Or(r.o.VersityGW, filepath.Join(filepath.Dir(r.o.Self), "versitygw"))
		if _, err := os.Stat(bin); err != nil {
			return kind, "", fmt.Errorf("versitygw binary: %w (make versitygw builds it into bin/; -p4-store embedded uses the embedded store instead)", err)
		}
		return kind, bin, nil
	}
	return kind, "", fmt.Errorf("P4 store %q: want versitygw or embedded", kind)
}

// p4StoreNotes describes each store of P4: what it is, and what its
// server-side copy costs.
var p4StoreNotes = map[string][2]string{
	"versitygw": {"versitygw with its posix backend (bin/versitygw, the version pinned in go.mod; path-style, on loopback)",
		"versitygw's CopyObject writes the whole object again through its PutObject path, in one goroutine, computing its " +
			"MD5 and checksum again, and its CompleteMultipartUpload concatenates the parts into a new file (copy_file_range)."},
	"embedded": {"the embedded store (internal/s3dev, served by \"bench s3serve\")",
		"the embedded store's server-side copy rewrites the whole file and hashes it again."},
}

// startStore starts a store process for one transfer, with a fresh data
// directory, and points st at it; stop ends the process and deletes its
// objects (gigabytes each).
func (r *run) startStore(ctx context.Context, st *stack, name string) (stop func(), err error) {
	kind, bin, err := r.p4Store()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(st.dir, name+"-s3")
	var store *process
	stop = func() {
		if store != nil {
			store.stop(10 * time.Second)
		}
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	if kind == "embedded" {
		if store, err = startProcess(name+"-s3", r.o.Self, []string{"s3serve", "-dir", dir}, nil, st.dir); err != nil {
			return nil, err
		}
		st.s3Endpoint, err = store.line(ctx, "READY", 30*time.Second)
		return stop, err
	}
	store, st.s3Endpoint, err = startVersityGW(ctx, bin, name+"-s3", dir, st.dir)
	return stop, err
}

// startVersityGW serves S3 from dir with versitygw's posix backend on a
// loopback port (path-style, the credentials and region the worker and the
// direct upload are given), waits until it answers and creates the bench
// bucket. Object metadata goes into extended attributes, or into a sidecar
// directory where the file system has no user xattrs.
func startVersityGW(ctx context.Context, bin, name, dir, logDir string) (*process, string, error) {
	data, meta := filepath.Join(dir, "data"), filepath.Join(dir, "meta")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := []string{"--access", s3dev.AccessKeyID, "--secret", s3dev.SecretAccessKey, "--region", s3dev.Region,
		"--port", addr, "--health", "/health", "--quiet", "--keep-alive", "posix"}
	if syscall.Setxattr(data, "user.sluice-bench", []byte("1"), 0) != nil {
		if err := os.MkdirAll(meta, 0o755); err != nil {
			return nil, "", err
		}
		args = append(args, "--sidecar", meta)
	}
	p, err := startProcess(name, bin, append(args, data), nil, logDir)
	if err != nil {
		return nil, "", err
	}
	endpoint := "http://" + addr
	err = waitHTTP(ctx, endpoint+"/health", 30*time.Second, p.done)
	if err == nil {
		err = createBucket(ctx, endpoint)
	}
	if err != nil {
		p.stop(5 * time.Second)
		return nil, "", fmt.Errorf("versitygw: %w; see %s", err, p.log.Name())
	}
	return p, endpoint, nil
}

// createBucket creates the bench bucket at endpoint.
func createBucket(ctx context.Context, endpoint string) error {
	client, err := artifacts.NewS3Client(ctx, artifacts.S3Config{
		Endpoint: endpoint, Region: s3dev.Region, PathStyle: true,
		AccessKeyID: s3dev.AccessKeyID, SecretAccessKey: s3dev.SecretAccessKey,
	})
	if err != nil {
		return err
	}
	_, err = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	return err
}

func mibps(size int64, d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
