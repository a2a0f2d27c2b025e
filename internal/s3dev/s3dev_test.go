package s3dev_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluice-dev/sluice/internal/s3dev"
)

const bucket = "dev-bucket"

type testBundle struct {
	srv    *s3dev.Server
	client *s3.Client
	dir    string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	dir := t.TempDir()
	srv, err := s3dev.Start(context.Background(), s3dev.Config{Dir: dir, Buckets: []string{bucket}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &testBundle{srv: srv, client: newClient(srv.Endpoint()), dir: dir}
}

func newClient(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       s3dev.Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3dev.AccessKeyID, s3dev.SecretAccessKey, ""),
	})
}

func (b *testBundle) get(t *testing.T, key string) ([]byte, *s3.GetObjectOutput) {
	t.Helper()
	out, err := b.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return body, out
}

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("PutKeepsContentTypeAndMetadataAndWritesAPlainFile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:      aws.String(bucket),
			Key:         aws.String("a/b/clip.mp4"),
			Body:        bytes.NewReader([]byte("video bytes")),
			ContentType: aws.String("video/mp4"),
			Metadata:    map[string]string{"sha256": "abc123"},
		})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		head, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("a/b/clip.mp4")})
		if err != nil {
			t.Fatalf("HeadObject: %v", err)
		}
		if got := aws.ToString(head.ContentType); got != "video/mp4" {
			t.Errorf("Content-Type = %q, want video/mp4", got)
		}
		if got := head.Metadata["sha256"]; got != "abc123" {
			t.Errorf("metadata sha256 = %q, want abc123 (all: %v)", got, head.Metadata)
		}
		if len(head.Metadata) != 1 {
			t.Errorf("metadata = %v, want only sha256 (request headers must not be stored)", head.Metadata)
		}
		onDisk, err := os.ReadFile(b.srv.ObjectPath(bucket, "a/b/clip.mp4"))
		if err != nil || string(onDisk) != "video bytes" {
			t.Errorf("file = %q, %v", onDisk, err)
		}
	})

	t.Run("MultipartUploadAndCopyWithReplacedMetadata", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		data := make([]byte, 12<<20)
		_, _ = rand.Read(data)
		tm := transfermanager.New(b.client, func(o *transfermanager.Options) {
			o.PartSizeBytes = 5 << 20
			o.MultipartUploadThreshold = 5 << 20
		})
		_, err := tm.UploadObject(ctx, &transfermanager.UploadObjectInput{
			Bucket:      aws.String(bucket),
			Key:         aws.String("staging/x"),
			Body:        io.MultiReader(bytes.NewReader(data)), // not seekable: streamed in parts
			ContentType: aws.String("application/octet-stream"),
		})
		if err != nil {
			t.Fatalf("UploadObject: %v", err)
		}
		_, err = b.client.CopyObject(ctx, &s3.CopyObjectInput{
			Bucket:            aws.String(bucket),
			Key:               aws.String("final/y.bin"),
			CopySource:        aws.String(bucket + "/staging/x"),
			MetadataDirective: types.MetadataDirectiveReplace,
			ContentType:       aws.String("video/mp4"),
			Metadata:          map[string]string{"sha256": "feed"},
		})
		if err != nil {
			t.Fatalf("CopyObject: %v", err)
		}
		got, out := b.get(t, "final/y.bin")
		if !bytes.Equal(got, data) {
			t.Fatalf("copied body differs: %d bytes, want %d", len(got), len(data))
		}
		if aws.ToString(out.ContentType) != "video/mp4" || out.Metadata["sha256"] != "feed" {
			t.Errorf("Content-Type %q metadata %v", aws.ToString(out.ContentType), out.Metadata)
		}
	})

	t.Run("CopyOntoItselfIsRefusedAndKeepsTheObject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader([]byte("keep me"))})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		_, err = b.client.CopyObject(ctx, &s3.CopyObjectInput{
			Bucket: aws.String(bucket), Key: aws.String("k"), CopySource: aws.String(bucket + "/k"),
			MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"sha256": "x"},
		})
		if err == nil {
			t.Fatal("CopyObject onto itself succeeded, want an error")
		}
		if got, _ := b.get(t, "k"); string(got) != "keep me" {
			t.Fatalf("object = %q after refused copy", got)
		}
	})

	t.Run("PresignedGet", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("p/q.txt"), Body: bytes.NewReader([]byte("presigned")), ContentType: aws.String("text/plain")})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		req, err := s3.NewPresignClient(b.client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("p/q.txt")})
		if err != nil {
			t.Fatalf("presign: %v", err)
		}
		resp, err := http.Get(req.URL)
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "presigned" || resp.Header.Get("Content-Type") != "text/plain" {
			t.Fatalf("GET = %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})

	t.Run("ObjectsSurviveARestart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep.txt"), Body: bytes.NewReader([]byte("still here")), Metadata: map[string]string{"sha256": "s"}})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		if err := b.srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		srv2, err := s3dev.Start(ctx, s3dev.Config{Dir: b.dir, Buckets: []string{bucket}})
		if err != nil {
			t.Fatalf("restart: %v", err)
		}
		defer srv2.Close()
		b2 := &testBundle{srv: srv2, client: newClient(srv2.Endpoint())}
		got, out := b2.get(t, "keep.txt")
		if string(got) != "still here" || out.Metadata["sha256"] != "s" {
			t.Fatalf("after restart: %q %v", got, out.Metadata)
		}
	})

	t.Run("MissingKeyIsNoSuchKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("nope")})
		if _, ok := errors.AsType[*types.NoSuchKey](err); !ok {
			t.Fatalf("GetObject missing = %v, want NoSuchKey", err)
		}
	})
}

func TestStartConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  s3dev.Config
	}{
		{"NoDir", s3dev.Config{}},
		{"PublicAddress", s3dev.Config{Dir: "x", Addr: "0.0.0.0:0"}},
		{"BadAddress", s3dev.Config{Dir: "x", Addr: "nonsense"}},
		{"BadBucket", s3dev.Config{Dir: "x", Buckets: []string{"B"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.cfg.Dir != "" {
				tt.cfg.Dir = t.TempDir()
			}
			srv, err := s3dev.Start(context.Background(), tt.cfg)
			if err == nil {
				_ = srv.Close()
				t.Fatalf("Start(%+v) succeeded, want an error", tt.cfg)
			}
		})
	}
}

func TestCloseWithAnUnusedConnection(t *testing.T) {
	t.Parallel()
	srv, err := s3dev.Start(context.Background(), s3dev.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	// A client transport may dial a connection it then never uses; it
	// must not make Close fail.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	// The server accepts in order: once a later connection has been
	// answered, the unused one is accepted too.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(srv.Endpoint() + "/")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	_ = resp.Body.Close()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestCloseOnContextEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := s3dev.Start(ctx, s3dev.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	cancel()
	// Close after the context closed the server is still fine and waits
	// for the shutdown to finish.
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := http.Get(srv.Endpoint()); err == nil {
		t.Fatal("server still answers after its context ended")
	}
}
