package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/natsembed"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// ServeS3 serves the embedded S3-compatible store (package s3dev) with the
// bench bucket from dir until ctx ends; ready receives its endpoint. P4
// with -p4-store embedded runs it in a process of its own, so that the
// parts it holds in memory are not counted against the worker or the
// direct upload.
func ServeS3(ctx context.Context, dir string, ready func(endpoint string)) error {
	srv, err := s3dev.Start(ctx, s3dev.Config{Dir: dir, Buckets: []string{bucket}})
	if err != nil {
		return err
	}
	ready(srv.Endpoint())
	<-ctx.Done()
	return srv.Close()
}

// ServeNATS serves an embedded NATS server with JetStream (package
// natsembed, the nats-server library) on a loopback port with its store in
// dir until ctx ends; ready receives its client URL. The sluice side of
// "bench peer" runs it in a process of its own, so that the store's CPU
// time is read apart from the worker's and the harness's.
func ServeNATS(ctx context.Context, dir string, ready func(url string)) error {
	srv, err := natsembed.Start(natsembed.Config{Port: -1, StoreDir: dir})
	if err != nil {
		return err
	}
	ready(srv.ClientURL())
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

// DirectUpload configures RunDirectUpload.
type DirectUpload struct {
	// URL is downloaded and streamed into Bucket/Key at S3Endpoint.
	URL, S3Endpoint, Bucket, Key string
	// PartSize and Concurrency configure the transfer manager.
	PartSize    int64
	Concurrency int
}

// DirectResult is what RunDirectUpload measured in its own process.
type DirectResult struct {
	Bytes int64
	// Elapsed is the download and upload; Copy the server-side copy after
	// it.
	Elapsed, Copy time.Duration
	// PeakRSS is the process's VmHWM after the upload.
	PeakRSS uint64
}

// RunDirectUpload is P4's baseline: it streams one download straight into
// the transfer manager's UploadObject, with the part size and concurrency
// the worker's Store uses, and no hashing, staging or checkpoint. Then,
// timed apart, it copies the object server-side onto Key+".final" with new
// metadata: the least any client must add to give a streamed object
// metadata known only at its end (sluice's sha256).
func RunDirectUpload(ctx context.Context, o DirectUpload) (DirectResult, error) {
	client, err := artifacts.NewS3Client(ctx, artifacts.S3Config{
		Endpoint: o.S3Endpoint, Region: s3dev.Region, PathStyle: true,
		AccessKeyID: s3dev.AccessKeyID, SecretAccessKey: s3dev.SecretAccessKey,
	})
	if err != nil {
		return DirectResult{}, err
	}
	tm := transfermanager.New(client, func(opts *transfermanager.Options) {
		opts.PartSizeBytes = o.PartSize
		opts.MultipartUploadThreshold = o.PartSize
		opts.Concurrency = o.Concurrency
	})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
	if err != nil {
		return DirectResult{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return DirectResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return DirectResult{}, fmt.Errorf("download: %s", resp.Status)
	}
	body := &countingReader{r: resp.Body}
	if _, err := tm.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(o.Bucket), Key: aws.String(o.Key), Body: body, ContentType: aws.String("video/mp4"),
	}); err != nil {
		return DirectResult{}, fmt.Errorf("upload: %w", err)
	}
	res := DirectResult{Bytes: body.n, Elapsed: time.Since(start)}
	start = time.Now()
	if _, err := client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: aws.String(o.Bucket), Key: aws.String(o.Key + ".final"), CopySource: aws.String(o.Bucket + "/" + o.Key),
		MetadataDirective: types.MetadataDirectiveReplace, ContentType: aws.String("video/mp4"),
		Metadata: map[string]string{"bench": "final"},
	}); err != nil {
		return res, fmt.Errorf("copy: %w", err)
	}
	res.Copy = time.Since(start)
	st, err := readProcStats(os.Getpid())
	if err != nil {
		return res, err
	}
	res.PeakRSS = st.HWM
	return res, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
