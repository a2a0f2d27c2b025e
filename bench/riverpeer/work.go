package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// VideoArgs is a video job: the job's id and the media API's submit body
// (the "video" part of a sluice job spec).
type VideoArgs struct {
	JobID string          `json:"job_id"`
	Video json.RawMessage `json:"video"`
}

// Kind is River's job kind.
func (VideoArgs) Kind() string { return "video" }

// taskCursor is the resumable cursor of a video job: once TaskID is set
// the task was paid for, and a later attempt (after a snooze, an error or
// a restart) polls it instead of submitting again.
type taskCursor struct {
	TaskID string `json:"task_id"`
	Polls  int    `json:"polls"`
}

// videoWorker does what a sluice video job does: submit, wait for the task
// with JobSnooze, copy each result into S3 with its sha256 in the object's
// user metadata, complete.
type videoWorker struct {
	river.WorkerDefaults[VideoArgs]
	media     *mediaClient
	s3        *s3.Client
	bucket    string
	firstWait time.Duration
	pollEvery time.Duration
}

func (w *videoWorker) Work(ctx context.Context, job *river.Job[VideoArgs]) error {
	river.ResumableStepCursor(ctx, "task", nil, func(ctx context.Context, cur taskCursor) error {
		if cur.TaskID == "" {
			id, err := w.media.submit(ctx, job.Args.Video)
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			if err := river.ResumableSetCursor(ctx, taskCursor{TaskID: id}); err != nil {
				return err
			}
			return river.JobSnooze(w.firstWait)
		}
		t, err := w.media.query(ctx, cur.TaskID)
		if err != nil {
			return fmt.Errorf("query %s: %w", cur.TaskID, err)
		}
		switch t.Output.TaskStatus {
		case "pending", "running":
			if err := river.ResumableSetCursor(ctx, taskCursor{TaskID: cur.TaskID, Polls: cur.Polls + 1}); err != nil {
				return err
			}
			return river.JobSnooze(w.pollEvery)
		case "succeeded":
			for i, src := range t.Output.Results {
				if err := w.copy(ctx, src, fmt.Sprintf("river/video/%s/result-%d.mp4", job.Args.JobID, i)); err != nil {
					return fmt.Errorf("copy result %d: %w", i, err)
				}
			}
			return nil
		default:
			return river.JobCancel(fmt.Errorf("task %s ended %s: %s", cur.TaskID, t.Output.TaskStatus, t.Output.ErrorMessage))
		}
	})
	return nil
}

// copy downloads src into memory and writes it to key with its sha256 in
// the object's user metadata (the results are small: 64 KiB in the bench).
func (w *videoWorker) copy(ctx context.Context, src, key string) error {
	data, err := w.media.get(ctx, src)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	_, err = w.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(w.bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("video/mp4"),
		Metadata: map[string]string{"sha256": hex.EncodeToString(sum[:])},
	})
	return err
}

// runWork runs the River worker until SIGTERM or SIGINT; it prints READY
// once the client has started.
func runWork(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("work", flag.ExitOnError)
	dbURL := fs.String("db", "", "Postgres URL of a database with River's migrations applied")
	mediaURL := fs.String("media", "", "media API base URL (its key in MEDIA_API_KEY)")
	s3Endpoint := fs.String("s3", "", "S3 endpoint, path-style (credentials in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)")
	bucket := fs.String("bucket", "", "bucket of the results")
	maxWorkers := fs.Int("max-workers", 256, "jobs worked at once (sluice's SLUICE_MAX_INFLIGHT default)")
	firstWait := fs.Duration("first-wait", 5*time.Millisecond, "snooze after the submit before the first query (sluice's bench sets SLUICE_POLL_FIRST=5ms)")
	pollEvery := fs.Duration("poll-every", 5*time.Second, "snooze between later queries (sluice's SLUICE_POLL_INTERVAL default)")
	fetchCooldown := fs.Duration("fetch-cooldown", river.FetchCooldownDefault, "River's FetchCooldown")
	s3WriteBuffer := fs.Int("s3-write-buffer", envInt("RIVERPEER_S3_WRITE_BUFFER"),
		"send buffer of the S3 client's connections in bytes; 0 leaves the SDK's client as it is (net/http's 4 KiB); default from RIVERPEER_S3_WRITE_BUFFER, which bench peer passes on")
	fetchPoll := fs.Duration("fetch-poll-interval", 100*time.Millisecond, "River's FetchPollInterval (default 1s): how soon a snoozed job is fetched again on a quiet queue")
	_ = fs.Parse(args)
	if *dbURL == "" || *mediaURL == "" || *s3Endpoint == "" || *bucket == "" {
		return errors.New("work: -db, -media, -s3 and -bucket are required")
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = *maxWorkers
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	s3Opts := s3.Options{
		Region:       cmp.Or(os.Getenv("AWS_REGION"), "us-east-1"),
		BaseEndpoint: aws.String(*s3Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
	}
	if *s3WriteBuffer > 0 {
		s3Opts.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.WriteBufferSize = *s3WriteBuffer })
	}
	s3c := s3.New(s3Opts)
	workers := river.NewWorkers()
	river.AddWorker(workers, &videoWorker{
		media: &mediaClient{base: *mediaURL, key: os.Getenv("MEDIA_API_KEY"), http: hc},
		s3:    s3c, bucket: *bucket, firstWait: *firstWait, pollEvery: *pollEvery,
	})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *maxWorkers}},
		FetchCooldown:     *fetchCooldown,
		FetchPollInterval: *fetchPoll,
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Println("READY")
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

// mediaClient speaks the media API (the simulator of cmd/simulator):
// submit a video task, query one task, download a result.
type mediaClient struct {
	base, key string
	http      *http.Client
}

type task struct {
	Output struct {
		TaskID       string   `json:"task_id"`
		TaskStatus   string   `json:"task_status"`
		Results      []string `json:"results"`
		ErrorMessage string   `json:"error_message"`
	} `json:"output"`
}

func (c *mediaClient) submit(ctx context.Context, body []byte) (string, error) {
	var t task
	if err := c.do(ctx, http.MethodPost, "/api/llm/v1/videos/generations", body, &t); err != nil {
		return "", err
	}
	if t.Output.TaskID == "" {
		return "", errors.New("no task id in the answer")
	}
	return t.Output.TaskID, nil
}

func (c *mediaClient) query(ctx context.Context, id string) (task, error) {
	var t task
	err := c.do(ctx, http.MethodGet, "/api/llm/v1/tasks/"+url.PathEscape(id), nil, &t)
	return t, err
}

func (c *mediaClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPost {
		req.Header.Set("X-MultiModal-Async", "true")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %.200s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

func (c *mediaClient) get(ctx context.Context, src string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download: %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// envInt is the integer in the environment variable name, or 0.
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}
