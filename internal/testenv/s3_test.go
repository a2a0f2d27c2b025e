package testenv_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.StartS3(t)
	if env.Endpoint == "" || env.Bucket != testenv.S3Bucket {
		t.Fatalf("endpoint %q bucket %q", env.Endpoint, env.Bucket)
	}
	want := []byte("hello, store")
	_, err := env.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(env.Bucket),
		Key:    aws.String("dir/hello.txt"),
		Body:   bytes.NewReader(want),
	})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	out, err := env.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(env.Bucket), Key: aws.String("dir/hello.txt")})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("get = %q, %v; want %q", got, err, want)
	}
	onDisk, err := os.ReadFile(env.Server.ObjectPath(env.Bucket, "dir/hello.txt"))
	if err != nil || !bytes.Equal(onDisk, want) {
		t.Fatalf("file on disk = %q, %v; want %q", onDisk, err, want)
	}
}
