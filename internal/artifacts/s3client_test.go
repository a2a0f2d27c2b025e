package artifacts

import (
	"context"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// TestS3ClientTransport checks the transport NewS3Client builds when no
// HTTP client is given: idle connections for every copy slot, and a send
// buffer that takes a PUT of the usual small object (headers and body) in
// one write instead of 4 KiB and then a 32 KiB buffer allocated per
// request.
func TestS3ClientTransport(t *testing.T) {
	t.Parallel()
	c, err := NewS3Client(context.Background(), S3Config{Endpoint: "http://127.0.0.1:9", AccessKeyID: "k", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	bc, ok := c.Options().HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("HTTP client is %T, want the SDK's buildable client", c.Options().HTTPClient)
	}
	tr := bc.GetTransport()
	if tr.MaxIdleConnsPerHost != maxIdleS3Conns {
		t.Errorf("MaxIdleConnsPerHost = %d, want %d", tr.MaxIdleConnsPerHost, maxIdleS3Conns)
	}
	if tr.WriteBufferSize < 64<<10+4<<10 {
		t.Errorf("WriteBufferSize = %d: a 64 KiB PUT and its headers do not fit", tr.WriteBufferSize)
	}
}
