package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// FloorConfig configures the floor pipeline.
type FloorConfig struct {
	// NATSURL is the server holding the contract's streams. Required.
	NATSURL string
	// MediaURL and MediaAPIKey reach the media API (simulator). Required.
	MediaURL, MediaAPIKey string
	// S3Endpoint and Bucket receive the results. Required.
	S3Endpoint, Bucket string
	// Concurrency is how many jobs are held at once. Defaults to 256, the
	// worker's SLUICE_MAX_INFLIGHT default.
	Concurrency int
}

// RunFloor runs the floor pipeline until ctx ends: the same I/O per job as
// a sluice video job and nothing else. It pulls from the contract's video
// consumer for free slots, submits the spec's video body, queries the task
// once with the batch endpoint, downloads the result into memory, writes it
// with one PutObject carrying what the contract wants on every artifact
// (its Content-Type and its sha256 in user metadata, docs/artifacts.md),
// publishes a terminal event with Nats-Msg-Id and acks.
// There is no checkpoint, no progress event, no retry, no limiter and no
// log line. ready is called once it pulls.
func RunFloor(ctx context.Context, cfg FloorConfig, ready func()) error {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 256
	}
	nc, err := nats.Connect(cfg.NATSURL, nats.Name("sluice-bench-floor"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cn, err := js.Consumer(ctx, contract.JobsStream, contract.ConsumerName("video"))
	if err != nil {
		return fmt.Errorf("bind consumer: %w", err)
	}
	s3c, err := artifacts.NewS3Client(ctx, artifacts.S3Config{
		Endpoint: cfg.S3Endpoint, Region: s3dev.Region, PathStyle: true,
		AccessKeyID: s3dev.AccessKeyID, SecretAccessKey: s3dev.SecretAccessKey,
	})
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.Concurrency
	f := &floor{cfg: cfg, js: js, s3: s3c, http: &http.Client{Transport: tr}}

	slots := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	ready()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		free := 1
		for free < cfg.Concurrency {
			select {
			case slots <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		batch, err := cn.Fetch(free, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			for range free {
				<-slots
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			wg.Go(func() {
				defer func() { <-slots }()
				if err := f.job(ctx, msg); err != nil {
					fmt.Printf("ERROR %v\n", err)
					_ = msg.Term()
				}
			})
		}
		for range free - got {
			<-slots
		}
	}
}

type floor struct {
	cfg  FloorConfig
	js   jetstream.JetStream
	s3   *s3.Client
	http *http.Client
}

// job runs one message through the floor's I/O.
func (f *floor) job(ctx context.Context, msg jetstream.Msg) error {
	var spec struct {
		ID    string          `json:"id"`
		Video json.RawMessage `json:"video"`
	}
	if err := json.Unmarshal(msg.Data(), &spec); err != nil {
		return err
	}
	var task struct {
		Output struct {
			TaskID string `json:"task_id"`
		} `json:"output"`
	}
	if err := f.call(ctx, "/api/llm/v1/videos/generations", spec.Video, &task); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	var tasks []struct {
		Output struct {
			TaskStatus string   `json:"task_status"`
			Results    []string `json:"results"`
		} `json:"output"`
	}
	body, _ := json.Marshal(map[string]any{"task_ids": []string{task.Output.TaskID}})
	if err := f.call(ctx, "/api/llm/v1/tasks", body, &tasks); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	if len(tasks) != 1 || tasks[0].Output.TaskStatus != "succeeded" || len(tasks[0].Output.Results) == 0 {
		return fmt.Errorf("task %s not succeeded at its first query: %+v", task.Output.TaskID, tasks)
	}
	data, err := f.get(ctx, tasks[0].Output.Results[0])
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	key := "floor/video/" + spec.ID + "/result-0.mp4"
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(f.cfg.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("video/mp4"),
		Metadata: map[string]string{artifacts.MetadataSHA256: sum},
	}); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	ev, _ := json.Marshal(map[string]any{
		"specversion": "1.0", "id": contract.EventID(spec.ID, "succeeded"), "source": "sluice/floor",
		"type": "sluice.job.succeeded", "subject": spec.ID, "datacontenttype": "application/json",
		"data": map[string]any{"job_id": spec.ID, "status": "succeeded", "artifacts": []map[string]any{
			{"url": "s3://" + f.cfg.Bucket + "/" + key, "bucket": f.cfg.Bucket, "key": key, "size": len(data), "sha256": sum, "content_type": "video/mp4"},
		}},
	})
	m := nats.NewMsg(contract.EventSubject("video", "succeeded"))
	m.Data = ev
	m.Header.Set(contract.HeaderMsgID, contract.EventID(spec.ID, "succeeded"))
	if _, err := f.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return msg.Ack()
}

// call POSTs body to the media API and decodes the answer into out.
func (f *floor) call(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cfg.MediaURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.cfg.MediaAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-MultiModal-Async", "true")
	resp, err := f.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// get downloads url into memory.
func (f *floor) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return io.ReadAll(resp.Body)
}
